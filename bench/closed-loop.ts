import autocannon from 'autocannon';
import { Samples } from './samples.js';

export interface LoadOptions {
  url: string;
  headers: Record<string, string>;
  connections: number;
  durationSeconds: number;
  /**
   * Authorization values sent in turn, one per request, round robin; `headers`' own Authorization
   * is replaced. Many warm keys (./many-keys-wrk.ts) under a closed loop.
   */
  rotateAuthorizations?: string[];
}

export interface LoadResult {
  /** Answered within the duration. */
  requests: number;
  /**
   * Sent to the server: when the duration ends every connection has one request in flight, which
   * the server still processes (and which Redis counts).
   */
  sent: number;
  requestsPerSecond: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCounts: Record<string, number>;
  latency: Samples;
}

/**
 * Maximum throughput: autocannon, keep-alive, every connection sends its next request as soon as
 * the previous answer is complete (closed loop). Latencies are recorded to the microsecond.
 */
export function closedLoop(options: LoadOptions): Promise<LoadResult> {
  const latency = new Samples();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: options.url,
        connections: options.connections,
        duration: options.durationSeconds,
        headers: options.headers,
        timeout: 10,
        ...(options.rotateAuthorizations && { requests: [{ setupRequest: rotating(options.rotateAuthorizations) }] }),
      },
      (err, result) => {
        if (err) return reject(err);
        const statusCounts: Record<string, number> = {};
        for (const [status, { count }] of Object.entries(result.statusCodeStats)) statusCounts[status] = count;
        resolve({
          requests: result.requests.total,
          sent: result.requests.total + options.connections,
          requestsPerSecond: result.requests.total / result.duration,
          ok: result['2xx'],
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          statusCounts,
          latency,
        });
      },
    );
    instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => latency.add(ms));
  });
}

/**
 * autocannon's setupRequest for `rotateAuthorizations`: the next value on every request. One
 * counter for all connections (autocannon resets a connection's context after each request when
 * it has one), so the requests of one turn carry different keys, as wrk's threads do.
 */
function rotating(values: string[]): (request: { headers?: Record<string, string> }) => object {
  let at = 0;
  return (request) => ({ ...request, headers: { ...request.headers, authorization: values[at++ % values.length]! } });
}
