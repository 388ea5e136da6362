import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { BanPolicy, Quota } from '../../config/plans-schema.js';
import type { Logger } from '../../observability/log.js';
import type { Metrics } from '../../observability/metrics.js';
import { periodsAt, pick } from '../../quota/calendar.js';
import { MINUTE_MS, windowStartMs } from '../../quota/windows.js';
import type { ReportedCost } from '../../policies/reported-cost/reported-cost-schema.js';
import { reportedValue } from './reported-value.js';
import type { ReservationSettler } from './settle-reservations.js';

/** What the reservation's request was admitted under, by the quota step. */
export interface Reserved {
  rule: ReportedCost;
  subject: string;
  keyId: string;
  quota: Quota;
  ban: BanPolicy;
  /** Units reserved: the rule's `reserve` and what the configured policies added. */
  reserve: number;
  /** The store's clock when the reservation was admitted: its windows follow from it. */
  nowMs: number;
  /** gcra: the TAT the store's decision left (µs); 0 when a lease's block admitted it (quota-state.ts Settlement). */
  tatUs: number;
  /** gcra: the TAT's move number at the decision (QuotaOutcome.moveNo). */
  moveNo: number;
}

export interface ReservationDeps {
  settler: ReservationSettler;
  metrics: Metrics;
  logger: Logger;
}

/**
 * One admitted request whose cost its upstream reports (docs/upstream.md, "Reporting a cost").
 * The proxy tells it what the upstream sent (`head`, `trailers`) and when the gateway answered
 * in its place (`unreached`); once the client's answer is over (the response's close) it decides,
 * once, what the request costs, and hands the settlement to the settler:
 * - the answer was relayed to its end: the reported cost, the trailer's before the header's,
 *   capped at `max`, plus what the configured policies added; nothing reported, or a value that
 *   is not a whole number of units: the reservation (logged at warn when invalid);
 * - the gateway answered 502, 503 or 504 for the upstream (no answer came): nothing, all given back;
 * - anything else (the answer broke off mid-way, a replica died, the client left, a cached answer,
 *   a later policy's refusal): the reservation stands as charged.
 */
export class CostReservation {
  private fromHead?: string;
  private fromTrailer?: string;
  private gaveUp = false;

  constructor(
    private readonly reserved: Reserved,
    private readonly deps: ReservationDeps,
    res: ServerResponse,
  ) {
    res.once('close', () => this.closed(res));
  }

  /** The upstream's response head: its cost field is read, and removed unless forwarded. */
  head(headers: IncomingHttpHeaders): void {
    const { fromResponseHeader, forwardHeader } = this.reserved.rule;
    if (fromResponseHeader === undefined) return;
    const value = headers[fromResponseHeader];
    this.fromHead = Array.isArray(value) ? value.join(', ') : value;
    if (!forwardHeader) delete headers[fromResponseHeader];
  }

  /** The upstream's trailers (undici's flat name/value list), at the end of its answer; the cost trailer is relayed only when forwarded. */
  trailers(raw: ReadonlyArray<string | Buffer> | null, res: ServerResponse): void {
    const { fromTrailer, forwardHeader } = this.reserved.rule;
    if (fromTrailer === undefined || !raw) return;
    const values: string[] = [];
    for (let i = 0; i + 1 < raw.length; i += 2) if (String(raw[i]).toLowerCase() === fromTrailer) values.push(String(raw[i + 1]));
    if (values.length === 0) return;
    this.fromTrailer = values.join(', ');
    // Relayed only on request: the gateway relays no other trailer (a chunked HTTP/1.1 answer or
    // an HTTP/2 stream carries it; a client answer with a Content-Length has no room for one).
    if (forwardHeader) res.addTrailers({ [fromTrailer]: this.fromTrailer });
  }

  /** The gateway answers in the upstream's place (502, 503, 504): the request is charged nothing. */
  unreached(): void {
    this.gaveUp = true;
  }

  private closed(res: ServerResponse): void {
    const { reserved, deps } = this;
    const finished = res.writableFinished;
    let cost = reserved.reserve;
    let outcome: 'reported' | 'capped' | 'none' | 'invalid' | 'unreached' | 'broken';
    if (this.gaveUp && finished) {
      cost = 0;
      outcome = 'unreached';
    } else if (!finished) {
      // Broken off (the upstream, the client, this replica's fault): the work may be done; as charged.
      outcome = 'broken';
    } else {
      const raw = this.fromTrailer ?? this.fromHead;
      const value = raw === undefined ? undefined : reportedValue(raw, reserved.rule.max);
      if (value === undefined) outcome = 'none';
      else if (value === 'invalid') {
        outcome = 'invalid';
        deps.logger.warn(
          { keyId: reserved.keyId, field: this.fromTrailer !== undefined ? reserved.rule.fromTrailer : reserved.rule.fromResponseHeader },
          'the upstream reported a cost that is not a whole number of units: the reservation is charged',
        );
      } else {
        outcome = value.capped ? 'capped' : 'reported';
        cost = value.units + (reserved.reserve - reserved.rule.reserve);
      }
    }
    deps.metrics.costSettlements.inc({ outcome });
    if (cost === reserved.reserve) return;
    const periods = periodsAt(reserved.nowMs, reserved.quota.calendar);
    deps.settler.settle({
      subject: reserved.subject,
      keyId: reserved.keyId,
      quota: reserved.quota,
      ban: reserved.ban,
      settlement: {
        reserve: reserved.reserve,
        cost,
        minuteStartMs: windowStartMs(reserved.nowMs, MINUTE_MS),
        dayStartMs: pick(periods.day, reserved.nowMs)[0],
        monthStartMs: pick(periods.month, reserved.nowMs)[0],
        tatUs: reserved.tatUs,
        admittedAtMs: reserved.nowMs,
        admittedMoveNo: reserved.moveNo,
      },
    });
  }
}
