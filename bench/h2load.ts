// The HTTP/2 load generator of the throughput phase (--transport h2): h2load, from nghttp2 (Debian's
// `nghttp2-client`), a C program as wrk is. `h2load -c N -m 1 -D S`: N connections, one stream at a
// time on each, closed loop, the HTTP/2 counterpart of `wrk -cN`. Its summary gives requests,
// statuses and errors; latency percentiles come from its per-request log (--log-file), and its CPU
// time from the shell that runs it (`times`). `apt-get install nghttp2-client`; H2LOAD=/path to use another.
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { requireExecutable } from './executable.js';
import { workDir } from './processes.js';
import type { WrkOptions, WrkResult } from './wrk.js';

/** h2load's path; throws a clear message when it is not installed. */
export function requireH2load(): string {
  return requireExecutable(
    'h2load',
    'H2LOAD',
    '--transport h2 drives its load with h2load, which is not installed: `apt-get install nghttp2-client` (Debian/Ubuntu), ' +
      'or set H2LOAD=/path/to/h2load; or leave h2 out of --transport',
  );
}

let runs = 0;

/** Nearest-rank percentile of sorted values. */
const percentile = (sorted: Float64Array, q: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;

/** One closed-loop HTTP/2 run, `options.connections` connections of one stream at a time each. */
export function runH2load(options: WrkOptions): Promise<WrkResult> {
  const h2load = requireH2load();
  const logFile = join(workDir(), `h2load-${++runs}.tsv`);
  const threads = Math.min(options.threads, options.connections);
  const args = [
    '-c',
    String(options.connections),
    '-t',
    String(threads),
    '-m',
    '1',
    '-D',
    String(options.durationSeconds),
    `--log-file=${logFile}`,
    ...Object.entries(options.headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]),
    options.url,
  ];
  // bash runs h2load (its first argument) with the rest, then `times`: the CPU time of its finished
  // children, user then system, as its last line.
  const shell = ['-c', 'exe=$1; shift; "$exe" "$@"; status=$?; times; exit $status', 'bash', h2load, ...args];
  const [command, commandArgs] = options.cpus === undefined ? ['bash', shell] : ['taskset', ['-c', options.cpus, 'bash', ...shell]];
  return new Promise((resolve, reject) => {
    // detached: its own process group, so the watchdog ends bash and h2load together.
    const child = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    // Seen once on a loaded machine: after streams of 13 s, h2load 1.52 went on sending for 13
    // minutes past -D. A run that overstays is ended and the phase fails rather than hangs.
    let overstayed = false;
    const watchdog = setTimeout(
      () => {
        overstayed = true;
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      },
      (options.durationSeconds + 30) * 1000,
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(watchdog);
      if (overstayed) rmSync(logFile, { force: true });
      if (overstayed) return reject(new Error(`h2load ${args.join(' ')} still ran 30 s after its duration: killed`));
      const fail = (why: string) => reject(new Error(`h2load ${args.join(' ')} ${why} (exit ${code}):\n${out.slice(-2000)}${err}`));
      const finished = /^finished in ([\d.]+)(ms|s), ([\d.]+) req\/s/m.exec(out);
      const requests =
        /^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/m.exec(out);
      const statuses = /^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/m.exec(out);
      const cpu = [...out.matchAll(/^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/gm)].pop();
      if (code !== 0 || !finished || !requests || !statuses) return fail('gave no summary');
      if (/No protocol negotiated|protocol h2 not negotiated/i.test(out)) return fail('could not negotiate h2');
      const durationSeconds = Number(finished[1]) / (finished[2] === 'ms' ? 1000 : 1);
      const [started, done, errored] = [Number(requests[2]), Number(requests[3]), Number(requests[6])];
      if (done === 0) return fail('completed no request');
      let latencies: Float64Array;
      try {
        const lines = readFileSync(logFile, 'utf8').split('\n');
        latencies = Float64Array.from(lines.filter(Boolean).map((line) => Number(line.split('\t')[2]) / 1000)).sort();
      } finally {
        rmSync(logFile, { force: true });
      }
      const cpuMs = cpu ? (60 * Number(cpu[1]) + Number(cpu[2]) + 60 * Number(cpu[3]) + Number(cpu[4])) * 1000 : NaN;
      resolve({
        requests: done,
        sent: started,
        requestsPerSecond: Number(finished[3]),
        durationSeconds,
        non2xx: Number(statuses[3]) + Number(statuses[4]),
        errors: errored,
        latencyMs: {
          p50: percentile(latencies, 0.5),
          p90: percentile(latencies, 0.9),
          p99: percentile(latencies, 0.99),
          max: latencies.length ? latencies[latencies.length - 1]! : NaN,
        },
        cpuMs,
      });
    });
  });
}
