import { bearer } from './stack.js';

export interface LoopTally {
  /** Answers by status. */
  statuses: Map<number, number>;
  /** Answers marked X-Tollgate-Degraded, by its value. */
  degraded: Map<string, number>;
  /** The longest a request waited for its answer, in ms (reported, never asserted). */
  longestMs: number;
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
      tally.longestMs = Math.max(tally.longestMs, performance.now() - startedMs);
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

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
