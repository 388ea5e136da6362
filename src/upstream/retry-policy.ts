import type { Service } from './service.js';

/**
 * When one client request is tried again, on another target when the service has one. Every
 * condition must hold:
 * 1. Nothing of a response has reached the client (the retry is invisible to it), and it is still
 *    there; the request has tries left (`retries.attempts`) and time left (`timeoutMs`, which
 *    covers every try and the backoff between them).
 * 2. The failure is one a retry can cure, and the request may be repeated after it:
 *    - `connect`: the target refused or could not be reached: the request never left, so any
 *      method may go again, a POST too;
 *    - `closed`: a connection closed or reset before any response byte (a kept-alive connection
 *      the target closed as it was reused, or a target dying): the target may have acted on it,
 *      so only a repeatable request goes again, on a new connection;
 *    - `timeout` (no response head within the try's time) and `status` (a 502, 503 or 504 answer,
 *      read and dropped, never relayed): likewise only a repeatable request.
 *    Repeatable: an idempotent method (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE),
 *    or a POST or PATCH with an `Idempotency-Key` on a service with `retries.idempotencyKey`.
 * 3. The body can be sent again: none, none taken from the client yet, or one kept whole
 *    (client-body.ts keeps bodies of at most REPLAY_MAX_BYTES; a larger one is streamed and
 *    never replayed).
 * 4. The service's retry budget has room: retries in flight at most `retries.budgetPercent` of its
 *    requests in flight, and at least 3 (Envoy's retry budget), so a failing service is not
 *    buried under its own retries. A failover is outside the budget: the failed try shows its
 *    target gone (refused, unreachable or unresolved, not a connect timeout; or its connection
 *    closed or reset before any response byte) while another target of the service, not tried by
 *    this request, is in rotation. One instance dying under load fails every request routed to it
 *    until it is ejected (those in flight, those sent on its pooled connections, those refused),
 *    a burst the budget's 3 would turn into client errors; moving them to the live targets adds
 *    no request the service would not have had. When no other target is left, the service is
 *    failing broadly and the budget applies. `retries.attempts` still bounds every request.
 * A 500, or any other answer, is the application's and is relayed as it is. The client request is
 * one quota unit however many tries it takes.
 */
export type Failure = 'connect' | 'closed' | 'timeout' | 'status';

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);
/** Upstream answers that say "try elsewhere": bad gateway, unavailable, gateway timeout. */
export const RETRYABLE_STATUS = new Set([502, 503, 504]);
const CONNECT_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);
const CLOSED_CODES = new Set(['ECONNRESET', 'EPIPE']);
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT']);

/** The kind of a try's failure from undici's error, or undefined when no retry can cure it. */
export function failureOf(err: Error): Failure | undefined {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  if (CONNECT_CODES.has(code)) return 'connect';
  if (CLOSED_CODES.has(code) || (code === 'UND_ERR_SOCKET' && err.message === 'other side closed')) return 'closed';
  if (TIMEOUT_CODES.has(code)) return 'timeout';
  return undefined;
}

export interface RetryQuestion {
  service: Service;
  failure: Failure;
  method: string;
  idempotencyKey: boolean;
  /** The body can go again: none, untouched, or kept whole. */
  bodyReplayable: boolean;
  triesSoFar: number;
  msLeft: number;
  /** Rule 4's failover: the try's target is gone, and an untried target of the service is in rotation. */
  failover?: boolean;
}

/** `budgeted`: the retry counts in the service's retries in flight (rule 4). */
export type RetryAnswer = { retry: true; backoffMs: number; budgeted: boolean } | { retry: false; budgetExhausted?: boolean };

/** A `connect` failure where nothing answered at all (rule 4's target gone): every connect code but its timeout. */
export function unreachable(err: Error): boolean {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  return CONNECT_CODES.has(code) && code !== 'UND_ERR_CONNECT_TIMEOUT';
}

/** Whether a request may be repeated after it may have reached the application (rule 2 above). */
export function isRepeatable(method: string, idempotencyKey: boolean, retries: { idempotencyKey: boolean }): boolean {
  return IDEMPOTENT.has(method) || (idempotencyKey && retries.idempotencyKey && (method === 'POST' || method === 'PATCH'));
}

export function shouldRetry(q: RetryQuestion, random = Math.random): RetryAnswer {
  const { config } = q.service;
  if (q.triesSoFar > config.retries.attempts) return { retry: false };
  if (!q.bodyReplayable) return { retry: false };
  if (q.failure !== 'connect' && !isRepeatable(q.method, q.idempotencyKey, config.retries)) return { retry: false };
  const budgeted = !q.failover;
  const budget = Math.max(3, Math.floor((config.retries.budgetPercent * q.service.inFlight) / 100));
  if (budgeted && q.service.retriesInFlight >= budget) return { retry: false, budgetExhausted: true };
  // Jittered exponential backoff: 0 for the first retry of a request that never reached a target
  // (another target is tried at once), else 10 ms × 2^(n−1), ±50 %.
  const backoffMs = q.failure === 'connect' && q.triesSoFar === 1 ? 0 : Math.round(10 * 2 ** (q.triesSoFar - 1) * (0.5 + random()));
  if (backoffMs >= q.msLeft) return { retry: false };
  return { retry: true, backoffMs, budgeted };
}
