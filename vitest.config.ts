import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';
import { LongFilesFirst } from './test/long-files-first.js';

// Node's on-disk compile cache (V8 code of each module, checked against its source's hash) for every
// Node process of the suite: the test workers inherit it, and the harness passes it to the gateways,
// backends and CLI runs it starts (test/harness/tollgate.ts), hundreds of them, each compiling the
// same few hundred modules. A changed file misses the cache and is compiled afresh; it never changes
// what a process does. Set NODE_COMPILE_CACHE to choose the folder, or NODE_DISABLE_COMPILE_CACHE=1.
process.env.NODE_COMPILE_CACHE ??= join(tmpdir(), 'tollgate-test-compile-cache');

export default defineConfig({
  test: {
    // Integration suites start real redis-server and tollgate processes; keep two at a time on 2 cores.
    // fileParallelism stays on: two files at a time, one per core; more would only make them wait.
    maxWorkers: 2,
    // Generous, for a loaded 2-core machine (`npm run test:loaded`): a slow machine must make a test
    // slower, never red. Tests wait for events with their own deadlines; these only catch a hang.
    testTimeout: 300_000,
    hookTimeout: 600_000,
    // expect.poll waits for something to happen; its default (1 s) bets on a fast machine.
    expect: { poll: { timeout: 30_000 } },
    sequence: { sequencer: LongFilesFirst },
    projects: [
      { extends: true, test: { name: 'integration', include: ['test/**/*.test.ts'], exclude: ['test/unit/**'] } },
      // Pure units share their worker processes (no new process and module graph per file: half of
      // their time): they restore what they change (fake timers) and start nothing. They run after
      // the integration files (projects in name order), filling the end of the run.
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'], isolate: false } },
    ],
  },
});
