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
}

/**
 * `loops` keep-alive request loops on one key over `urls` (loop i on urls[i % length]), until
 * `stop()`; each answer is tallied. The per-request deadline only catches hangs.
 */
export function requestLoops(urls: string[], key: string, loops: number, onAnswer?: (res: Response, body: string) => void) {
  const tally: LoopTally = { statuses: new Map(), degraded: new Map(), longestMs: 0, unanswered: 0, remainingAfterMark: -1 };
  let running = true;
  let marked = false;
  const one = async (url: string) => {
    const startedMs = performance.now();
    try {
      const res = await fetch(`${url}/v1/categories`, { headers: bearer(key), signal: AbortSignal.timeout(60_000) });
      const body = await res.text();
      onAnswer?.(res, body);
      const waitedMs = performance.now() - startedMs;
      if (waitedMs > tally.longestMs) {
        tally.longestMs = waitedMs;
        tally.longestRequestId = res.headers.get('x-request-id') ?? undefined;
      }
      tally.statuses.set(res.status, (tally.statuses.get(res.status) ?? 0) + 1);
      const degraded = res.headers.get('x-tollgate-degraded');
      if (degraded) tally.degraded.set(degraded, (tally.degraded.get(degraded) ?? 0) + 1);
      if (marked && res.status === 200) {
        tally.remainingAfterMark = Math.max(tally.remainingAfterMark, Number(res.headers.get('x-ratelimit-remaining')));
      }
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
  return `longest wait ${Math.round(tally.longestMs)} ms (gateway: ${same}), gateway's longest request ${Math.round(longest)} ms, its slowest quota decision ${slowest}`;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
