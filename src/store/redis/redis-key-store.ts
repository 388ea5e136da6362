import type { RedisClient } from './connect.js';
import { subscriptionsOf } from './subscriptions.js';
import type { KeyChange, KeyPatch, KeyRecord } from '../../keys/record.js';
import type { KeyStore } from '../key-store.js';
import { INVALIDATION_CHANNEL, KEY_INDEX, keyRecordKey } from './redis-keys.js';

// Updates only an existing record (a patch must never resurrect a deleted key as a partial hash).
// ARGV: field/value pairs to set, then "--", then fields to delete. Returns the record before and
// after, read in the same atomic step, so the audit's before/after cannot race another change.
const UPDATE_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local before = redis.call('HGETALL', KEYS[1])
local i = 1
while ARGV[i] ~= '--' do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
for j = i + 1, #ARGV do redis.call('HDEL', KEYS[1], ARGV[j]) end
return {before, redis.call('HGETALL', KEYS[1])}
`;

// Replaces the hash; the replaced one becomes previousHash until ARGV[2] (or is dropped when
// ARGV[2] is ""). Atomic, so two concurrent rotations cannot both keep the same old hash.
const ROTATE_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
local before = redis.call('HGETALL', KEYS[1])
local old = redis.call('HGET', KEYS[1], 'hash')
redis.call('HSET', KEYS[1], 'hash', ARGV[1])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], 'previousHash', 'graceEndsAt')
else
  redis.call('HSET', KEYS[1], 'previousHash', old, 'graceEndsAt', ARGV[2])
end
return {before, redis.call('HGETALL', KEYS[1])}
`;

/** Key records in Redis hashes; changes are published so every replica drops its cached copy. */
export class RedisKeyStore implements KeyStore {
  private stopListening?: () => void;
  private readonly listeners: Array<(id: string | null) => void> = [];

  constructor(private readonly redis: RedisClient) {
    redis.defineCommand('tgUpdateKey', { numberOfKeys: 1, lua: UPDATE_SCRIPT });
    redis.defineCommand('tgRotateKey', { numberOfKeys: 1, lua: ROTATE_SCRIPT });
  }

  async create(record: KeyRecord): Promise<void> {
    // Index first: a record that exists is always listed (a listed id without a record is skipped).
    await this.redis.sadd(KEY_INDEX, record.id);
    const created = await this.redis.hsetnx(keyRecordKey(record.id), 'hash', record.hash);
    if (!created) throw new Error(`key id ${record.id} already exists`);
    await this.redis.hset(keyRecordKey(record.id), toFields(record));
  }

  async get(id: string): Promise<KeyRecord | null> {
    return fromFields(await this.redis.hgetall(keyRecordKey(id)));
  }

  async list(): Promise<KeyRecord[]> {
    const ids = await this.redis.smembers(KEY_INDEX);
    const records = await Promise.all(ids.map((id) => this.get(id)));
    return records.filter((r): r is KeyRecord => r !== null).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async ids(): Promise<string[]> {
    return this.redis.smembers(KEY_INDEX);
  }

  async update(id: string, patch: KeyPatch): Promise<KeyChange | null> {
    const set: string[] = [];
    const remove: string[] = [];
    for (const [field, value] of Object.entries(patch)) {
      if (value === undefined) remove.push(field);
      else set.push(field, Array.isArray(value) ? value.join(LIST_SEPARATORS[field as ListField]) : String(value));
    }
    return this.changed(id, await this.scripts().tgUpdateKey(keyRecordKey(id), ...set, '--', ...remove));
  }

  async rotate(id: string, hash: string, graceEndsAt?: string): Promise<KeyChange | null> {
    return this.changed(id, await this.scripts().tgRotateKey(keyRecordKey(id), hash, graceEndsAt ?? ''));
  }

  private scripts(): RedisWithScripts {
    return this.redis as unknown as RedisWithScripts;
  }

  private async changed(id: string, reply: [string[], string[]] | null): Promise<KeyChange | null> {
    if (!reply) return null;
    await this.announce(id);
    const before = fromFields(pairsToObject(reply[0]));
    const after = fromFields(pairsToObject(reply[1]));
    return before && after ? { before, after } : null;
  }

  async announce(id: string): Promise<void> {
    await this.redis.publish(INVALIDATION_CHANNEL, id);
  }

  onChange(listener: (id: string | null) => void): void {
    this.listeners.push(listener);
    // After every (re)subscription, messages may have been missed: re-read every cached record.
    this.stopListening ??= subscriptionsOf(this.redis).listen(INVALIDATION_CHANNEL, {
      message: (id) => this.emit(id),
      gap: () => this.emit(null),
    }).stop;
  }

  private emit(id: string | null): void {
    for (const listener of this.listeners) listener(id);
  }

  async close(): Promise<void> {
    this.stopListening?.();
    this.stopListening = undefined;
  }
}

interface RedisWithScripts {
  tgUpdateKey(key: string, ...args: string[]): Promise<[string[], string[]] | null>;
  tgRotateKey(key: string, hash: string, graceEndsAt: string): Promise<[string[], string[]] | null>;
}

/**
 * A list is one field, its items joined with a character none of them holds: `,` for networks,
 * a space for scopes (RFC 6749 scope names hold no space, but may hold a comma).
 */
const LIST_SEPARATORS = { allowedCidrs: ',', scopes: ' ' } as const;
type ListField = keyof typeof LIST_SEPARATORS;
const LIST_FIELDS = Object.keys(LIST_SEPARATORS) as ListField[];

/** Optional fields, stored only when set. */
const OPTIONAL_TEXT = ['expiresAt', 'previousHash', 'graceEndsAt', 'owner', 'billingAnchor'] as const;

function toFields(record: KeyRecord): Record<string, string> {
  const fields: Record<string, string> = {
    id: record.id,
    hash: record.hash,
    name: record.name,
    plan: record.plan,
    status: record.status,
    createdAt: record.createdAt,
  };
  if (record.perMinute !== undefined) fields.perMinute = String(record.perMinute);
  if (record.perDay !== undefined) fields.perDay = String(record.perDay);
  if (record.perMonth !== undefined) fields.perMonth = String(record.perMonth);
  if (record.maxConcurrent !== undefined) fields.maxConcurrent = String(record.maxConcurrent);
  for (const field of OPTIONAL_TEXT) if (record[field] !== undefined) fields[field] = record[field];
  if (record.shadow !== undefined) fields.shadow = String(record.shadow);
  for (const field of LIST_FIELDS) if (record[field] !== undefined) fields[field] = record[field].join(LIST_SEPARATORS[field]);
  return fields;
}

function fromFields(fields: Record<string, string>): KeyRecord | null {
  if (!fields.id || !fields.hash || !fields.plan) return null;
  const record: KeyRecord = {
    id: fields.id,
    hash: fields.hash,
    name: fields.name ?? '',
    plan: fields.plan,
    status: fields.status === 'revoked' ? 'revoked' : 'active',
    createdAt: fields.createdAt ?? '',
  };
  if (fields.perMinute !== undefined) record.perMinute = Number(fields.perMinute);
  if (fields.perDay !== undefined) record.perDay = Number(fields.perDay);
  if (fields.perMonth !== undefined) record.perMonth = Number(fields.perMonth);
  if (fields.maxConcurrent !== undefined) record.maxConcurrent = Number(fields.maxConcurrent);
  for (const field of OPTIONAL_TEXT) if (fields[field] !== undefined) record[field] = fields[field];
  if (fields.shadow !== undefined) record.shadow = fields.shadow === 'true';
  for (const field of LIST_FIELDS) if (fields[field]) record[field] = fields[field].split(LIST_SEPARATORS[field]);
  return record;
}

function pairsToObject(pairs: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < pairs.length; i += 2) out[pairs[i]!] = pairs[i + 1]!;
  return out;
}
