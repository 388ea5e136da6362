import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A file for TOLLGATE_TEST_CLOCK_FILE (src/gateway/test-clock.ts), which every gateway of a stack
 * reads on each quota call: `set(atMs)` makes their quota clocks read `atMs` now (and run on from
 * there). Each write goes to a file beside it and is renamed over it, so a gateway reading at
 * that moment sees the old offset or the new one, never the empty file that writeFileSync's
 * truncation leaves for an instant (read as an offset of 0: one quota step on the real clock,
 * days away from the test's). A reader beside a writer in a loop saw that empty file in most of
 * its reads; with the rename, in none.
 */
export function testClockFile(atMs?: number): { file: string; set: (atMs: number) => void } {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-clock-'));
  const file = join(dir, 'offset-ms');
  const write = (offsetMs: number) => {
    writeFileSync(join(dir, 'offset-ms.next'), String(offsetMs));
    renameSync(join(dir, 'offset-ms.next'), file);
  };
  write(atMs === undefined ? 0 : atMs - Date.now());
  return { file, set: (at) => write(at - Date.now()) };
}
