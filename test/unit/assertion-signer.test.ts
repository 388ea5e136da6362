import { decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { AssertionSigner } from '../../src/gateway/assertion-signer.js';
import { assertionSecretsFromEnv } from '../../src/identity/assertion-secrets.js';
import { kidOf, TEST_ASSERTION_SECRET } from '../helpers/assertion.js';

const settings = { issuer: 'tollgate', audience: 'tollgate-backend', ttlSeconds: 60, clockToleranceSeconds: 5 };
const secret = assertionSecretsFromEnv({ TOLLGATE_ASSERTION_SECRET: TEST_ASSERTION_SECRET }).current;
const T0 = Date.parse('2026-11-22T10:00:00Z');

function signer(clock: { now: number }, maxEntries = 100) {
  return new AssertionSigner(secret, settings, maxEntries, () => clock.now);
}

describe('AssertionSigner', () => {
  it('signs an HS256 JWT with iss, aud, sub = key id, plan, iat and exp = iat + ttl', async () => {
    const clock = { now: T0 + 400 };
    const token = await signer(clock).token('k3j9x0a7b2c1', 'pro');
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'HS256', typ: 'JWT', kid: kidOf(TEST_ASSERTION_SECRET) });
    const { payload } = await jwtVerify(token, new TextEncoder().encode(TEST_ASSERTION_SECRET), {
      issuer: 'tollgate',
      audience: 'tollgate-backend',
      currentDate: new Date(clock.now),
    });
    expect(payload).toEqual({
      iss: 'tollgate',
      aud: 'tollgate-backend',
      sub: 'k3j9x0a7b2c1',
      plan: 'pro',
      iat: T0 / 1000,
      exp: T0 / 1000 + 60,
    });
  });

  it('reuses one token per key id and plan for half its lifetime, then signs a fresh one', async () => {
    const clock = { now: T0 };
    const s = signer(clock);
    const first = await s.token('key000000001', 'free');
    expect(s.signed).toBe(1);
    clock.now = T0 + 29_999;
    expect(s.cached('key000000001', 'free')).toBe(first);
    expect(s.token('key000000001', 'free')).toBe(first); // synchronous: no signing, no waiting
    expect(s.signed).toBe(1);
    clock.now = T0 + 30_000;
    expect(s.cached('key000000001', 'free')).toBeUndefined();
    const second = await s.token('key000000001', 'free');
    expect(second).not.toBe(first);
    expect(decodeJwt(second).iat).toBe(T0 / 1000 + 30);
    expect(s.signed).toBe(2);
  });

  it('keeps separate tokens per key and per plan (a plan change never reuses a stale plan claim)', async () => {
    const clock = { now: T0 };
    const s = signer(clock);
    const free = await s.token('key000000001', 'free');
    const pro = await s.token('key000000001', 'pro');
    const other = await s.token('key000000002', 'free');
    expect(decodeJwt(free)).toMatchObject({ sub: 'key000000001', plan: 'free' });
    expect(decodeJwt(pro)).toMatchObject({ sub: 'key000000001', plan: 'pro' });
    expect(decodeJwt(other)).toMatchObject({ sub: 'key000000002', plan: 'free' });
    expect(s.signed).toBe(3);
  });

  it('signs once for concurrent requests of one key', async () => {
    const s = signer({ now: T0 });
    const tokens = await Promise.all(Array.from({ length: 20 }, async () => s.token('key000000001', 'free')));
    expect(new Set(tokens).size).toBe(1);
    expect(s.signed).toBe(1);
  });

  it('holds at most maxEntries tokens (least recently used go first)', async () => {
    const s = signer({ now: T0 }, 2);
    await s.token('key000000001', 'free');
    await s.token('key000000002', 'free');
    await s.token('key000000003', 'free');
    expect(s.cached('key000000001', 'free')).toBeUndefined();
    expect(s.cached('key000000003', 'free')).toBeDefined();
  });
});
