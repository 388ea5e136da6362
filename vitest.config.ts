import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Integration suites start real redis-server and tollgate processes; keep two at a time on 2 cores.
    // fileParallelism stays on: two files at a time, one per core; more would only make them wait.
    maxWorkers: 2,
    // Generous, for a loaded 2-core machine (`npm run test:loaded`): a slow machine must make a test
    // slower, never red. Tests wait for events with their own deadlines; these only catch a hang.
    testTimeout: 300_000,
    hookTimeout: 600_000,
    // expect.poll waits for something to happen; its default (1 s) bets on a fast machine.
    expect: { poll: { timeout: 30_000 } },
  },
});
