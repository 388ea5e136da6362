import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';
import { usageRows, type UsageRow } from '../../src/quota/usage-export.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { RedisUsageReader } from '../../src/store/redis/redis-usage-reader.js';
import { runCli } from '../helpers/processes.js';
import { TestRedisCluster } from '../helpers/redis-cluster.js';

// Usage for invoicing on a real three-master Redis Cluster: each consumer's usage hash lives in
// its windows' slot (the quota script writes it), and the export scans every master, so no
// consumer is missed, whichever node holds it.

const quota: Quota = { perMinute: 100, perDay: 1000 };
const ban: BanPolicy = { afterRejections: 1000, window: 60, duration: 60 };
const NOW = Date.parse('2026-11-15T10:20:00Z');
let cluster: TestRedisCluster;

beforeAll(async () => {
  cluster = await TestRedisCluster.start(3);
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
});

describe('usage for invoicing on a Redis Cluster', { timeout: 120_000 }, () => {
  it('keeps every consumer’s usage beside its windows and exports them all, from every master', async () => {
    const client = cluster.client();
    const store = new RedisQuotaStore(client, () => NOW);
    const subjects = Array.from({ length: 60 }, (_, i) => `c${i}`);
    for (const [i, subject] of subjects.entries()) await store.consume(subject, quota, ban, 1 + (i % 3));
    // Spread over the masters (the hash tags land in different slots), each beside its windows.
    const masters = new Set(await Promise.all(subjects.map((s) => cluster.masterPortOf(`tg:usage:{${s}}:0`))));
    expect(masters.size).toBe(3);
    for (const s of subjects.slice(0, 5))
      expect(await cluster.masterPortOf(`tg:usage:{${s}}:0`)).toBe(await cluster.masterPortOf(`tg:quota:{${s}}`));

    const query = { fromMs: NOW - 3_600_000, toMs: NOW + 3_600_000, by: 'hour' as const, format: 'jsonl' as const };
    const rows: UsageRow[] = [];
    for await (const row of usageRows(new RedisUsageReader(client).days(query.fromMs, query.toMs), query)) rows.push(row);
    expect(rows.map((r) => r.consumer).sort()).toEqual([...subjects].sort());
    expect(rows.find((r) => r.consumer === 'c5')).toMatchObject({ from: '2026-11-15T10:00:00.000Z', admitted: 1, units: 3 });

    const cli = await runCli(['usage', 'export', '--from', '2026-11-15', '--to', '2026-11-16', '--format', 'jsonl'], cluster.env);
    expect(cli.stderr).toBe('');
    expect(cli.stdout.trim().split('\n')).toHaveLength(60);
    client.disconnect();
  });
});
