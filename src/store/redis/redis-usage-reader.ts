import { Cluster, type Redis } from 'ioredis';
import type { UsageDay, UsageHour } from '../../quota/usage-hours.js';
import { dayMayOverlap, type UsageReader } from '../usage-store.js';
import type { RedisClient } from './connect.js';
import { USAGE_KEY_PREFIX, usageKeyPattern } from './redis-keys.js';

/**
 * Keys asked for per SCAN step, and so at most the days held at once (a day is ≤ 25 hours × 4
 * fields). An export of 20,000 days by hour with `--max-old-space-size=40` (`--trace-gc`): the heap
 * before a full collection peaked at 54-55 MB with 200, 65-84 MB with 500, which once ran out of
 * its 40 MB on a loaded machine.
 */
const SCAN_COUNT = 200;

/**
 * Reads the usage the quota scripts keep (quota-script.ts, usageAdd): SCAN over every master (a
 * Cluster's each), a batch of keys at a time, their hashes fetched in one pipeline on the node that
 * holds them, and handed on before the next batch is asked for, so memory follows the batch, not
 * the month.
 */
export class RedisUsageReader implements UsageReader {
  constructor(private readonly redis: RedisClient) {}

  async *days(fromMs: number, toMs: number, subject?: string): AsyncIterable<UsageDay> {
    const masters: Redis[] = this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
    const match = usageKeyPattern(subject);
    for (const node of masters) {
      let cursor = '0';
      do {
        const [next, found] = await node.scan(cursor, 'MATCH', match, 'COUNT', SCAN_COUNT);
        cursor = next;
        const keys = found.map((key) => ({ key, ...partsOf(key) })).filter((k) => k.subject !== undefined);
        const wanted = keys.filter((k) => dayMayOverlap(k.dayStartMs, fromMs, toMs) && (subject === undefined || k.subject === subject));
        if (wanted.length === 0) continue;
        const pipeline = node.pipeline();
        for (const { key } of wanted) pipeline.hgetall(key);
        const replies = (await pipeline.exec()) ?? [];
        for (const [i, { subject: name, dayStartMs }] of wanted.entries()) {
          const [err, fields] = replies[i] ?? [];
          if (err) throw err;
          const day = dayOf(name!, dayStartMs, fields as Record<string, string>);
          if (day) yield day;
        }
      } while (cursor !== '0');
    }
  }
}

/** A usage key's subject and day: `tg:usage:{<subject>}:<dayStartMs>`. */
function partsOf(key: string): { subject?: string; dayStartMs: number } {
  const close = key.lastIndexOf('}:');
  const dayStartMs = Number(key.slice(close + 2));
  if (!key.startsWith(USAGE_KEY_PREFIX) || close < 0 || !Number.isSafeInteger(dayStartMs)) return { dayStartMs: 0 };
  return { subject: key.slice(USAGE_KEY_PREFIX.length, close), dayStartMs };
}

const COUNT_FIELDS = { a: 'admitted', r: 'refused', u: 'units', c: 'credits' } as const;
/** Requests admitted at one unit each (QUOTA_STEP's admissions): counted in both admitted and units. */
const SINGLE_FIELD = 'n';

/**
 * A day's hash as usageAdd writes it; undefined when it has expired since the SCAN (empty). Each
 * count is the sum of its fields, whichever version wrote them: an hour written by gateways with
 * and without the 'n' field (a rolling upgrade) sums to what both counted.
 */
function dayOf(subject: string, dayStartMs: number, fields: Record<string, string>): UsageDay | undefined {
  const [dayEndMs = 0, monthStartMs = 0, monthEndMs = 0] = (fields.p ?? '').split(' ').map(Number);
  const hours = new Map<number, UsageHour>();
  for (const [field, value] of Object.entries(fields)) {
    const [start, letter] = field.split(':');
    const name = COUNT_FIELDS[letter as keyof typeof COUNT_FIELDS];
    if (!name && letter !== SINGLE_FIELD) continue;
    const hourStartMs = Number(start);
    let hour = hours.get(hourStartMs);
    if (!hour) hours.set(hourStartMs, (hour = { hourStartMs, admitted: 0, refused: 0, units: 0, credits: 0 }));
    if (name) hour[name] += Number(value);
    else {
      hour.admitted += Number(value);
      hour.units += Number(value);
    }
  }
  if (hours.size === 0) return undefined;
  return {
    subject,
    dayStartMs,
    // A day whose hash was lost and written again by a give-back alone may lack its ends.
    dayEndMs: dayEndMs || dayStartMs + 24 * 3_600_000,
    monthStartMs,
    monthEndMs,
    hours: [...hours.values()].sort((a, b) => a.hourStartMs - b.hourStartMs),
  };
}
