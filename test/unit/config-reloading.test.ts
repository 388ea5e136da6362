import { mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Reloading } from '../../src/config/reloading.js';
import { pollFor } from '../helpers/poll.js';

// A config file written in place (truncated, then written) is empty for a moment, and an empty
// gateway.yaml is a valid one. The poll that falls into that moment must not apply it: the
// reload waits until the file has stayed the same (src/config/reloading.ts, SETTLE_MS).

const open: Array<Reloading<string>> = [];
afterEach(() => {
  for (const r of open.splice(0)) r.close();
});

// (The poll itself, every minute here, stays out of the way: the tests play its part, and the
// integration tests that reload gateway.yaml and plans.yaml cover the poll.)
function following(content: string, pollIntervalMs = 60_000) {
  const path = join(mkdtempSync(join(tmpdir(), 'tollgate-reloading-')), 'gateway.yaml');
  writeFileSync(path, content);
  const reloading = new Reloading(path, () => readFileSync(path, 'utf8'), pino({ level: 'silent' }), pollIntervalMs);
  open.push(reloading);
  const applied: string[] = [];
  reloading.onChange((value) => applied.push(value));
  return { path, reloading, applied };
}

describe('a config file that follows its changes', () => {
  it('never applies the empty file a write in place leaves for a moment, only what was written', async () => {
    const { path, reloading, applied } = following('cost: 4\n');
    // The poll sees the file truncated (what the old reload read at once), then the writer finishes.
    writeFileSync(path, '');
    reloading.changedTo(statSync(path));
    writeFileSync(path, 'cost: 2\n');
    await pollFor(() => applied.length > 0, 'reload');
    expect(applied).toEqual(['cost: 2\n']);
    expect(reloading.current()).toBe('cost: 2\n');
  });

  it('refuses and keeps the last good value when the file cannot be read at all (a symlink to itself)', async () => {
    const { path, reloading, applied } = following('cost: 4\n');
    const loop = join(dirname(path), 'loop.yaml');
    symlinkSync(loop, loop);
    const looping = new Reloading(path, () => readFileSync(path, 'utf8'), pino({ level: 'silent' }), 60_000);
    open.push(looping);
    rmSync(path);
    symlinkSync(loop, path);
    // Before: the stat's ELOOP escaped the settle timer, an uncaught error instead of a refused reload.
    let refused = false;
    const spy = looping.reload.bind(looping);
    looping.reload = (reason: string) => {
      const ok = spy(reason);
      if (!ok) refused = true;
      return ok;
    };
    looping.changedTo(statSync(dirname(path)));
    await pollFor(() => refused, 'refused reload');
    expect(looping.current()).toBe('cost: 4\n');
    expect(applied).toEqual([]);
    expect(reloading.current()).toBe('cost: 4\n');
  });

  it('applies a file emptied on purpose once it stays empty', async () => {
    const { path, reloading, applied } = following('cost: 4\n');
    writeFileSync(path, '');
    reloading.changedTo(statSync(path));
    await pollFor(() => applied.length > 0, 'reload');
    expect(applied).toEqual(['']);
  });
});
