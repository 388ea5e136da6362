import { once } from 'node:events';
import { parseArgs } from 'node:util';
import { loadSettings } from '../config/settings.js';
import { describeRedis, topologyOf } from '../config/redis-target.js';
import { formatUsage, parseUsageQuery, usageRows, UsageQueryError } from '../quota/usage-export.js';
import { connectRedis, whenReady } from '../store/redis/connect.js';
import { RedisUsageReader } from '../store/redis/redis-usage-reader.js';
import { CliError } from './cli-error.js';

export const USAGE_EXPORT_USAGE = `tollgate usage export --from DATE --to DATE [--by hour|day|month] [--format csv|jsonl] [--consumer ID]
                        usage for invoicing, per consumer (key id, owner:NAME, jwt:…, anon:…) and period,
                        streamed to stdout (needs REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS);
                        DATE: 2026-11-01 (its start in quota.timeZone) or an instant with its offset;
                        --by month: each consumer's month window (zone and billing anchor)`;

/** `tollgate usage export …`: rows written as they are read, stdout's backpressure respected. */
export async function usageCommand(argv: string[], env: NodeJS.ProcessEnv, out: NodeJS.WritableStream = process.stdout): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      from: { type: 'string' },
      to: { type: 'string' },
      by: { type: 'string' },
      format: { type: 'string' },
      consumer: { type: 'string' },
    },
  });
  if (positionals.length !== 1 || positionals[0] !== 'export') throw new CliError(USAGE_EXPORT_USAGE, 2);
  const settings = loadSettings(env);
  let query;
  try {
    query = parseUsageQuery(values, settings.quota.timeZone);
  } catch (err) {
    if (err instanceof UsageQueryError) throw new CliError(`usage export: --${err.message}`, 2);
    throw err;
  }
  const target = settings.redis;
  if (topologyOf(target) === 'none') {
    throw new CliError(
      "usage export reads the usage kept in Redis: set REDIS_URL (or REDIS_CLUSTER_NODES, REDIS_SENTINELS); the embedded store's is at GET /admin/v1/usage",
      2,
    );
  }
  const redis = connectRedis(target, 'cli');
  redis.on('error', () => {});
  try {
    await whenReady(redis, 3000, true).catch((err: Error) => {
      throw new CliError(`cannot reach Redis at ${describeRedis(target)}: ${err.message}`);
    });
    const reader = new RedisUsageReader(redis);
    const rows = usageRows(reader.days(query.fromMs, query.toMs, query.consumer), query);
    for await (const line of formatUsage(rows, query.format)) {
      if (!out.write(line)) await once(out, 'drain');
    }
  } finally {
    redis.disconnect();
  }
}
