import { describe, expect, it } from 'vitest';
import { LineBatch } from '../../src/observability/log.js';

// LineBatch (src/observability/log.ts) sits between pino and sonic-boom: lines must reach the
// writer complete, in order, and none may stay behind on flush or at exit.

function writer() {
  const writes: string[] = [];
  const calls: string[] = [];
  return {
    writes,
    calls,
    out: {
      write: (data: string) => {
        writes.push(data);
        return true;
      },
      flush: (cb?: (err?: Error) => void) => {
        calls.push('flush');
        cb?.();
      },
      flushSync: () => void calls.push('flushSync'),
    },
  };
}

describe('LineBatch', () => {
  it('hands lines over joined, in order, once the batch holds enough characters', () => {
    const { out, writes } = writer();
    const batch = new LineBatch(out, 10);
    batch.write('aaaa\n');
    expect(writes).toEqual([]);
    batch.write('bbbb\n');
    expect(writes).toEqual(['aaaa\nbbbb\n']);
    batch.write('c\n');
    expect(writes).toEqual(['aaaa\nbbbb\n']);
  });

  it('hands what is pending over before flushing the writer (logger.flush, the timer, exit)', () => {
    const { out, writes, calls } = writer();
    const batch = new LineBatch(out, 1000);
    batch.write('one\n');
    batch.write('two\n');
    let flushed = false;
    batch.flush(() => (flushed = true));
    expect(writes).toEqual(['one\ntwo\n']);
    expect(calls).toEqual(['flush']);
    expect(flushed).toBe(true);
    batch.write('three\n');
    batch.flushSync();
    expect(writes).toEqual(['one\ntwo\n', 'three\n']);
    expect(calls).toEqual(['flush', 'flushSync']);
  });

  it('writes nothing when nothing is pending', () => {
    const { out, writes } = writer();
    const batch = new LineBatch(out, 10);
    batch.handOver();
    batch.flush();
    expect(writes).toEqual([]);
  });
});
