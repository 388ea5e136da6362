// The part of autocannon 9's programmatic API the benchmark and the soak test use (the package ships no types).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  interface Options {
    url: string;
    connections?: number;
    /** Seconds. */
    duration?: number;
    amount?: number;
    method?: string;
    headers?: Record<string, string>;
    pipelining?: number;
    overallRate?: number;
    /** Seconds. */
    timeout?: number;
  }

  interface Stats {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p99: number;
  }

  interface Result {
    /** Seconds, as measured by autocannon. */
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
    requests: Stats & { sent: number };
    latency: Stats;
  }

  /** Emits `response` (client, statusCode, bytes, responseTimeMs) for every response. */
  interface Instance extends EventEmitter {
    stop(): void;
  }

  function autocannon(options: Options, done: (err: Error | null, result: Result) => void): Instance;
  export default autocannon;
  export type { Options, Result, Instance };
}
