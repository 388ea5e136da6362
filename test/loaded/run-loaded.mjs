#!/usr/bin/env node
// Runs the suite exactly as `npm test` does while two busy loops keep two cores at 100 %, to prove
// that no test's outcome depends on how fast the machine is (a slow machine must make the suite
// slower, never red). Arguments are passed on to vitest, e.g.
// `npm run test:loaded -- test/integration/lifecycle-redis-down.test.ts`.
// Prints the wall time and exits with the suite's exit code. The busy loops are children of this
// script, stopped by PID on every way out: the suite ending, a failure to start it, Ctrl-C, SIGTERM.
import { spawn } from 'node:child_process';

const BUSY_LOOPS = Number(process.env.LOADED_BUSY_LOOPS ?? 2);
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

const busy = [];
for (let i = 0; i < BUSY_LOOPS; i++) {
  // A bare spin with no I/O: it holds one core for as long as it lives.
  const child = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
  busy.push(child);
}
console.log(`test:loaded: ${busy.length} busy loops, pids ${busy.map((c) => c.pid).join(' ')}`);

let stopped = false;
function stopBusy() {
  if (stopped) return;
  stopped = true;
  for (const child of busy) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}
process.on('exit', stopBusy);

const started = process.hrtime.bigint();
const args = process.argv.slice(2);
// detached: the suite gets its own process group, so Ctrl-C here can stop all of it (vitest, its
// workers and the gateways and redis-servers they started) and nothing else.
const suite = spawn(npm, ['test', ...(args.length ? ['--', ...args] : [])], {
  stdio: 'inherit',
  // Tests that only this run takes (test/integration/quota-loaded-exact.test.ts, leases off).
  env: { ...process.env, TOLLGATE_LOADED_SUITE: '1' },
  detached: process.platform !== 'win32',
});

/** Signals every process of the suite's group (npm, vitest, its workers, what they started). */
function signalSuite(signal) {
  try {
    if (process.platform !== 'win32') process.kill(-suite.pid, signal);
    else suite.kill(signal);
  } catch {
    // already gone
  }
}

function forward(signal) {
  stopBusy();
  signalSuite(signal);
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    forward(signal);
    // Second signal or a stuck suite: leave anyway, with the conventional 128 + signal code.
    setTimeout(() => process.exit(130), 10_000).unref();
  });
}

suite.on('error', (err) => {
  console.error(`test:loaded: could not start npm test: ${err.message}`);
  stopBusy();
  process.exit(1);
});
suite.on('exit', (code, signal) => {
  stopBusy();
  // A test that failed before its cleanup can leave a gateway or redis-server behind, orphaned but
  // still in the suite's process group: nothing of this run outlives it.
  signalSuite('SIGKILL');
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const minutes = Math.floor(seconds / 60);
  const rest = (seconds - minutes * 60).toFixed(1);
  const result = code === 0 ? 'passed' : `failed (exit ${code ?? signal})`;
  console.log(`test:loaded: suite ${result} in ${minutes} min ${rest} s wall time, with ${busy.length} busy loops`);
  process.exit(code ?? 1);
});
