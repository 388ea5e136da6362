import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseApiKey } from '../../src/keys/format.js';
import { keysInProcess } from '../helpers/keys-in-process.js';
import { freePort } from '../helpers/ports.js';
import { runCli } from '../helpers/processes.js';
import { TestRedis } from '../helpers/redis-server.js';

// `tollgate keys …` run as real processes (the built CLI) against a real redis-server of this file;
// only the keys that tests of other commands start from are made in-process.

const KEY_FORMAT = /^tg_[0-9a-z]{12}_[0-9A-Za-z]{38}$/;
const PLANS = ['free', 'pro', 'business', 'enterprise'];
/** Well-formed ids (12 chars of [0-9a-z]) that no test ever creates. */
const MISSING_ID = 'zzzzzzzzzzzz';

interface PublicKey {
  id: string;
  name: string;
  plan: string;
  status: 'active' | 'revoked';
  createdAt: string;
  perMinute?: number;
  perDay?: number;
}

interface CreatedKey extends PublicKey {
  key: string;
}

let redis: TestRedis;
let client: Redis;
/** Every secret key any test has seen: none may ever show up on any command's stderr. */
const secrets: string[] = [];

beforeAll(async () => {
  redis = await TestRedis.start();
  client = redis.client();
});

afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
});

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Runs `tollgate keys …` against this file's Redis (or the env given) and checks stderr leaks no secret. */
async function keys(args: string[], env: Record<string, string | undefined> = { REDIS_URL: redis.url }) {
  const result = await runCli(['keys', ...args], env);
  for (const secret of secrets) expect(result.stderr).not.toContain(secret);
  return result;
}

/** Runs a keys command that must succeed with --json, and returns the parsed document. */
async function keysJson<T>(args: string[]): Promise<T> {
  const result = await keys([...args, '--json']);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as T;
}

async function createKey(args: string[] = ['--plan', 'free']): Promise<CreatedKey> {
  const created = await keysJson<CreatedKey>(['create', ...args]);
  secrets.push(created.key);
  return created;
}

/**
 * A key a test of another command starts from, made by the same `keys create` in-process (see
 * keysInProcess): `keys create` as a process is tested above and in the audit test.
 */
async function setupKey(args: string[] = ['--plan', 'free']): Promise<CreatedKey> {
  const created = JSON.parse(await keysInProcess(['create', ...args, '--json'], { REDIS_URL: redis.url })) as CreatedKey;
  secrets.push(created.key);
  return created;
}

/** A failure: non-zero exit, a one-line `tollgate: …` message on stderr, nothing on stdout. */
async function expectFailure(args: string[], env?: Record<string, string | undefined>): Promise<string> {
  const result = await keys(args, env);
  expect(result.code, `stdout: ${result.stdout}\nstderr: ${result.stderr}`).not.toBe(0);
  expect(result.code).not.toBeNull();
  expect(result.stdout).toBe('');
  expect(result.stderr).toMatch(/^tollgate: \S/);
  expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
  return result.stderr;
}

const indexSize = () => client.scard('tg:keys');

describe('keys create', () => {
  it('prints one JSON object with the new key and its public record, never the hash', async () => {
    const result = await keys(['create', '--plan', 'free', '--name', 'demo', '--json']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout.trim().split('\n')).toHaveLength(1);
    const created = JSON.parse(result.stdout) as CreatedKey & { hash?: string };
    secrets.push(created.key);

    expect(created.key).toMatch(KEY_FORMAT);
    expect(parseApiKey(created.key)).toBe(created.id); // checksum valid, id embedded in the key
    expect(created).toMatchObject({ plan: 'free', name: 'demo', status: 'active' });
    expect(created.id).toMatch(/^[0-9a-z]{12}$/);
    expect(Number.isNaN(Date.parse(created.createdAt))).toBe(false);
    expect(created).not.toHaveProperty('hash');
    expect(created).not.toHaveProperty('perMinute');
    expect(created).not.toHaveProperty('perDay');
  });

  it('stores only the SHA-256 of the key in tg:key:{id} and indexes the id in tg:keys', async () => {
    const created = await createKey(['--plan', 'pro', '--name', 'stored']);
    const fields = await client.hgetall(`tg:key:{${created.id}}`);

    expect(fields.hash).toBe(sha256(created.key));
    expect(fields).toMatchObject({ id: created.id, plan: 'pro', name: 'stored', status: 'active' });
    const secretPart = created.key.slice(`tg_${created.id}_`.length);
    for (const [field, value] of Object.entries(fields)) {
      expect(field).not.toContain(created.key);
      expect(value).not.toContain(created.key);
      expect(value).not.toContain(secretPart);
    }
    expect(await client.sismember('tg:keys', created.id)).toBe(1);
  });

  it('prints the key exactly once in human output, with the id and plan', async () => {
    const result = await keys(['create', '--plan', 'business', '--name', 'human']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const found = result.stdout.match(/tg_[0-9a-z]{12}_[0-9A-Za-z]{38}/g) ?? [];
    expect(found).toHaveLength(1);
    const key = found[0]!;
    secrets.push(key);
    const id = parseApiKey(key);
    expect(id).not.toBeNull();
    expect(result.stdout).toContain(id!);
    expect(result.stdout).toMatch(/plan:\s+business/);
    // The id printed is the one stored, with the key's hash.
    expect(await client.hget(`tg:key:{${id}}`, 'hash')).toBe(sha256(key));
  });

  it('creates a key with negotiated quotas that override the plan', async () => {
    const created = await createKey(['--plan', 'enterprise', '--per-minute', '5000', '--per-day', '2000000']);
    expect(created).toMatchObject({ plan: 'enterprise', perMinute: 5000, perDay: 2000000, status: 'active' });
    const stored = await client.hgetall(`tg:key:{${created.id}}`);
    expect(stored).toMatchObject({ perMinute: '5000', perDay: '2000000' });
  });

  it('creates distinct keys and ids on every call', async () => {
    const a = await createKey();
    const b = await createKey();
    expect(a.id).not.toBe(b.id);
    expect(a.key).not.toBe(b.key);
  });
});

describe('keys list', () => {
  it('shows id and plan in human output but never the secret key', async () => {
    const created = await setupKey(['--plan', 'pro', '--name', 'listed']);
    const result = await keys(['list']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const line = result.stdout.split('\n').find((l) => l.includes(created.id));
    expect(line).toBeDefined();
    expect(line).toMatch(/\bpro\b/);
    expect(line).toContain('listed');
    for (const secret of secrets) expect(result.stdout).not.toContain(secret);
  });

  it('prints a JSON array of public records, without hash or key', async () => {
    const created = await setupKey(['--plan', 'free', '--name', 'json-listed']);
    const list = await keysJson<Array<PublicKey & { hash?: string; key?: string }>>(['list']);
    expect(Array.isArray(list)).toBe(true);
    const record = list.find((r) => r.id === created.id);
    expect(record).toEqual({
      id: created.id,
      name: 'json-listed',
      plan: 'free',
      status: 'active',
      createdAt: created.createdAt,
    });
    for (const r of list) {
      expect(r).not.toHaveProperty('hash');
      expect(r).not.toHaveProperty('key');
    }
  });
});

describe('keys show / revoke / set-plan / set-quota', () => {
  it('show --json returns the public record without hash or key', async () => {
    const created = await setupKey(['--plan', 'business', '--name', 'shown']);
    const shown = await keysJson<Record<string, unknown>>(['show', created.id]);
    expect(shown).toEqual({
      id: created.id,
      name: 'shown',
      plan: 'business',
      status: 'active',
      createdAt: created.createdAt,
    });
  });

  it('show in human output names the id and plan but not the key', async () => {
    const created = await setupKey(['--plan', 'pro']);
    const result = await keys(['show', created.id]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(created.id);
    expect(result.stdout).toMatch(/plan:\s+pro/);
    expect(result.stdout).not.toContain(created.key);
  });

  it('revoke marks the key revoked, in the output and in Redis', async () => {
    const created = await setupKey();
    const revoked = await keysJson<PublicKey>(['revoke', created.id]);
    expect(revoked).toMatchObject({ id: created.id, status: 'revoked', plan: 'free' });
    expect(revoked).not.toHaveProperty('hash');
    expect(await client.hget(`tg:key:{${created.id}}`, 'status')).toBe('revoked');
    // The hash is untouched by the update.
    expect(await client.hget(`tg:key:{${created.id}}`, 'hash')).toBe(sha256(created.key));
  });

  it('set-plan moves the key to another plan', async () => {
    const created = await setupKey();
    const moved = await keysJson<PublicKey>(['set-plan', created.id, 'pro']);
    expect(moved).toMatchObject({ id: created.id, plan: 'pro', status: 'active' });
    expect(await client.hget(`tg:key:{${created.id}}`, 'plan')).toBe('pro');
    const shown = await keysJson<PublicKey>(['show', created.id]);
    expect(shown.plan).toBe('pro');
  });

  it('set-quota sets negotiated quotas and --clear removes them', async () => {
    const created = await setupKey();
    const set = await keysJson<PublicKey>(['set-quota', created.id, '--per-minute', '10', '--per-day', '100']);
    expect(set).toMatchObject({ id: created.id, perMinute: 10, perDay: 100 });
    expect(await client.hmget(`tg:key:{${created.id}}`, 'perMinute', 'perDay')).toEqual(['10', '100']);

    const cleared = await keysJson<PublicKey>(['set-quota', created.id, '--clear']);
    expect(cleared.id).toBe(created.id);
    expect(cleared).not.toHaveProperty('perMinute');
    expect(cleared).not.toHaveProperty('perDay');
    expect(await client.hexists(`tg:key:{${created.id}}`, 'perMinute')).toBe(0);
    expect(await client.hexists(`tg:key:{${created.id}}`, 'perDay')).toBe(0);
  });
});

describe('keys create refuses bad input, storing nothing', () => {
  it('refuses an unknown plan, naming it and listing the known plans', async () => {
    const before = await indexSize();
    const stderr = await expectFailure(['create', '--plan', 'gold', '--json']);
    expect(stderr).toContain('gold');
    for (const plan of PLANS) expect(stderr).toContain(plan);
    expect(await indexSize()).toBe(before);
  });

  it('refuses a create without --plan', async () => {
    const before = await indexSize();
    const stderr = await expectFailure(['create', '--name', 'no-plan', '--json']);
    expect(stderr).toContain('--plan');
    expect(await indexSize()).toBe(before);
  });

  it('refuses --per-minute without --per-day and the reverse', async () => {
    const before = await indexSize();
    for (const args of [
      ['--per-minute', '10'],
      ['--per-day', '100'],
    ]) {
      const stderr = await expectFailure(['create', '--plan', 'enterprise', ...args, '--json']);
      expect(stderr).toMatch(/--per-minute/);
      expect(stderr).toMatch(/--per-day/);
    }
    expect(await indexSize()).toBe(before);
  });

  it('refuses a per-day quota lower than the per-minute quota', async () => {
    const before = await indexSize();
    const stderr = await expectFailure(['create', '--plan', 'enterprise', '--per-minute', '100', '--per-day', '10', '--json']);
    expect(stderr).toContain('--per-day');
    expect(stderr).toMatch(/lower/);
    expect(await indexSize()).toBe(before);
  });

  it('refuses a non-numeric quota', async () => {
    const before = await indexSize();
    const stderr = await expectFailure(['create', '--plan', 'enterprise', '--per-minute', 'lots', '--per-day', '100', '--json']);
    expect(stderr).toContain('--per-minute');
    expect(stderr).toMatch(/number/);
    expect(await indexSize()).toBe(before);
  });

  it('refuses zero and fractional quotas', async () => {
    const before = await indexSize();
    await expectFailure(['create', '--plan', 'enterprise', '--per-minute', '0', '--per-day', '100']);
    await expectFailure(['create', '--plan', 'enterprise', '--per-minute', '1.5', '--per-day', '100']);
    expect(await indexSize()).toBe(before);
  });
});

describe('keys commands on ids refuse unknown and malformed ids', () => {
  it.each([
    ['show', [] as string[]],
    ['revoke', []],
    ['set-plan', ['pro']],
    ['set-quota', ['--per-minute', '10', '--per-day', '100']],
  ])('%s refuses a well-formed id that does not exist, creating nothing', async (action, extra) => {
    const stderr = await expectFailure([action, MISSING_ID, ...extra, '--json']);
    expect(stderr).toContain(MISSING_ID);
    expect(stderr).toMatch(/no key/);
    // An update of a missing key must not resurrect it as a partial record.
    expect(await client.exists(`tg:key:{${MISSING_ID}}`)).toBe(0);
    expect(await client.sismember('tg:keys', MISSING_ID)).toBe(0);
  });

  it.each([
    ['show', [] as string[]],
    ['revoke', []],
    ['set-plan', ['pro']],
    ['set-quota', ['--clear']],
  ])('%s refuses a malformed id', async (action, extra) => {
    const stderr = await expectFailure([action, 'Not-An-Id!', ...extra, '--json']);
    expect(stderr).toContain('Not-An-Id!');
    expect(stderr).toMatch(/key id/);
  });

  it('show refuses a missing id argument', async () => {
    const stderr = await expectFailure(['show', '--json']);
    expect(stderr).toMatch(/key id/);
  });

  it('set-plan refuses an unknown plan and leaves the key unchanged', async () => {
    const created = await setupKey();
    const stderr = await expectFailure(['set-plan', created.id, 'gold', '--json']);
    expect(stderr).toContain('gold');
    expect(await client.hget(`tg:key:{${created.id}}`, 'plan')).toBe('free');
  });

  it('set-quota refuses neither quotas nor --clear', async () => {
    const created = await setupKey();
    const stderr = await expectFailure(['set-quota', created.id, '--json']);
    expect(stderr).toContain('--clear');
  });
});

describe('keys usage errors', () => {
  it('refuses an unknown keys command, naming it', async () => {
    const stderr = await expectFailure(['frobnicate', '--json']);
    expect(stderr).toContain('frobnicate');
  });

  it('refuses an unknown option, naming it', async () => {
    const stderr = await expectFailure(['list', '--bogus']);
    expect(stderr).toContain('--bogus');
  });
});

describe('keys commands without a reachable Redis', () => {
  it('refuses to run without REDIS_URL and says so', async () => {
    const stderr = await expectFailure(['list', '--json'], {});
    expect(stderr).toContain('REDIS_URL');
  });

  // Promptly: it does not retry (a CLI that kept retrying would never end, and meet the test timeout).
  it('says it cannot reach Redis when nothing listens at REDIS_URL, and exits promptly', async () => {
    const port = await freePort();
    const stderr = await expectFailure(['create', '--plan', 'free', '--json'], { REDIS_URL: `redis://127.0.0.1:${port}` });
    expect(stderr).toMatch(/cannot reach Redis/);
    expect(stderr).toContain(String(port));
  });

  it('never prints the Redis password from REDIS_URL', async () => {
    const port = await freePort();
    const stderr = await expectFailure(['list', '--json'], { REDIS_URL: `redis://:s3cretpw@127.0.0.1:${port}` });
    expect(stderr).toMatch(/cannot reach Redis/);
    expect(stderr).not.toContain('s3cretpw');
  });
});

describe('the secret key never reaches stderr', () => {
  it("no command of a key's lifecycle, successful or failing, writes the key to stderr", async () => {
    const created = await setupKey(['--plan', 'free', '--name', 'lifecycle']);
    const runs = [
      await keys(['show', created.id]),
      await keys(['list']),
      await keys(['set-plan', created.id, 'pro', '--json']),
      await keys(['set-plan', created.id, 'gold']),
      await keys(['set-quota', created.id, '--per-minute', '10', '--per-day', '1']),
      await keys(['set-quota', created.id, '--per-minute', '10', '--per-day', '100']),
      await keys(['revoke', created.id]),
      await keys(['revoke', created.id, '--bogus']),
    ];
    for (const run of runs) expect(run.stderr).not.toContain(created.key);
  });

  it('a key pasted where the id belongs is refused without echoing the key', async () => {
    // The likeliest moment for this mistake is revoking a leaked key: the refusal must not copy
    // the secret into terminal scrollback, CI logs or wherever stderr is collected.
    const created = await setupKey(['--plan', 'free', '--name', 'pasted']);
    for (const action of ['show', 'revoke']) {
      const result = await runCli(['keys', action, created.key], { REDIS_URL: redis.url });
      expect(result.code).not.toBe(0);
      expect(result.stdout).toBe('');
      expect(result.stderr).not.toContain(created.key);
    }
    expect(await client.hget(`tg:key:{${created.id}}`, 'status')).toBe('active');
  });
});

describe('keys rotate / set-expiry / audit', () => {
  it('rotate prints a new key for the same id once; Redis keeps the old hash only for the grace', async () => {
    const created = await setupKey(['--plan', 'pro', '--name', 'rotated']);
    const rotated = await keysJson<CreatedKey & { graceEndsAt: string }>(['rotate', created.id, '--grace-seconds', '600']);
    secrets.push(rotated.key);
    expect(rotated).toMatchObject({ id: created.id, plan: 'pro', name: 'rotated', status: 'active' });
    expect(rotated.key).toMatch(KEY_FORMAT);
    expect(parseApiKey(rotated.key)).toBe(created.id);
    expect(rotated.key).not.toBe(created.key);
    expect(Date.parse(rotated.graceEndsAt) - Date.now()).toBeGreaterThan(500_000);
    const stored = await client.hgetall(`tg:key:{${created.id}}`);
    expect(stored).toMatchObject({ hash: sha256(rotated.key), previousHash: sha256(created.key), graceEndsAt: rotated.graceEndsAt });

    const human = await keys(['rotate', created.id, '--grace-seconds', '0']);
    expect(human.code).toBe(0);
    const printed = human.stdout.match(/tg_[0-9a-z]{12}_[0-9A-Za-z]{38}/g) ?? [];
    expect(printed).toHaveLength(1);
    secrets.push(printed[0]!);
    expect(await client.hexists(`tg:key:{${created.id}}`, 'previousHash')).toBe(0);
  });

  it('rotate refuses a missing or bad --grace-seconds', async () => {
    const created = await setupKey();
    expect(await expectFailure(['rotate', created.id])).toContain('--grace-seconds');
    expect(await expectFailure(['rotate', created.id, '--grace-seconds', 'soon'])).toMatch(/--grace-seconds must be a whole number/);
    expect(await expectFailure(['rotate', created.id, '--grace-seconds', '99999999'])).toMatch(/--grace-seconds must be at most/);
  });

  it('set-expiry sets, refuses the past and bad dates, and --clear removes it', async () => {
    const created = await setupKey();
    const set = await keysJson<PublicKey & { expiresAt?: string }>(['set-expiry', created.id, '2099-01-01T00:00:00Z']);
    expect(set.expiresAt).toBe('2099-01-01T00:00:00.000Z');
    expect(await client.hget(`tg:key:{${created.id}}`, 'expiresAt')).toBe('2099-01-01T00:00:00.000Z');
    expect(await expectFailure(['set-expiry', created.id, '2001-01-01T00:00:00Z'])).toMatch(/the expiry date must be in the future/);
    expect(await expectFailure(['set-expiry', created.id, 'tomorrow'])).toMatch(/the expiry date must be an ISO 8601 date-time/);
    expect(await expectFailure(['set-expiry', created.id])).toMatch(/--clear/);
    const cleared = await keysJson<PublicKey & { expiresAt?: string }>(['set-expiry', created.id, '--clear']);
    expect(cleared).not.toHaveProperty('expiresAt');
    expect(await client.hexists(`tg:key:{${created.id}}`, 'expiresAt')).toBe(0);
  });

  it('create --expires-at stores the expiry; a date in the past is refused naming the option', async () => {
    const created = await createKey(['--plan', 'free', '--expires-at', '2099-06-01T00:00:00+02:00']);
    expect(created).toMatchObject({ expiresAt: '2099-05-31T22:00:00.000Z' });
    expect(await expectFailure(['create', '--plan', 'free', '--expires-at', '2001-01-01T00:00:00Z'])).toMatch(
      /--expires-at must be in the future/,
    );
  });

  it('audit lists CLI changes newest first with actor cli and before/after, never a secret', async () => {
    const created = await createKey(['--plan', 'free', '--name', 'audited']);
    await keysJson(['set-plan', created.id, 'business']);
    await keysJson(['revoke', created.id]);
    const page = await keysJson<{
      entries: Array<{ actor: string; action: string; keyId: string; changes: Record<string, unknown> }>;
      next: string | null;
    }>(['audit', '--limit', '3']);
    expect(page.entries.map((e) => [e.actor, e.action, e.keyId])).toEqual([
      ['cli', 'key.revoke', created.id],
      ['cli', 'key.update', created.id],
      ['cli', 'key.create', created.id],
    ]);
    expect(page.entries[1]!.changes).toEqual({ plan: { before: 'free', after: 'business' } });
    expect(page.next).not.toBeNull();
    const older = await keysJson<{ entries: unknown[] }>(['audit', '--limit', '3', '--cursor', page.next!]);
    expect(older.entries.length).toBeGreaterThan(0);
    const human = await keys(['audit', '--limit', '3']);
    expect(human.stdout).toContain(`cli  key.update  ${created.id}`);
    expect(human.stdout).toContain('plan: "free" → "business"');
    const all = JSON.stringify(await client.xrange('tg:audit', '-', '+'));
    for (const secret of secrets) {
      expect(all).not.toContain(secret);
      expect(all).not.toContain(sha256(secret));
    }
  });
});
