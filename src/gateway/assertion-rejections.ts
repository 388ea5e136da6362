import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';

/** The backend's answer to an assertion it cannot verify (src/backend/verify-assertion.ts). */
const REJECTED_CODE = 'invalid_gateway_assertion';
/** Larger 401 bodies are not the backend's Error body: they are passed through unread. */
export const MAX_INSPECTED_BYTES = 4096;

/**
 * A backend refusing the gateway's assertion means gateway and backend hold different secrets:
 * an operator fault, not the client's, so the client gets a 502 rather than the backend's 401.
 * The cause is logged at most once per `intervalMs`, counted in a metric and shown by /readyz
 * for `intervalMs` after the last one.
 */
export class AssertionRejections {
  private lastAtMs = -Infinity;
  private lastLoggedAtMs = -Infinity;

  constructor(
    private readonly logger: Logger,
    private readonly metrics: Metrics,
    private readonly intervalMs = 30_000,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** Whether an upstream response may be the backend's assertion refusal (only then is its body read). */
  static mayBeRejection(status: number, headers: IncomingHttpHeaders): boolean {
    if (status !== 401) return false;
    const length = Number(headers['content-length']);
    return /json/i.test(headers['content-type'] ?? '') && length > 0 && length <= MAX_INSPECTED_BYTES;
  }

  static isRejection(body: Buffer): boolean {
    try {
      return (JSON.parse(body.toString('utf8')) as { code?: unknown }).code === REJECTED_CODE;
    } catch {
      return false;
    }
  }

  record(upstreamUrl: string): void {
    const now = this.nowMs();
    this.lastAtMs = now;
    this.metrics.assertionRejections.inc();
    if (now - this.lastLoggedAtMs < this.intervalMs) return;
    this.lastLoggedAtMs = now;
    this.logger.error(
      { upstream: upstreamUrl, code: REJECTED_CODE },
      'the upstream rejects the gateway assertion: TOLLGATE_ASSERTION_SECRET differs between gateway and backend; clients get 502',
    );
  }

  /** For /readyz: false while rejections were seen within the interval. */
  accepted(): boolean {
    return this.nowMs() - this.lastAtMs >= this.intervalMs;
  }
}
