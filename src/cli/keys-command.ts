import { parseArgs } from 'node:util';
import { loadPlans } from '../config/load.js';
import { plansInZone, type PlansConfig } from '../config/plans-schema.js';
import { loadSettings } from '../config/settings.js';
import { KEY_ID_PATTERN, KEY_PREFIX, parseApiKey } from '../keys/format.js';
import { revokeKey, updateKey } from '../keys/lifecycle/change-key.js';
import { createKey } from '../keys/lifecycle/create-key.js';
import type { Caller, LifecycleDeps } from '../keys/lifecycle/deps.js';
import { findKey } from '../keys/lifecycle/find-key.js';
import { changeKeyCredits, keyCredits } from '../keys/lifecycle/key-credits.js';
import { keyUsage } from '../keys/lifecycle/key-usage.js';
import { LifecycleError } from '../keys/lifecycle/lifecycle-error.js';
import { listAudit } from '../keys/lifecycle/list-audit.js';
import { listKeys } from '../keys/lifecycle/list-keys.js';
import { rotateKey } from '../keys/lifecycle/rotate-key.js';
import { unbanKey } from '../keys/lifecycle/unban-key.js';
import { publicView, type PublicKeyRecord } from '../keys/record.js';
import { connectRedis, whenReady } from '../store/redis/connect.js';
import { RedisAuditLog } from '../store/redis/redis-audit-log.js';
import { RedisKeyStore } from '../store/redis/redis-key-store.js';
import { RedisQuotaStore } from '../store/redis/redis-quota-store.js';
import { describeRedis, topologyOf } from '../config/redis-target.js';
import { CliError } from './cli-error.js';
import { KEYS_USAGE } from './keys-usage.js';
import { describeAudit, describeCredits, describeKey, keyTable } from './describe-keys.js';
import { describeUsage } from './usage-report.js';

const KEY_ACTIONS = [
  'create',
  'list',
  'show',
  'revoke',
  'set-plan',
  'set-quota',
  'set-expiry',
  'set-cidrs',
  'set-scopes',
  'rotate',
  'unban',
  'usage',
  'audit',
  'credits',
];

/** Fields named as the options that set them, so a refusal points at what to retype. */
const OPTION_NAMES: Record<string, string> = {
  plan: '--plan',
  name: '--name',
  perMinute: '--per-minute',
  perDay: '--per-day',
  perMonth: '--per-month',
  maxConcurrent: '--max-concurrent',
  billingAnchor: '--billing-anchor',
  expiresAt: '--expires-at',
  graceSeconds: '--grace-seconds',
  cursor: '--cursor',
  limit: '--limit',
  status: '--status',
  shadow: '--shadow',
  owner: '--owner',
  allowedCidrs: '--allow-cidr',
  scopes: '--scope',
  reason: '--reason',
  add: 'the amount to add',
  set: 'the balance to set',
};
// A list's item (`allowedCidrs.1`) is named by its option too.
// The CLI holds the store's own credentials: nothing limits it, so it acts as admin.
const CLI: Caller = { actor: 'cli', role: 'admin', label: (field) => OPTION_NAMES[field] ?? OPTION_NAMES[field.split('.')[0]!] ?? field };

interface Io {
  out(text: string): void;
}

export async function keysCommand(argv: string[], env: NodeJS.ProcessEnv, io: Io): Promise<void> {
  const { values, positionals } = parseArgs({
    args: negativesLast(argv),
    allowPositionals: true,
    strict: true,
    options: {
      plan: { type: 'string' },
      name: { type: 'string' },
      status: { type: 'string' },
      'per-minute': { type: 'string' },
      'per-day': { type: 'string' },
      'per-month': { type: 'string' },
      'max-concurrent': { type: 'string' },
      'billing-anchor': { type: 'string' },
      'expires-at': { type: 'string' },
      'grace-seconds': { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      clear: { type: 'boolean' },
      shadow: { type: 'boolean' },
      owner: { type: 'string' },
      'allow-cidr': { type: 'string', multiple: true },
      scope: { type: 'string', multiple: true },
      reason: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const [action, ...args] = positionals;
  if (!action) throw new CliError(KEYS_USAGE, 2);
  if (!KEY_ACTIONS.includes(action)) throw new CliError(`unknown keys command "${action}"\n\n${KEYS_USAGE}`, 2);

  // The same Redis as the gateway's: gateway.yaml's redis with REDIS_* laid over it.
  const settings = loadSettings(env);
  const target = settings.redis;
  if (topologyOf(target) === 'none') {
    throw new CliError(
      'keys commands manage the Redis key store: set REDIS_URL (or REDIS_CLUSTER_NODES, REDIS_SENTINELS); the embedded store of `tollgate up` lives only inside that process',
      2,
    );
  }
  const configDir = settings.configDir;
  const redis = connectRedis(target, 'cli');
  redis.on('error', () => {});
  try {
    await whenReady(redis, 3000, true).catch((err: Error) => {
      throw new CliError(`cannot reach Redis at ${describeRedis(target)}: ${err.message}`);
    });
    let plans: PlansConfig | undefined;
    const deps: LifecycleDeps = {
      keys: new RedisKeyStore(redis),
      quotas: new RedisQuotaStore(redis),
      audit: new RedisAuditLog(redis, settings.admin.auditMaxEntries),
      plans: () => (plans ??= plansInZone(loadPlans(configDir), settings.quota.timeZone)),
      now: Date.now,
    };
    const print = (json: unknown, human: string) => io.out(values.json ? JSON.stringify(json) : human);
    const show = (record: PublicKeyRecord) => print(record, describeKey(record));
    const id = () => requireId(args[0]);
    /** `set-cidrs` / `set-scopes ID ITEM... | --clear`: the key's list replaced, or removed; a bad item named as `itemLabel`. */
    const setList = (field: 'allowedCidrs' | 'scopes', itemLabel: string, items: string) => {
      const keyId = id();
      const given = args.slice(1);
      if (Boolean(values.clear) === given.length > 0) throw new CliError(`give either one or more ${items} or --clear`);
      const label = (name: string) => (name.startsWith(field) ? itemLabel : CLI.label(name));
      return updateKey(deps, keyId, { [field]: values.clear ? null : given }, { ...CLI, label });
    };

    /** `credits show ID` / `credits add ID N --reason R` / `credits set ID N --reason R`. */
    const credits = async () => {
      const [verb, keyId, amount] = args;
      if (verb === 'show') {
        const report = await keyCredits(deps, requireId(keyId));
        return print(report, describeCredits(report));
      }
      if (verb !== 'add' && verb !== 'set')
        throw new CliError('give credits show ID, credits add ID N --reason R or credits set ID N --reason R', 2);
      if (amount === undefined || !/^-?\d{1,16}$/.test(amount))
        throw new CliError(`give the amount to ${verb} as a whole number, got ${JSON.stringify(amount ?? '')}`);
      if (values.reason === undefined) throw new CliError('give --reason R: why the balance changes (kept in the audit)');
      const report = await changeKeyCredits(deps, requireId(keyId), { [verb]: Number(amount), reason: values.reason }, CLI);
      return print(report, describeCredits(report));
    };

    await lifecycleErrorsAsCliErrors(async () => {
      switch (action) {
        case 'create': {
          const input = {
            plan: values.plan,
            name: values.name,
            expiresAt: values['expires-at'],
            ...quotaOptions(values),
            shadow: values.shadow || undefined,
            owner: values.owner,
            allowedCidrs: values['allow-cidr'],
            scopes: values.scope,
          };
          const { record, key } = await createKey(deps, withoutUndefined(input), CLI);
          return print({ ...record, key }, `${describeKey(record)}\n\nAPI key (shown once; store it now):\n  ${key}`);
        }
        case 'list': {
          const records: PublicKeyRecord[] = [];
          let cursor: string | undefined;
          do {
            const page = await listKeys(
              deps,
              withoutUndefined({ plan: values.plan, status: values.status, cursor, limit: '200' }),
              CLI.label,
            );
            records.push(...page.keys);
            cursor = page.next ?? undefined;
          } while (cursor);
          return print(records, records.length ? keyTable(records) : 'no keys');
        }
        case 'show':
          return show(publicView(await findKey(deps, id())));
        case 'revoke':
          return show(await revokeKey(deps, id(), CLI));
        case 'set-plan': {
          const keyId = id();
          if (!args[1]) throw new CliError('give a plan: tollgate keys set-plan ID PLAN');
          return show(await updateKey(deps, keyId, { plan: args[1] }, CLI));
        }
        case 'set-quota': {
          const keyId = id();
          const quota = quotaOptions(values);
          const given = Object.values(quota).some((value) => value !== undefined) || values.shadow;
          if (values.clear && given) {
            throw new CliError(
              'give either --clear or --per-minute and --per-day (and/or --per-month, --max-concurrent, --billing-anchor, --shadow), not both',
            );
          }
          if (values.clear) {
            const cleared = { perMinute: null, perDay: null, perMonth: null, maxConcurrent: null, billingAnchor: null, shadow: null };
            return show(await updateKey(deps, keyId, cleared, CLI));
          }
          if (!given)
            throw new CliError('give --per-minute and --per-day, --per-month, --max-concurrent, --billing-anchor, --shadow, or --clear');
          return show(await updateKey(deps, keyId, withoutUndefined({ ...quota, shadow: values.shadow || undefined }), CLI));
        }
        case 'set-expiry': {
          const keyId = id();
          if (Boolean(values.clear) === (args[1] !== undefined))
            throw new CliError('give either an expiry date (ISO 8601 with a zone) or --clear');
          const label = (field: string) => (field === 'expiresAt' ? 'the expiry date' : CLI.label(field));
          return show(await updateKey(deps, keyId, { expiresAt: values.clear ? null : args[1] }, { ...CLI, label }));
        }
        case 'set-cidrs':
          return show(await setList('allowedCidrs', 'CIDR', 'CIDRs'));
        case 'set-scopes':
          return show(await setList('scopes', 'scope', 'scopes'));
        case 'rotate': {
          const keyId = id();
          const grace = values['grace-seconds'];
          if (grace === undefined) throw new CliError('give --grace-seconds S: how long the old secret keeps working (0: it stops now)');
          const { record, key } = await rotateKey(deps, keyId, { graceSeconds: wholeNumber('--grace-seconds', grace) }, CLI);
          return print({ ...record, key }, `${describeKey(record)}\n\nNew API key (shown once; store it now):\n  ${key}`);
        }
        case 'unban': {
          const result = await unbanKey(deps, id(), CLI);
          return print(result, result.unbanned ? `ban lifted for ${result.id}` : `${result.id} was not banned`);
        }
        case 'usage': {
          const report = await keyUsage(deps, id());
          return print(report, describeUsage(report));
        }
        case 'credits':
          return credits();
        case 'audit': {
          const page = await listAudit(deps, withoutUndefined({ limit: values.limit, cursor: values.cursor }), CLI.label);
          return print(page, describeAudit(page));
        }
      }
    });
  } finally {
    redis.disconnect();
  }
}

/**
 * A negative number (`credits add ID -5`) would read as an option: such words go after a `--`, as
 * the last positionals (the amount is the last one), unless the caller wrote a `--` already.
 */
function negativesLast(argv: string[]): string[] {
  if (argv.includes('--')) return argv;
  const negative = (word: string) => /^-\d+$/.test(word);
  const negatives = argv.filter(negative);
  return negatives.length === 0 ? argv : [...argv.filter((word) => !negative(word)), '--', ...negatives];
}

function requireId(id: string | undefined): string {
  if (id && KEY_ID_PATTERN.test(id)) return id;
  // Never echo what was typed: a pasted secret key would land in the terminal log.
  if (id && id.startsWith(KEY_PREFIX)) {
    const keyId = parseApiKey(id);
    throw new CliError(
      keyId
        ? `that is an API key, not a key id; its id is ${keyId}`
        : 'that looks like an API key, not a key id (12 lowercase letters or digits)',
    );
  }
  throw new CliError(`give a key id (12 lowercase letters or digits), got ${JSON.stringify(id ?? '')}`);
}

/** Option strings become numbers here; what a valid quota (and anchor) is, the lifecycle decides. */
function quotaOptions(values: {
  'per-minute'?: string;
  'per-day'?: string;
  'per-month'?: string;
  'max-concurrent'?: string;
  'billing-anchor'?: string;
}): {
  perMinute?: number;
  perDay?: number;
  perMonth?: number;
  maxConcurrent?: number;
  billingAnchor?: string;
} {
  const number = (option: string, value: string | undefined) => (value === undefined ? undefined : wholeNumber(option, value));
  return {
    perMinute: number('--per-minute', values['per-minute']),
    perDay: number('--per-day', values['per-day']),
    perMonth: number('--per-month', values['per-month']),
    maxConcurrent: number('--max-concurrent', values['max-concurrent']),
    billingAnchor: values['billing-anchor'],
  };
}

function wholeNumber(option: string, value: string): number {
  if (!/^\d{1,15}$/.test(value)) throw new CliError(`${option} must be a whole number, got "${value}"`);
  return Number(value);
}

/** Absent options are absent fields, not `undefined` ones (the schemas are strict about fields). */
function withoutUndefined<T extends Record<string, unknown>>(input: T): Partial<T> {
  return Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) as Partial<T>;
}

async function lifecycleErrorsAsCliErrors(run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (err) {
    if (err instanceof LifecycleError) throw new CliError(err.message);
    throw err;
  }
}
