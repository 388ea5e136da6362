import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { DegradedLedger } from '../../src/gateway/degraded-ledger.js';
import { formatUsage, usageRows, type UsageQuery, type UsageRow } from '../../src/quota/usage-export.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';
import { MemoryUsage } from '../../src/store/memory/memory-usage.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { RedisUsageReader } from '../../src/store/redis/redis-usage-reader.js';
import type { UsageReader } from '../../src/store/usage-store.js';
import { runCli } from '../helpers/processes.js';
import { redisForFile } from '../helpers/redis-for-file.js';

// Usage for invoicing in the stores, on a real redis-server and an injected clock: Berlin's hours
// across the day daylight saving ends (25 of them) and a half-hour zone's; the embedded store keeps
// the same rows as Redis for the same decisions; what a replica admitted while Redis was away is
// added once, in the hours it was admitted in; an export of 20,000 consumers streams in a small heap.

const redis = redisForFile();
const ban: BanPolicy = { afterRejections: 1000, window: 60, duration: 60 };
const HOUR_MS = 3_600_000;
const RETENTION_MS = 400 * 24 * HOUR_MS;
const logger = pino({ level: 'silent' });

async function collect(reader: UsageReader, query: UsageQuery): Promise<UsageRow[]> {
  const rows: UsageRow[] = [];
  for await (const row of usageRows(reader.days(query.fromMs, query.toMs), query)) rows.push(row);
  return rows.sort((a, b) => `${a.consumer} ${a.from}`.localeCompare(`${b.consumer} ${b.from}`));
}

describe('usage for invoicing in the stores', { timeout: 300_000 }, () => {
  it("counts Berlin's 25 hours on the day daylight saving ends, summing to its day window", async () => {
    const calendar = { timeZone: 'Europe/Berlin' };
    const quota: Quota = { perMinute: 100, perDay: 1000, calendar };
    // 2026-10-25 in Berlin: from 2026-10-24T22:00Z (UTC+2) to 2026-10-25T23:00Z (UTC+1), 25 hours.
    const dayStartMs = Date.parse('2026-10-24T22:00:00Z');
    const clock = { nowMs: dayStartMs };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs, RETENTION_MS);
    for (let hour = 0; hour < 25; hour++) {
      clock.nowMs = dayStartMs + hour * HOUR_MS + 59 * 60_000;
      await store.consume('dst', quota, ban, hour + 1);
    }
    const reader = new RedisUsageReader(redis.client());
    const window = { fromMs: dayStartMs, toMs: dayStartMs + 25 * HOUR_MS, format: 'jsonl' as const };
    const hours = (await collect(reader, { ...window, by: 'hour' })).filter((r) => r.consumer === 'dst');
    expect(hours).toHaveLength(25);
    expect(hours[0]).toMatchObject({ from: '2026-10-24T22:00:00.000Z', to: '2026-10-24T23:00:00.000Z', admitted: 1, units: 1 });
    expect(hours[24]).toMatchObject({ from: '2026-10-25T22:00:00.000Z', to: '2026-10-25T23:00:00.000Z', units: 25 });
    const [day] = (await collect(reader, { ...window, by: 'day' })).filter((r) => r.consumer === 'dst');
    expect(day).toEqual({
      consumer: 'dst',
      from: '2026-10-24T22:00:00.000Z',
      to: '2026-10-25T23:00:00.000Z',
      admitted: 25,
      refused: 0,
      units: 325,
      credits: 0,
    });
    expect((await store.usage('dst', quota)).dayCount).toBe(325);
  });

  it('counts a settled reported cost in the usage: the extra in its hour, a give-back off the reservation’s hour, credits alike, in both stores', async () => {
    const quota: Quota = { perMinute: 1000, perDay: 10_000, credits: 'required' };
    const reservedAtMs = Date.parse('2026-11-16T10:20:00Z');
    const clock = { nowMs: reservedAtMs };
    const memoryUsage = new MemoryUsage(RETENTION_MS);
    const stores = {
      redis: new RedisQuotaStore(redis.client(), () => clock.nowMs, RETENTION_MS),
      memory: new MemoryQuotaStore(() => clock.nowMs, memoryUsage),
    };
    const readers: Record<string, UsageReader> = { redis: new RedisUsageReader(redis.client()), memory: memoryUsage };
    for (const [name, store] of Object.entries(stores)) {
      clock.nowMs = reservedAtMs;
      await store.changeCredits(`settled-${name}`, { set: 100 });
      const windows = {
        minuteStartMs: reservedAtMs - (reservedAtMs % 60_000),
        dayStartMs: Date.parse('2026-11-16T00:00:00Z'),
        monthStartMs: 0,
      };
      // Two reservations of 10: one settled to 25 an hour later, one to 4.
      await store.consume(`settled-${name}`, quota, ban, 10);
      await store.consume(`settled-${name}`, quota, ban, 10);
      clock.nowMs = reservedAtMs + HOUR_MS;
      await store.settle(`settled-${name}`, quota, ban, { id: `a-${name}`, reserve: 10, cost: 25, ...windows });
      await store.settle(`settled-${name}`, quota, ban, { id: `b-${name}`, reserve: 10, cost: 4, ...windows });
      const rows = await collect(readers[name]!, {
        fromMs: reservedAtMs - HOUR_MS,
        toMs: reservedAtMs + 2 * HOUR_MS,
        by: 'hour',
        format: 'jsonl',
      });
      expect(rows.filter((r) => r.consumer === `settled-${name}`).map((r) => [r.from, r.admitted, r.units, r.credits])).toEqual([
        ['2026-11-16T10:00:00.000Z', 2, 14, 14],
        ['2026-11-16T11:00:00.000Z', 0, 15, 15],
      ]);
      expect((await store.changeCredits(`settled-${name}`, {})).after).toBe(100 - 29);
    }
  });

  it('starts hours where a half-hour zone’s do (Asia/Kolkata: :30 UTC)', async () => {
    const quota: Quota = { perMinute: 100, perDay: 1000, calendar: { timeZone: 'Asia/Kolkata' } };
    const nowMs = Date.parse('2026-11-15T10:10:00Z'); // 15:40 in Kolkata
    const store = new RedisQuotaStore(redis.client(), () => nowMs, RETENTION_MS);
    await store.consume('kolkata', quota, ban, 2);
    const rows = await collect(new RedisUsageReader(redis.client()), {
      fromMs: nowMs - 24 * HOUR_MS,
      toMs: nowMs + 24 * HOUR_MS,
      by: 'hour',
      format: 'jsonl',
    });
    expect(rows.filter((r) => r.consumer === 'kolkata').map((r) => [r.from, r.units])).toEqual([['2026-11-15T09:30:00.000Z', 2]]);
  });

  it('keeps the same rows in the embedded store as in Redis for the same decisions (refusals and credits included)', async () => {
    const month: Quota = { perMinute: 5, perDay: 20, perMonth: 30, calendar: { timeZone: 'Europe/Berlin', anchorDay: 31 } };
    const prepaid: Quota = { perMinute: 50, perDay: 500, credits: 'required' };
    const clock = { nowMs: Date.parse('2026-01-30T20:00:00Z') };
    const redisStore = new RedisQuotaStore(redis.client(), () => clock.nowMs, RETENTION_MS);
    const memoryUsage = new MemoryUsage(RETENTION_MS);
    const memoryStore = new MemoryQuotaStore(() => clock.nowMs, memoryUsage);
    await redisStore.changeCredits('same-prepaid', { set: 40 });
    await memoryStore.changeCredits('same-prepaid', { set: 40 });
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 400; i++) {
      clock.nowMs += Math.floor(next() * 20 * 60_000);
      const [subject, quota] = next() < 0.5 ? ['same-month', month] : ['same-prepaid', prepaid];
      const cost = 1 + Math.floor(next() * 3);
      const a = await redisStore.consume(subject, quota, ban, cost);
      const b = await memoryStore.consume(subject, quota, ban, cost);
      expect(a.verdict).toBe(b.verdict);
    }
    const query: UsageQuery = { fromMs: Date.parse('2026-01-01T00:00:00Z'), toMs: clock.nowMs + HOUR_MS, by: 'hour', format: 'jsonl' };
    const same = (rows: UsageRow[]) => rows.filter((r) => r.consumer.startsWith('same-'));
    const fromRedis = same(await collect(new RedisUsageReader(redis.client()), query));
    expect(fromRedis.some((r) => r.refused > 0) && fromRedis.some((r) => r.credits > 0)).toBe(true);
    expect(same(await collect(memoryUsage, query))).toEqual(fromRedis);
    const byMonth = { ...query, by: 'month' as const };
    const months = same(await collect(new RedisUsageReader(redis.client()), byMonth));
    expect(same(await collect(memoryUsage, byMonth))).toEqual(months);
    // The anchored month (the 31st; February's last day) as the month window counts it.
    expect(months.filter((r) => r.consumer === 'same-month').map((r) => [r.from, r.to])).toContainEqual([
      '2026-01-30T23:00:00.000Z',
      '2026-02-27T23:00:00.000Z',
    ]);
  });

  it('adds what a replica admitted and refused while Redis was away once, in the hours it happened', async () => {
    const calendar = { timeZone: 'Europe/Berlin' };
    const quota: Quota = { perMinute: 3, perDay: 1000, calendar };
    const clock = { nowMs: Date.parse('2026-11-15T09:59:00Z') };
    const store = new RedisQuotaStore(redis.client(), () => clock.nowMs, RETENTION_MS);
    const ledger = new DegradedLedger(store, logger);
    // The local limiter's decisions: 10:59 Berlin two admitted and one refused, 11:00 one admitted.
    const local = new MemoryQuotaStore(() => clock.nowMs);
    for (const _ of [1, 2, 3, 4]) ledger.record('outage', await local.consume('outage', { ...quota, perMinute: 2 }, ban), quota);
    clock.nowMs += 60_000;
    ledger.record('outage', await local.consume('outage', quota, ban), quota);
    expect(await ledger.flush()).toBe(true);
    const reader = new RedisUsageReader(redis.client());
    const query: UsageQuery = {
      fromMs: Date.parse('2026-11-15T00:00:00Z'),
      toMs: Date.parse('2026-11-16T00:00:00Z'),
      by: 'hour',
      format: 'jsonl',
    };
    const rows = (await collect(reader, query)).filter((r) => r.consumer === 'outage');
    expect(rows.map((r) => [r.from, r.admitted, r.refused, r.units])).toEqual([
      ['2026-11-15T09:00:00.000Z', 2, 2, 2],
      ['2026-11-15T10:00:00.000Z', 1, 0, 1],
    ]);
    // That batch (this replica's first) sent again, as a flush retried after Redis ran it: not applied.
    await store.reconcile('outage', ledger.replicaId, {
      seq: 1,
      minuteStartMs: 0,
      minuteUnits: 0,
      dayStartMs: 0,
      dayUnits: 0,
      bannedUntilMs: 0,
      usage: [
        {
          hourStartMs: Date.parse('2026-11-15T10:00:00Z'),
          dayStartMs: Date.parse('2026-11-14T23:00:00Z'),
          dayEndMs: 0,
          monthStartMs: 0,
          monthEndMs: 0,
          admitted: 5,
          refused: 0,
          units: 5,
          credits: 0,
        },
      ],
    });
    expect((await collect(reader, query)).filter((r) => r.consumer === 'outage').map((r) => r.units)).toEqual([2, 1]);
    expect((await store.usage('outage', quota)).dayCount).toBe(3);
    ledger.close();
  });

  it('streams an export of 20,000 consumers from the CLI within a 40 MB heap, CSV line by line', async () => {
    const client = redis.client();
    const dayStartMs = Date.parse('2026-11-14T23:00:00Z');
    for (let from = 0; from < 20_000; from += 1000) {
      const pipeline = client.pipeline();
      for (let i = from; i < from + 1000; i++) {
        const fields: Array<string | number> = ['p', `${dayStartMs + 24 * HOUR_MS} ${dayStartMs} ${dayStartMs + 30 * 24 * HOUR_MS}`];
        for (let h = 0; h < 24; h++) fields.push(`${dayStartMs + h * HOUR_MS}:a`, 1, `${dayStartMs + h * HOUR_MS}:u`, 2);
        pipeline.hset(`tg:usage:{bulk${i}}:${dayStartMs}`, ...fields);
      }
      await pipeline.exec();
    }
    const result = await runCli(['usage', 'export', '--from', '2026-11-14T23:00:00Z', '--to', '2026-11-15T23:00:00Z', '--by', 'hour'], {
      REDIS_URL: redis.server().url,
      NODE_OPTIONS: '--max-old-space-size=40',
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const lines = result.stdout.split('\r\n').filter(Boolean);
    expect(lines[0]).toBe('consumer,from,to,admitted,refused,units,credits');
    const bulk = lines.filter((l) => l.startsWith('bulk'));
    expect(bulk).toHaveLength(20_000 * 24);
    expect(bulk).toContain('bulk123,2026-11-15T05:00:00.000Z,2026-11-15T06:00:00.000Z,1,0,2,0');
  });

  it('writes CSV fields with commas or quotes quoted (RFC 4180)', async () => {
    const rows = (async function* () {
      yield { consumer: 'jwt:a,"b"', from: 'f', to: 't', admitted: 1, refused: 0, units: 1, credits: 0 };
    })();
    const text: string[] = [];
    for await (const line of formatUsage(rows, 'csv')) text.push(line);
    expect(text).toEqual(['consumer,from,to,admitted,refused,units,credits\r\n', '"jwt:a,""b""",f,t,1,0,1,0\r\n']);
  });
});
