import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, ADMIN_TOKENS, OPS_TOKEN, PORTAL_TOKEN, type AdminCall } from '../helpers/admin-client.js';
import { Contract } from '../helpers/contract.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import { quotaKey } from '../../src/store/redis/redis-keys.js';
import { bearer, configCopy, getFrom, keysCli, slackRedisTimeout, startGateway, testPlans, type GatewayHandle } from '../helpers/stack.js';
import { pollUntil } from '../helpers/poll.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// The admin API end to end: two gateway replicas on one real Redis, driven over real HTTP through
// a key's whole lifecycle (create, use, patch, rotate, expire, revoke, unban, usage, audit). Every
// admin answer is also checked against openapi-admin.yaml (the contract).

const KEY_FORMAT = /^tg_[0-9a-z]{12}_[0-9A-Za-z]{38}$/;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

let redis: TestRedis;
let upstream: EchoUpstream;
let gateways: GatewayHandle[];
let contract: Contract;
/** openapi.yaml, for the key holder's own GET /v1/usage. */
let publicContract: Contract;
/** Every API key the test has seen: none may appear in any log line, audit entry or error. */
const secrets: string[] = [];

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  contract = await Contract.load('openapi-admin.yaml', '/admin/v1');
  publicContract = await Contract.load();
  // `tiny`: 2 a minute, banned after 5 rejections, for the unban step.
  const configDir = configCopy({
    'plans.yaml': () => testPlans(2, { afterRejections: 5, window: 60, duration: 600 }),
    // Key records cached for an hour: a change either replica shows during the test was pushed to it
    // (pub/sub), never re-read because a cache entry ran out, however long a loaded machine takes.
    'gateway.yaml': (text) => slackRedisTimeout(text).replace(/ttlSeconds: 30\b/, 'ttlSeconds: 3600'),
  });
  const env = { REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, TOLLGATE_CONFIG_DIR: configDir, TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS };
  gateways = await Promise.all([1, 2].map(() => startGateway(env)));
  await awayFromDayEdge();
});

afterAll(async () => {
  await Promise.all(gateways?.map((g) => g.process.stop()) ?? []);
  await upstream?.stop();
  await redis?.stop();
});

/** An admin call on replica `n` that must conform to the admin OpenAPI document. */
async function call(n: number, method: string, path: string, options: Parameters<typeof admin>[3] = {}): Promise<AdminCall> {
  const answer = await admin(gateways[n]!.adminUrl, method, path, options);
  expect(contract.check(answer), `${method} ${path} → ${answer.status} ${JSON.stringify(answer.body)}`).toEqual([]);
  return answer;
}

/** Requests `use` got admitted (200), whichever key: the lifecycle's usage counts are checked against it. */
let admittedByUse = 0;

async function use(key: string): Promise<Array<{ status: number; code?: string; message?: string }>> {
  const answers = await Promise.all(
    gateways.map(async (g) => {
      const response = await fetch(`${g.url}/v1/categories`, { headers: bearer(key) });
      const body = (await response.json()) as { code?: string; message?: string };
      return { status: response.status, code: body.code, message: body.message };
    }),
  );
  admittedByUse += answers.filter((a) => a.status === 200).length;
  return answers;
}

/**
 * Polls both replicas until `done` holds for every answer. Pub/sub pushes changes at once; the
 * deadline is generous so that a loaded machine makes this slower, not red, and with the hour-long
 * key cache above, whatever is seen before it was still pushed.
 */
async function onEveryReplica(key: string, done: (a: { status: number; code?: string }) => boolean) {
  return pollUntil(
    () => use(key),
    (answers) => answers.every(done),
    { deadline: Date.now() + 20_000 },
  );
}

const sleepUntil = async (isoTime: string) => {
  const ms = Date.parse(isoTime) - Date.now();
  if (ms > 0) await new Promise((r) => setTimeout(r, ms + 50));
};

describe('a key through its lifecycle over the admin API, across two replicas', () => {
  let id = '';
  let key = '';
  /** Requests counted against the key's quotas: through `use`, plus those the patch step sends itself. */
  let admittedDirectly = 0;
  const admitted = () => admittedByUse + admittedDirectly;
  /**
   * A day's `used` as the usage reports give it: what was admitted, and the units a replica holds
   * on a lease of the key and has not admitted yet, which Redis counted at their grant (a key
   * calling steadily takes one, docs/quota-leases.md, warm keys): never fewer, never more than
   * the units out on leases today ('ld' in the key's counters).
   */
  const expectUsed = async (used: number) => {
    const leasedOut = Number(await redis.client().hget(quotaKey(id), 'ld')) || 0;
    expect(used - admitted()).toBeGreaterThanOrEqual(0);
    expect(used - admitted()).toBeLessThanOrEqual(leasedOut);
  };

  it('creates a key (201, the secret once, Location) that both replicas accept', async () => {
    const created = await call(0, 'POST', '/keys', { body: { plan: 'free', name: 'e2e' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ plan: 'free', name: 'e2e', status: 'active' });
    expect(created.body.key).toMatch(KEY_FORMAT);
    expect(created.headers.get('location')).toBe(`/admin/v1/keys/${created.body.id}`);
    expect(created.headers.get('cache-control')).toBe('no-store');
    ({ id, key } = created.body);
    secrets.push(key);

    expect(await use(key)).toMatchObject([{ status: 200 }, { status: 200 }]);
    const shown = await call(1, 'GET', `/keys/${id}`);
    expect(shown.body).toEqual({ id, name: 'e2e', plan: 'free', status: 'active', createdAt: created.body.createdAt });
  });

  it('patches plan, name and own quotas on one replica; the other applies them at once (pushed)', async () => {
    const patched = await call(1, 'PATCH', `/keys/${id}`, { body: { plan: 'pro', name: 'e2e renamed', perMinute: 500, perDay: 5000 } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ id, plan: 'pro', name: 'e2e renamed', perMinute: 500, perDay: 5000 });
    const limits = await pollUntil(
      async () => {
        const responses = await Promise.all(gateways.map((g) => fetch(`${g.url}/v1/categories`, { headers: bearer(key) })));
        admittedDirectly += responses.filter((r) => r.status === 200).length;
        return responses.map((r) => r.headers.get('ratelimit-policy') ?? '');
      },
      (seen) => seen.every((l) => l.includes('q=500')),
      { deadline: Date.now() + 20_000 },
    );
    expect(limits.every((l) => l.includes('"minute";q=500;w=60, "day";q=5000;w=86400'))).toBe(true);
    expect(upstream.seen.at(-1)!.headers['x-tollgate-plan']).toBe('pro');

    const cleared = await call(0, 'PATCH', `/keys/${id}`, { body: { perMinute: null, perDay: null } });
    expect(cleared.body).not.toHaveProperty('perMinute');
    expect(cleared.body).not.toHaveProperty('perDay');
  });

  it('rotates: both secrets work during the grace, only the new one after; id, plan and counters stay', async () => {
    const before = await call(0, 'GET', `/keys/${id}/usage`);
    await expectUsed(before.body.day.used);

    // Both secrets must be seen working before the grace ends. How long that takes depends on the
    // machine: answers for the old secret that arrived after the grace prove nothing, so the step
    // starts over from the new secret with twice the grace.
    let graceSeconds = 5;
    for (;;) {
      const rotated = await call(0, 'POST', `/keys/${id}/rotate`, { body: { graceSeconds } });
      expect(rotated.status).toBe(200);
      const newKey: string = rotated.body.key;
      secrets.push(newKey);
      expect(newKey).toMatch(KEY_FORMAT);
      expect(newKey).not.toBe(key);
      expect(newKey.startsWith(`tg_${id}_`)).toBe(true);
      expect(rotated.body).toMatchObject({ id, plan: 'pro', status: 'active' });
      const graceEndsAt: string = rotated.body.graceEndsAt;

      // In the grace: the new key on both replicas at once (the change is pushed), the old one too.
      expect(await onEveryReplica(newKey, (a) => a.status === 200)).toMatchObject([{ status: 200 }, { status: 200 }]);
      const old = await use(key);
      const inGrace = Date.now() < Date.parse(graceEndsAt);
      if (inGrace) expect(old).toMatchObject([{ status: 200 }, { status: 200 }]);
      // The counters hang on the id: one count, whichever secret was used.
      await expectUsed((await call(1, 'GET', `/keys/${id}/usage`)).body.day.used);

      await sleepUntil(graceEndsAt);
      expect(await use(key)).toMatchObject([
        { status: 401, code: 'invalid_api_key' },
        { status: 401, code: 'invalid_api_key' },
      ]);
      expect(await use(newKey)).toMatchObject([{ status: 200 }, { status: 200 }]);
      key = newKey;
      if (inGrace) break;
      expect(graceSeconds, 'grace needed to use both secrets within it').toBeLessThan(60);
      graceSeconds *= 2;
    }
  }, 300_000);

  it("answers the key holder's own GET /v1/usage without counting it against the quota", async () => {
    const usedSeen: number[] = [];
    for (const g of gateways) {
      const response = await fetch(`${g.url}/v1/usage`, { headers: bearer(key) });
      expect(response.status).toBe(200);
      const body: unknown = await response.clone().json();
      expect(publicContract.check({ method: 'GET', path: '/v1/usage', status: 200, headers: response.headers, body })).toEqual([]);
      expect(response.headers.get('ratelimit-policy')).toBe('"minute";q=300;w=60, "day";q=10000;w=86400');
      const report = (await response.json()) as {
        id: string;
        plan: string;
        day: { used: number; limit: number; remaining: number; resetAt: string };
        bannedUntil: null;
        expiresAt: null;
      };
      expect(report).toMatchObject({ id, plan: 'pro', bannedUntil: null, expiresAt: null });
      expect(report.day).toMatchObject({ limit: 10000, remaining: 10000 - report.day.used });
      await expectUsed(report.day.used);
      // Not counted against the quota: the report after it tells the same.
      usedSeen.push(report.day.used);
    }
    const adminUsed = (await call(0, 'GET', `/keys/${id}/usage`)).body.day.used;
    await expectUsed(adminUsed);
    // No request between the reads: a read that counted itself would raise the next; a lease's
    // give-back meanwhile (its minute ended) can only lower it.
    const reads = [...usedSeen, adminUsed];
    expect(reads.every((used, i) => i === 0 || used <= reads[i - 1]!)).toBe(true);
    const unauthenticated = await fetch(`${gateways[0]!.url}/v1/usage`);
    expect(unauthenticated.status).toBe(401);
    // It went through the failed-authentication limit, whose headers every such 401 carries.
    expect(unauthenticated.headers.get('ratelimit-policy')).toBe('"unauthenticated";q=60;w=60');
    const observed = {
      method: 'GET',
      path: '/v1/usage',
      status: 401,
      headers: unauthenticated.headers,
      body: await unauthenticated.json(),
    };
    expect(publicContract.check(observed)).toEqual([]);
  });

  it('expires: after expiresAt both replicas refuse the key with 401 api_key_expired saying when', async () => {
    // An expiresAt that has already passed is refused (400): should the PATCH itself take longer
    // than the margin on a loaded machine, it is sent again with twice the margin.
    let marginMs = 2000;
    let expiresAt: string;
    let patched: AdminCall;
    for (;;) {
      expiresAt = new Date(Date.now() + marginMs).toISOString();
      patched = await call(1, 'PATCH', `/keys/${id}`, { body: { expiresAt } });
      if (patched.status !== 400 || Date.now() < Date.parse(expiresAt) || marginMs >= 60_000) break;
      marginMs *= 2;
    }
    expect(patched.body.expiresAt).toBe(expiresAt);
    await sleepUntil(expiresAt);
    // Replica 0 learns the new expiry by push; on a loaded machine that may land after expiresAt.
    const answers = await onEveryReplica(key, (a) => a.code === 'api_key_expired');
    expect(answers).toMatchObject([
      { status: 401, code: 'api_key_expired' },
      { status: 401, code: 'api_key_expired' },
    ]);
    for (const answer of answers) expect(answer.message).toContain(expiresAt);
    const expired = await call(0, 'GET', '/keys?status=expired');
    expect(expired.body.keys.map((k: { id: string }) => k.id)).toContain(id);

    // Removing the expiry brings it back, on both replicas at once.
    await call(0, 'PATCH', `/keys/${id}`, { body: { expiresAt: null } });
    expect(await onEveryReplica(key, (a) => a.status === 200)).toMatchObject([{ status: 200 }, { status: 200 }]);
  });

  it('revokes: both replicas refuse the key at once (pushed)', async () => {
    const revoked = await call(1, 'DELETE', `/keys/${id}`, { token: PORTAL_TOKEN });
    expect(revoked.body).toMatchObject({ id, status: 'revoked' });
    expect(await onEveryReplica(key, (a) => a.code === 'revoked_api_key')).toMatchObject([
      { status: 401, code: 'revoked_api_key' },
      { status: 401, code: 'revoked_api_key' },
    ]);
    const rotate = await call(0, 'POST', `/keys/${id}/rotate`, { body: { graceSeconds: 0 } });
    expect(rotate.body).toMatchObject({ code: 'key_revoked', status: 409 });
  });

  it('lifts a ban on both replicas at once', async () => {
    const created = await call(0, 'POST', '/keys', { body: { plan: 'tiny' } });
    const banned = created.body as { id: string; key: string };
    secrets.push(banned.key);
    // 2 a minute and 2 a day (so a minute edge changes nothing), then 429s; the fifth refusal,
    // counted across both replicas, bans the key.
    let code: string | undefined;
    for (let i = 0; i < 10 && code !== 'api_key_banned'; i++) {
      const answers = await use(banned.key);
      code = answers.find((a) => a.code === 'api_key_banned')?.code ?? answers[0]!.code;
    }
    expect(code).toBe('api_key_banned');
    expect((await call(1, 'GET', `/keys/${banned.id}/usage`)).body.bannedUntil).not.toBeNull();

    const lifted = await call(1, 'DELETE', `/keys/${banned.id}/ban`);
    expect(lifted.body).toEqual({ id: banned.id, unbanned: true });
    const answers = await onEveryReplica(banned.key, (a) => a.code !== 'api_key_banned');
    for (const answer of answers) expect(answer.code).not.toBe('api_key_banned');
    expect((await call(0, 'GET', `/keys/${banned.id}/usage`)).body.bannedUntil).toBeNull();
    expect((await call(0, 'DELETE', `/keys/${banned.id}/ban`)).body).toEqual({ id: banned.id, unbanned: false });
  });

  it('records every change in the audit, newest first, with actor and before/after, across pages', async () => {
    const entries: Array<{
      id: string;
      actor: string;
      action: string;
      keyId: string;
      changes: Record<string, { before: unknown; after: unknown }>;
    }> = [];
    let cursor: string | null = null;
    do {
      const page: AdminCall = await call(1, 'GET', `/audit?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.body.entries.length).toBeLessThanOrEqual(3);
      entries.push(...page.body.entries);
      cursor = page.body.next;
    } while (cursor);
    expect(new Set(entries.map((e) => e.id)).size).toBe(entries.length);
    const mine = entries.filter((e) => e.keyId === id).reverse();
    expect(mine.map((e) => e.action)).toEqual([
      'key.create',
      'key.update',
      'key.update',
      'key.rotate',
      'key.update',
      'key.update',
      'key.revoke',
    ]);
    expect(mine[0]!.changes.plan).toEqual({ before: null, after: 'free' });
    expect(mine[1]!.changes.plan).toEqual({ before: 'free', after: 'pro' });
    expect(mine[1]!.changes.perMinute).toEqual({ before: null, after: 500 });
    expect(mine[3]!.changes.secret).toEqual({ before: 'replaced', after: 'new' });
    expect(mine[6]!.changes.status).toEqual({ before: 'active', after: 'revoked' });
    expect(mine.slice(0, 6).every((e) => e.actor === 'ops')).toBe(true);
    expect(mine[6]!.actor).toBe('portal');
    expect(entries.some((e) => e.action === 'key.unban' && e.changes.banned!.before === true)).toBe(true);

    const text = JSON.stringify(entries);
    for (const secret of secrets) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(sha256(secret));
    }
  });

  it('records CLI changes in the same audit, with actor cli', async () => {
    const shown = await keysCli(redis, ['set-plan', id, 'business', '--json']);
    expect(shown.code, shown.stderr).toBe(0);
    const page = await call(0, 'GET', '/audit?limit=1');
    expect(page.body.entries[0]).toMatchObject({
      actor: 'cli',
      action: 'key.update',
      keyId: id,
      changes: { plan: { before: 'pro', after: 'business' } },
    });
  });
});

describe('listing keys', () => {
  it('pages in id order with a cursor and filters by plan and status', async () => {
    const created: string[] = [];
    for (let i = 0; i < 5; i++) {
      const answer = await call(i % 2, 'POST', '/keys', { body: { plan: 'business', name: `page ${i}` } });
      secrets.push(answer.body.key);
      created.push(answer.body.id);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: AdminCall = await call(0, 'GET', `/keys?plan=business&status=active&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      for (const record of page.body.keys) {
        expect(record).toMatchObject({ plan: 'business', status: 'active' });
        expect(record).not.toHaveProperty('key');
        expect(record).not.toHaveProperty('hash');
      }
      seen.push(...page.body.keys.map((k: { id: string }) => k.id));
      cursor = page.body.next;
    } while (cursor);
    expect(seen).toEqual([...seen].sort());
    for (const id of created) expect(seen).toContain(id);
    const revoked = await call(1, 'GET', '/keys?status=revoked');
    expect(revoked.body.keys.every((k: { status: string }) => k.status === 'revoked')).toBe(true);
  });
});

describe('bad input gets a clear 4xx Error body', () => {
  const cases: Array<[string, string, string, Parameters<typeof admin>[3], number, string, RegExp]> = [
    ['unknown field', 'POST', '/keys', { body: { plan: 'free', colour: 'x' } }, 400, 'invalid_body', /unknown field colour/],
    [
      'an owner that cannot be a hash tag',
      'POST',
      '/keys',
      { body: { plan: 'free', owner: 'ac}me' } },
      400,
      'invalid_body',
      /owner must be 1 to 64 lowercase/,
    ],
    [
      'a date that is not ISO 8601',
      'POST',
      '/keys',
      { body: { plan: 'free', expiresAt: 'next tuesday' } },
      400,
      'invalid_body',
      /expiresAt must be an ISO 8601/,
    ],
    [
      'a date without a zone',
      'POST',
      '/keys',
      { body: { plan: 'free', expiresAt: '2030-01-01T00:00:00' } },
      400,
      'invalid_body',
      /expiresAt/,
    ],
    [
      'expiresAt in the past',
      'POST',
      '/keys',
      { body: { plan: 'free', expiresAt: '2020-01-01T00:00:00Z' } },
      400,
      'invalid_body',
      /expiresAt must be in the future/,
    ],
    ['an unknown plan', 'POST', '/keys', { body: { plan: 'gold' } }, 400, 'unknown_plan', /unknown plan "gold" \(plans: free, pro/],
    ['no plan', 'POST', '/keys', { body: { name: 'x' } }, 400, 'invalid_body', /plan is required/],
    [
      'one quota without the other',
      'POST',
      '/keys',
      { body: { plan: 'free', perMinute: 5 } },
      400,
      'invalid_body',
      /give both perMinute and perDay/,
    ],
    [
      'a day quota below the minute one',
      'POST',
      '/keys',
      { body: { plan: 'free', perMinute: 50, perDay: 5 } },
      400,
      'invalid_body',
      /perDay cannot be lower than perMinute/,
    ],
    [
      'a fractional quota',
      'POST',
      '/keys',
      { body: { plan: 'free', perMinute: 1.5, perDay: 5 } },
      400,
      'invalid_body',
      /perMinute must be a whole number/,
    ],
    ['a body that is not JSON', 'POST', '/keys', { body: '{plan: free' }, 400, 'invalid_json', /not valid JSON/],
    ['a body that is not an object', 'POST', '/keys', { body: '[1]' }, 400, 'invalid_body', /JSON object/],
    [
      'a body that is not application/json',
      'POST',
      '/keys',
      { body: 'plan=free', contentType: 'application/x-www-form-urlencoded' },
      415,
      'unsupported_media_type',
      /application\/json/,
    ],
    ['an empty patch', 'PATCH', '/keys/zzzzzzzzzzzz', { body: {} }, 400, 'invalid_body', /at least one field/],
    [
      'a negative grace',
      'POST',
      '/keys/zzzzzzzzzzzz/rotate',
      { body: { graceSeconds: -1 } },
      400,
      'invalid_body',
      /graceSeconds must be 0 or more/,
    ],
    ['an unknown key id', 'GET', '/keys/zzzzzzzzzzzz', {}, 404, 'key_not_found', /no key with id "zzzzzzzzzzzz"/],
    ['a malformed key id', 'GET', '/keys/NOT-AN-ID', {}, 404, 'key_not_found', /12 lowercase letters/],
    ['an unknown query parameter', 'GET', '/keys?team=x', {}, 400, 'invalid_query', /unknown field team/],
    ['a bad status filter', 'GET', '/keys?status=gone', {}, 400, 'invalid_query', /status must be active, revoked or expired/],
    ['a bad cursor', 'GET', '/audit?cursor=abc', {}, 400, 'invalid_query', /cursor is not a cursor/],
    ['no admin token', 'GET', '/keys', { token: null }, 401, 'missing_admin_token', /admin token is required/],
    ['a wrong admin token', 'GET', '/keys', { token: 'x'.repeat(40) }, 401, 'invalid_admin_token', /not valid/],
    [
      'an API key instead of an admin token',
      'GET',
      '/plans',
      { token: 'tg_aaaaaaaaaaaa_' + 'A'.repeat(38) },
      401,
      'invalid_admin_token',
      /not valid/,
    ],
  ];

  it.each(cases)('%s', async (_name, method, path, options, status, code, message) => {
    const answer = await call(0, method, path, options);
    expect(answer.status).toBe(status);
    expect(answer.body).toMatchObject({ code, status });
    expect(answer.body.message).toMatch(message);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('answers a known path with another method 405 with Allow, and an unknown path 404', async () => {
    const wrongMethod = await admin(gateways[0]!.adminUrl, 'PUT', '/keys');
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('POST, GET');
    const unknown = await admin(gateways[0]!.adminUrl, 'GET', '/nothing-here');
    expect(unknown.body).toMatchObject({ code: 'not_found', status: 404 });
    expect(contract.checkComponentResponse('NotFound', unknown)).toEqual([]);
  });

  it('limits failed admin authentications per address: 429 with Retry-After, and a good token waits too', async () => {
    const address = '127.0.0.23';
    const url = `${gateways[1]!.adminUrl}/admin/v1/plans`;
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++)
      statuses.push((await getFrom(address, url, { authorization: `Bearer wrong-${i}-${'x'.repeat(40)}` })).status);
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    const limited = await getFrom(address, url, { authorization: `Bearer ${OPS_TOKEN}` });
    expect(limited.status).toBe(429);
    expect(JSON.parse(limited.body)).toMatchObject({ code: 'too_many_unauthenticated_requests', status: 429 });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Another address is not affected.
    expect((await getFrom('127.0.0.24', url, { authorization: `Bearer ${OPS_TOKEN}` })).status).toBe(200);
  });
});

describe('plans and the OpenAPI document', () => {
  it('GET /plans shows the plans in force on the replica and when they were loaded', async () => {
    const plans = await call(1, 'GET', '/plans');
    expect(plans.body.plans.tiny).toEqual({ perMinute: 2, perDay: 2 });
    expect(plans.body.ban).toEqual({ afterRejections: 5, window: 60, duration: 600 });
    expect(Date.parse(plans.body.loadedAt)).toBeLessThanOrEqual(Date.now());
  });

  it('serves its OpenAPI 3.1 document without a token', async () => {
    const document = await call(0, 'GET', '/openapi.json', { token: null });
    expect(document.status).toBe(200);
    expect(document.body.openapi).toBe('3.1.0');
    expect(Object.keys(document.body.paths)).toContain('/keys/{id}/rotate');
  });
});

describe('secrets stay out of the logs', () => {
  it('no process output holds an API key, its hash or an admin token', () => {
    expect(secrets.length).toBeGreaterThan(5);
    for (const g of gateways) {
      const output = g.process.output();
      expect(output).toContain('admin request'); // the admin API does log
      for (const secret of secrets) {
        expect(output).not.toContain(secret);
        expect(output).not.toContain(sha256(secret));
      }
      expect(output).not.toContain(OPS_TOKEN);
      expect(output).not.toContain(PORTAL_TOKEN);
    }
  });
});
