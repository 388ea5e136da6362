import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { bearer } from './stack.js';

export interface LoopTally {
  /** Answers by status. */
  statuses: Map<number, number>;
  /** Answers marked X-Tollgate-Degraded, by its value. */
  degraded: Map<string, number>;
  /** The longest a request waited for its answer, in ms (reported, never asserted). */
  longestMs: number;
  /** That request's X-Request-Id: its line in the gateway's access log (`gatewayWaits`). */
  longestRequestId?: string;
  /** Requests that got no answer at all (a reset, a hang caught by the deadline). */
  unanswered: number;
  /** The highest X-RateLimit-Remaining seen on a 200 after `mark()` was called (or -1). */
  remainingAfterMark: number;
  /** Each answered request's wait in ms, in the order the answers came (reported, never asserted). */
  waitsMs: number[];
  /**
   * The longest this test process's own event loop was late while the loops ran, in ms (set by
   * `stop()`): a client's wait includes it, the gateway's does not (the clients and the tests'
   * upstream run in this process).
   */
  clientLoopLagMs?: number;
}

/** One answer as the loops see it: what a tally keeps of it. */
interface Answer {
  status: number;
  waitedMs: number;
  requestId: string | null;
  degraded: string | null;
  remaining: string | null;
}

function newTally(): LoopTally {
  return { statuses: new Map(), degraded: new Map(), longestMs: 0, unanswered: 0, remainingAfterMark: -1, waitsMs: [] };
}

function count(tally: LoopTally, answer: Answer, marked: boolean): void {
  tally.waitsMs.push(answer.waitedMs);
  if (answer.waitedMs > tally.longestMs) {
    tally.longestMs = answer.waitedMs;
    tally.longestRequestId = answer.requestId ?? undefined;
  }
  tally.statuses.set(answer.status, (tally.statuses.get(answer.status) ?? 0) + 1);
  if (answer.degraded) tally.degraded.set(answer.degraded, (tally.degraded.get(answer.degraded) ?? 0) + 1);
  if (marked && answer.status === 200) tally.remainingAfterMark = Math.max(tally.remainingAfterMark, Number(answer.remaining));
}

/**
 * `loops` keep-alive request loops on one key over `urls` (loop i on urls[i % length]), until
 * `stop()`; each answer is tallied. The per-request deadline only catches hangs.
 */
export function requestLoops(urls: string[], key: string, loops: number, onAnswer?: (res: Response, body: string) => void) {
  const tally = newTally();
  let running = true;
  let marked = false;
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const one = async (url: string) => {
    const startedMs = performance.now();
    try {
      const res = await fetch(`${url}/v1/categories`, { headers: bearer(key), signal: AbortSignal.timeout(60_000) });
      const body = await res.text();
      onAnswer?.(res, body);
      const header = (name: string) => res.headers.get(name);
      const answer = { status: res.status, waitedMs: performance.now() - startedMs, requestId: header('x-request-id') };
      count(tally, { ...answer, degraded: header('x-tollgate-degraded'), remaining: header('x-ratelimit-remaining') }, marked);
    } catch {
      tally.unanswered++;
    }
  };
  const done = Promise.all(
    Array.from({ length: loops }, async (_, i) => {
      while (running) await one(urls[i % urls.length]!);
    }),
  );
  return {
    tally,
    /** From now on, note the highest Remaining told on a 200. */
    mark: () => (marked = true),
    stop: async () => {
      running = false;
      await done;
      lag.disable();
      // Less the sampling interval, which the histogram counts in.
      tally.clientLoopLagMs = Math.max(0, lag.max / 1e6 - 10);
      return tally;
    },
  };
}

/**
 * The loops of a worker thread (plain JavaScript: a worker runs no TypeScript): they time each
 * request on a loop of their own, so the waits they tell are the gateway's and the machine's,
 * not those of this process, which serves the tests' upstream and runs the fault.
 */
const LOOPS_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const { urls, key, loops } = workerData;
const lag = monitorEventLoopDelay({ resolution: 10 });
lag.enable();
let running = true;
parentPort.on('message', (message) => { if (message === 'stop') running = false; });
async function one(url) {
  const startedMs = performance.now();
  try {
    const res = await fetch(url + '/v1/categories', { headers: { authorization: 'Bearer ' + key }, signal: AbortSignal.timeout(60000) });
    await res.text();
    const header = (name) => res.headers.get(name);
    parentPort.postMessage({ status: res.status, waitedMs: performance.now() - startedMs, requestId: header('x-request-id'),
      degraded: header('x-tollgate-degraded'), remaining: header('x-ratelimit-remaining') });
  } catch {
    parentPort.postMessage({ unanswered: true });
  }
}
Promise.all(Array.from({ length: loops }, async (_, i) => { while (running) await one(urls[i % urls.length]); }))
  .then(() => parentPort.postMessage({ done: true, lagMs: Math.max(0, lag.max / 1e6 - 10) }));
`;

/**
 * `requestLoops` in a worker thread (LOOPS_WORKER), for the fault tests' waits; `onAnswer` hears
 * each answer's status, as it reaches this process.
 */
export function requestLoopsApart(urls: string[], key: string, loops: number, onAnswer?: (status: number) => void) {
  const tally = newTally();
  let marked = false;
  const worker = new Worker(LOOPS_WORKER, { eval: true, workerData: { urls, key, loops } });
  const done = new Promise<number>((resolve, reject) => {
    worker.on('message', (message: Answer & { unanswered?: true; done?: true; lagMs?: number }) => {
      if (message.done) return resolve(message.lagMs!);
      if (message.unanswered) return void tally.unanswered++;
      onAnswer?.(message.status);
      count(tally, message, marked);
    });
    worker.once('error', reject);
  });
  return {
    tally,
    mark: () => (marked = true),
    stop: async () => {
      worker.postMessage('stop');
      tally.clientLoopLagMs = await done;
      await worker.terminate();
      return tally;
    },
  };
}

/**
 * The gateway's side of a run's waits, beside the client's (reported, never asserted):
 * - from its access log (`ms`: from the request's arrival to its answer's end, by the gateway's
 *   own clock; the upstream's answer included, and the tests' upstream runs in the test process),
 *   its time for the request the client waited longest for, and its longest request. A client wait
 *   far longer than the gateway's own is time outside it (the test process's loop, the machine);
 * - from its metrics (tollgate_redis_duration_seconds, since it started), the bucket that holds
 *   its slowest answered quota decision (a decision cut by its timeout is not in it).
 */
export async function gatewayWaits(
  gateway: { process: { logs(): Array<Record<string, unknown>> }; adminUrl: string },
  tally: LoopTally,
): Promise<string> {
  let longest = 0;
  let clientsLongest: number | undefined;
  for (const line of gateway.process.logs()) {
    if (typeof line.ms !== 'number' || line.path !== '/v1/categories') continue;
    longest = Math.max(longest, line.ms);
    if (line.reqId === tally.longestRequestId) clientsLongest = line.ms;
  }
  const same = clientsLongest === undefined ? 'no answer of it' : `${Math.round(clientsLongest)} ms`;
  const metrics = await (await fetch(`${gateway.adminUrl}/metrics`, { signal: AbortSignal.timeout(30_000) })).text();
  const buckets = [...metrics.matchAll(/^tollgate_redis_duration_seconds_bucket\{le="([^"]+)",operation="quota"\} (\d+)/gm)].map(
    ([, le, n]) => ({ le: le!, n: Number(n) }),
  );
  const all = buckets.at(-1)?.n ?? 0;
  const within = buckets.find((bucket) => bucket.n === all)?.le;
  const slowest =
    within === undefined || all === 0 ? 'none answered' : within === '+Inf' ? 'over 500 ms' : `at most ${Number(within) * 1000} ms`;
  const clientLag =
    tally.clientLoopLagMs === undefined ? '' : `, the clients' own loop late by up to ${Math.round(tally.clientLoopLagMs)} ms`;
  // A request that waited in the gateway's socket behind its stalled loop is not in its access log
  // (the gauge: the longest stall within the 10 s before its last update, every 5 s).
  const stall = /^tollgate_event_loop_stall_seconds (\S+)/m.exec(metrics)?.[1];
  const gatewayLag = stall === undefined ? '' : `, the gateway's loop stalled up to ${Math.round(Number(stall) * 1000)} ms lately`;
  return `longest wait ${Math.round(tally.longestMs)} ms (gateway: ${same}), gateway's longest request ${Math.round(longest)} ms, its slowest quota decision ${slowest}${clientLag}${gatewayLag}`;
}

/** The p50 and p99 of `waitsMs` (reported, never asserted). */
export function percentiles(waitsMs: number[]): string {
  const sorted = [...waitsMs].sort((a, b) => a - b);
  const at = (p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!);
  return `p50 ${at(0.5).toFixed(1)} ms, p99 ${at(0.99).toFixed(1)} ms`;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
