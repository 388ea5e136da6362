/**
 * The operator console's live view of this replica's traffic (GET /admin/v1/traffic and /bans):
 * requests per second by decision over the last minutes, and each key's requests and refusals.
 *
 * Cost on the request path, which is benchmarked: `record` does one typed-array increment (the
 * second's slot of its decision) and, for a known key, one Map lookup and increments on the
 * entry it finds. Everything else (summing, sorting, finding bans) happens when an operator asks.
 * Memory is bounded: SECONDS slots of DECISIONS counters, and MINUTES maps of at most
 * MAX_KEYS_PER_MINUTE keys each; keys past that cap in one minute are counted only in the
 * totals (`untrackedRequests`), so a flood of distinct keys cannot grow the heap.
 */
export const DECISIONS = ['admitted', 'limited', 'banned', 'unauthenticated', 'shadow_limited', 'other'] as const;
export type TrafficDecision = (typeof DECISIONS)[number];
export const DECISION_INDEX: Readonly<Record<TrafficDecision, number>> = Object.freeze(
  Object.fromEntries(DECISIONS.map((d, i) => [d, i])) as Record<TrafficDecision, number>,
);

const SECONDS = 300;
const MINUTES = 5;
const MAX_KEYS_PER_MINUTE = 10_000;
const SECOND_MS = 1000;
const MINUTE_MS = 60_000;

/** Per key and minute: requests, refusals (limited or banned), and banned answers. */
type KeyCounts = Uint32Array;
const REQUESTS = 0;
const REFUSALS = 1;
const BANNED = 2;

export interface TrafficSecond {
  /** ISO time of the second's start. */
  at: string;
  counts: Record<TrafficDecision, number>;
}

export interface KeyTraffic {
  id: string;
  requests: number;
  refusals: number;
}

export class TrafficCounters {
  private readonly perSecond = new Uint32Array(SECONDS * DECISIONS.length);
  /** The last second recorded (epoch seconds); slots between it and now are stale and cleared on the next write. */
  private second = 0;
  private readonly minutes: Array<{ minute: number; keys: Map<string, KeyCounts>; untracked: number }> = [];

  constructor(private readonly now: () => number = Date.now) {}

  /** One answered request (access-log.ts); `keyId` when the key was authenticated. */
  record(keyId: string | undefined, decision: number): void {
    const nowMs = this.now();
    const second = Math.floor(nowMs / SECOND_MS);
    if (second !== this.second) this.advanceTo(second);
    this.perSecond[(second % SECONDS) * DECISIONS.length + decision]!++;
    if (keyId === undefined) return;
    const bucket = this.minuteBucket(Math.floor(nowMs / MINUTE_MS));
    let counts = bucket.keys.get(keyId);
    if (!counts) {
      if (bucket.keys.size >= MAX_KEYS_PER_MINUTE) {
        bucket.untracked++;
        return;
      }
      counts = new Uint32Array(3);
      bucket.keys.set(keyId, counts);
    }
    counts[REQUESTS]!++;
    if (decision === DECISION_INDEX.limited || decision === DECISION_INDEX.banned) counts[REFUSALS]!++;
    if (decision === DECISION_INDEX.banned) counts[BANNED]!++;
  }

  /** The last `seconds` (at most 300), oldest first, the current (incomplete) second last. */
  series(seconds: number): TrafficSecond[] {
    const nowSecond = Math.floor(this.now() / SECOND_MS);
    const count = Math.min(Math.max(1, seconds), SECONDS);
    const out: TrafficSecond[] = [];
    for (let s = nowSecond - count + 1; s <= nowSecond; s++) {
      const fresh = s <= this.second && s > this.second - SECONDS && s > nowSecond - SECONDS;
      const counts = {} as Record<TrafficDecision, number>;
      DECISIONS.forEach((d, i) => (counts[d] = fresh ? this.perSecond[(s % SECONDS) * DECISIONS.length + i]! : 0));
      out.push({ at: new Date(s * SECOND_MS).toISOString(), counts });
    }
    return out;
  }

  /** Keys over the last `minutes` (at most 5, the current one included), by requests and by refusals. */
  topKeys(minutes: number, limit: number): { byRequests: KeyTraffic[]; byRefusals: KeyTraffic[]; untrackedRequests: number } {
    const totals = new Map<string, KeyTraffic>();
    let untrackedRequests = 0;
    for (const bucket of this.recentMinutes(minutes)) {
      untrackedRequests += bucket.untracked;
      for (const [id, counts] of bucket.keys) {
        const total = totals.get(id) ?? { id, requests: 0, refusals: 0 };
        total.requests += counts[REQUESTS]!;
        total.refusals += counts[REFUSALS]!;
        totals.set(id, total);
      }
    }
    const all = [...totals.values()];
    const byRequests = [...all].sort((a, b) => b.requests - a.requests || a.id.localeCompare(b.id)).slice(0, limit);
    const byRefusals = all
      .filter((k) => k.refusals > 0)
      .sort((a, b) => b.refusals - a.refusals || a.id.localeCompare(b.id))
      .slice(0, limit);
    return { byRequests, byRefusals, untrackedRequests };
  }

  /** Keys answered `banned` on this replica in the last `minutes`: candidates for the bans list. */
  bannedKeyIds(minutes: number): string[] {
    const ids = new Set<string>();
    for (const bucket of this.recentMinutes(minutes)) for (const [id, counts] of bucket.keys) if (counts[BANNED]! > 0) ids.add(id);
    return [...ids].sort();
  }

  private recentMinutes(minutes: number) {
    const nowMinute = Math.floor(this.now() / MINUTE_MS);
    const span = Math.min(Math.max(1, minutes), MINUTES);
    return this.minutes.filter((b) => b.minute > nowMinute - span && b.minute <= nowMinute);
  }

  private advanceTo(second: number): void {
    // Clear the slots of the seconds skipped since the last write (all of them after a long pause).
    const gap = second > this.second ? Math.min(second - this.second, SECONDS) : SECONDS;
    for (let s = second - gap + 1; s <= second; s++)
      this.perSecond.fill(0, (s % SECONDS) * DECISIONS.length, ((s % SECONDS) + 1) * DECISIONS.length);
    this.second = second;
  }

  private minuteBucket(minute: number) {
    const last = this.minutes[this.minutes.length - 1];
    if (last && last.minute === minute) return last;
    const bucket = { minute, keys: new Map<string, KeyCounts>(), untracked: 0 };
    this.minutes.push(bucket);
    while (this.minutes.length > MINUTES || (this.minutes[0] && this.minutes[0].minute <= minute - MINUTES)) this.minutes.shift();
    return bucket;
  }
}
