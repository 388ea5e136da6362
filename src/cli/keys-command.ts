import { parseArgs } from 'node:util';
import { loadPlans } from '../config/load.js';
import { configDirFrom, loadSettings } from '../config/settings.js';
import { hashApiKey, KEY_ID_PATTERN, KEY_PREFIX, newApiKey, parseApiKey } from '../keys/format.js';
import { parseQuotaOverride } from '../keys/quota-override.js';
import { OWNER_PATTERN, publicView, type KeyPatch, type KeyRecord } from '../keys/record.js';
import { connectRedis, whenReady } from '../store/redis/connect.js';
import { describeRedis, topologyOf } from '../config/redis-target.js';
import { RedisKeyStore } from '../store/redis/redis-key-store.js';
import { quotaFor } from '../quota/quota-for.js';
import { quotaSubject } from '../quota/quota-subject.js';
import { RedisQuotaStore } from '../store/redis/redis-quota-store.js';
import { CliError } from './cli-error.js';
import { describeUsage, usageReport } from './usage-report.js';

export const KEYS_USAGE = `tollgate keys <command> [options]   (needs REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS)

  create --plan P [--name N] [--per-minute X --per-day Y] [--shadow] [--owner O]
                                                            create a key; prints the secret once. --owner:
                                                            the customer it belongs to (scope: owner plans)
  list                                                      all keys
  show ID                                                   one key
  revoke ID                                                 stop a key at once, on every replica
  set-plan ID PLAN                                          move a key to another plan
  set-quota ID [--per-minute X --per-day Y] [--shadow] | --clear
                                                            negotiated quotas that override the plan's;
                                                            --shadow: refusals are only counted and logged
  unban ID                                                  lift a ban at once, on every replica
  usage ID                                                  both windows: used, limit, remaining, reset

  --json   one JSON document on stdout, for scripts`;

const KEY_ACTIONS = ['create', 'list', 'show', 'revoke', 'set-plan', 'set-quota', 'unban', 'usage'];

interface Io {
  out(text: string): void;
}

export async function keysCommand(argv: string[], env: NodeJS.ProcessEnv, io: Io): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      plan: { type: 'string' },
      name: { type: 'string' },
      'per-minute': { type: 'string' },
      'per-day': { type: 'string' },
      clear: { type: 'boolean' },
      shadow: { type: 'boolean' },
      owner: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const [action, ...args] = positionals;
  if (!action) throw new CliError(KEYS_USAGE, 2);
  if (!KEY_ACTIONS.includes(action)) throw new CliError(`unknown keys command "${action}"\n\n${KEYS_USAGE}`, 2);

  // The same Redis as the gateway's: gateway.yaml's redis with REDIS_* laid over it.
  const target = loadSettings(env).redis;
  if (topologyOf(target) === 'none') {
    throw new CliError(
      'keys commands manage the Redis key store: set REDIS_URL (or REDIS_CLUSTER_NODES, REDIS_SENTINELS); the embedded store of `tollgate up` lives only inside that process',
      2,
    );
  }
  const redis = connectRedis(target, 'cli');
  redis.on('error', () => {});
  try {
    await whenReady(redis, 3000, true).catch((err: Error) => {
      throw new CliError(`cannot reach Redis at ${describeRedis(target)}: ${err.message}`);
    });
    const store = new RedisKeyStore(redis);
    const show = (record: KeyRecord, extra: Record<string, unknown> = {}) =>
      io.out(values.json ? JSON.stringify({ ...publicView(record), ...extra }) : describe(record, extra));
    const planNames = () => Object.keys(loadPlans(configDirFrom(env)).plans);
    const requirePlan = (plan: string | undefined) => {
      if (!plan) throw new CliError('--plan is required');
      const known = planNames();
      if (!known.includes(plan)) throw new CliError(`unknown plan "${plan}" (plans: ${known.join(', ')})`);
      return plan;
    };
    const requireId = (id: string | undefined) => {
      if (id && KEY_ID_PATTERN.test(id)) return id;
      // Never echo what was typed: a pasted secret key would land in the terminal log.
      if (id && id.startsWith(KEY_PREFIX)) {
        const keyId = parseApiKey(id);
        throw new CliError(
          keyId ? `that is an API key, not a key id; its id is ${keyId}` : 'that looks like an API key, not a key id (12 lowercase letters or digits)',
        );
      }
      throw new CliError(`give a key id (12 lowercase letters or digits), got ${JSON.stringify(id ?? '')}`);
    };
    const update = async (id: string, patch: KeyPatch) => {
      const record = await store.update(id, patch);
      if (!record) throw new CliError(`no key with id "${id}"`);
      return record;
    };

    switch (action) {
      case 'create': {
        const plan = requirePlan(values.plan);
        const quota = parseQuotaOverride(values['per-minute'], values['per-day']);
        if (typeof quota === 'string') throw new CliError(quota);
        if (values.owner !== undefined && !OWNER_PATTERN.test(values.owner)) {
          throw new CliError('--owner: 1 to 64 lowercase letters, digits, ".", "_" or "-", starting with a letter or digit');
        }
        const { id, key } = newApiKey();
        const record: KeyRecord = {
          id,
          hash: hashApiKey(key),
          name: values.name ?? '',
          plan,
          status: 'active',
          createdAt: new Date().toISOString(),
          ...quota,
          ...(values.shadow && { shadow: true }),
          ...(values.owner !== undefined && { owner: values.owner }),
        };
        await store.create(record);
        await store.announce(id);
        if (values.json) io.out(JSON.stringify({ ...publicView(record), key }));
        else io.out(`${describe(record)}\n\nAPI key (shown once; store it now):\n  ${key}`);
        return;
      }
      case 'list': {
        const records = await store.list();
        if (values.json) io.out(JSON.stringify(records.map(publicView)));
        else io.out(records.length ? table(records) : 'no keys');
        return;
      }
      case 'show': {
        const id = requireId(args[0]);
        const record = await store.get(id);
        if (!record) throw new CliError(`no key with id "${id}"`);
        return show(record);
      }
      case 'revoke':
        return show(await update(requireId(args[0]), { status: 'revoked' }));
      case 'set-plan': {
        const id = requireId(args[0]);
        return show(await update(id, { plan: requirePlan(args[1]) }));
      }
      case 'set-quota': {
        const id = requireId(args[0]);
        if (values.clear) {
          if (values['per-minute'] !== undefined || values['per-day'] !== undefined || values.shadow) {
            throw new CliError('give either --clear or --per-minute and --per-day (and/or --shadow), not both');
          }
          return show(await update(id, { perMinute: undefined, perDay: undefined, shadow: undefined }));
        }
        const quota = parseQuotaOverride(values['per-minute'], values['per-day']);
        if (quota === undefined && !values.shadow) throw new CliError('give --per-minute and --per-day, --shadow, or --clear');
        if (typeof quota === 'string') throw new CliError(quota);
        return show(await update(id, { ...quota, ...(values.shadow && { shadow: true }) }));
      }
      case 'unban': {
        const id = requireId(args[0]);
        const record = await store.get(id);
        if (!record) throw new CliError(`no key with id "${id}"`);
        // Under a `scope: owner` plan the ban is the owner's, shared by all of its keys.
        const quota = quotaFor(record, loadPlans(configDirFrom(env)));
        const subject = quota ? quotaSubject(record, quota) : id;
        const wasBanned = await new RedisQuotaStore(redis).unban(subject);
        await store.announce(subject); // every replica drops its cached ban at once
        if (subject !== id) await store.announce(id);
        if (values.json) io.out(JSON.stringify({ id, unbanned: wasBanned }));
        else io.out(wasBanned ? `ban lifted for ${id}` : `${id} was not banned`);
        return;
      }
      case 'usage': {
        const id = requireId(args[0]);
        const record = await store.get(id);
        if (!record) throw new CliError(`no key with id "${id}"`);
        const quota = quotaFor(record, loadPlans(configDirFrom(env)));
        if (!quota) throw new CliError(`key ${id} has plan "${record.plan}", which plans.yaml does not define`);
        const report = usageReport(id, record.plan, quota, await new RedisQuotaStore(redis).usage(quotaSubject(record, quota)));
        io.out(values.json ? JSON.stringify(report) : describeUsage(report));
        return;
      }
    }
  } finally {
    redis.disconnect();
  }
}

function quotaText(record: KeyRecord): string {
  const windows = record.perMinute !== undefined ? `${record.perMinute}/min, ${record.perDay}/day (own quota)` : 'from plan';
  return record.shadow ? `${windows}, shadow` : windows;
}

function describe(record: KeyRecord, extra: Record<string, unknown> = {}): string {
  const lines = [
    `id:       ${record.id}`,
    `name:     ${record.name || '-'}`,
    `plan:     ${record.plan}`,
    `quota:    ${quotaText(record)}`,
    ...(record.owner ? [`owner:    ${record.owner}`] : []),
    `status:   ${record.status}`,
    `created:  ${record.createdAt}`,
  ];
  for (const [k, v] of Object.entries(extra)) lines.push(`${`${k}:`.padEnd(10)}${String(v)}`);
  return lines.join('\n');
}

function table(records: KeyRecord[]): string {
  const rows = [['ID', 'NAME', 'PLAN', 'STATUS', 'QUOTA', 'CREATED']];
  for (const r of records) rows.push([r.id, r.name || '-', r.plan, r.status, quotaText(r), r.createdAt]);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

