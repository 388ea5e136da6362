import { describe, expect, it } from 'vitest';
import { TurnBatches } from '../../src/store/redis/turn-batches.js';

/** A TurnBatches whose send records each batch and answers each item with `group:item:position`. */
function recording(maxSize = 100, fail?: Error) {
  const sent: string[][] = [];
  const batches = new TurnBatches<string, string>(async (items) => {
    sent.push(items);
    if (fail) throw fail;
    return items.map((item, i) => `${item}@${i}`);
  }, maxSize);
  return { batches, sent };
}

describe('TurnBatches', () => {
  it('sends the calls of one turn in one batch per group, in call order, and answers each its own result', async () => {
    const { batches, sent } = recording();
    const answers = await Promise.all([
      batches.add('a', 'a1'),
      batches.add('b', 'b1'),
      batches.add('a', 'a2'),
      batches.add('a', 'a3'),
      batches.add('b', 'b2'),
    ]);
    expect(answers).toEqual(['a1@0', 'b1@0', 'a2@1', 'a3@2', 'b2@1']);
    expect(sent).toEqual([
      ['a1', 'a2', 'a3'],
      ['b1', 'b2'],
    ]);
  });

  it('sends calls of different turns separately', async () => {
    const { batches, sent } = recording();
    expect(await batches.add('a', 'a1')).toBe('a1@0');
    expect(await batches.add('a', 'a2')).toBe('a2@0');
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toEqual([['a1'], ['a2']]);
  });

  it('sends a full batch at once and starts the next', async () => {
    const { batches, sent } = recording(3);
    const calls = Array.from({ length: 7 }, (_, i) => batches.add('a', `a${i}`));
    // The first two batches went out before the turn ended.
    expect(sent).toEqual([
      ['a0', 'a1', 'a2'],
      ['a3', 'a4', 'a5'],
    ]);
    expect(await Promise.all(calls)).toEqual(['a0@0', 'a1@1', 'a2@2', 'a3@0', 'a4@1', 'a5@2', 'a6@0']);
    expect(sent).toHaveLength(3);
  });

  it('fails every call of a batch whose send fails, and only those', async () => {
    const failing = recording(100, new Error('connection lost'));
    const results = await Promise.allSettled([failing.batches.add('a', 'a1'), failing.batches.add('a', 'a2')]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    const { batches } = recording();
    expect(await batches.add('a', 'a3')).toBe('a3@0');
  });
});
