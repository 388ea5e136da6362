import type { IncomingMessage } from 'node:http';
import { decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { assertionVerifier } from '../../src/backend/verify-assertion.js';
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
    const token = signer(clock).token('k3j9x0a7b2c1', 'pro');
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
    const first = s.token('key000000001', 'free');
    expect(s.signed).toBe(1);
    clock.now = T0 + 29_999;
    expect(s.cached('key000000001', 'free')).toBe(first);
    expect(s.token('key000000001', 'free')).toBe(first); // synchronous: no signing, no waiting
    expect(s.signed).toBe(1);
    clock.now = T0 + 30_000;
    expect(s.cached('key000000001', 'free')).toBeUndefined();
    const second = s.token('key000000001', 'free');
    expect(second).not.toBe(first);
    expect(decodeJwt(second).iat).toBe(T0 / 1000 + 30);
    expect(s.signed).toBe(2);
  });

  it('keeps separate tokens per key and per plan (a plan change never reuses a stale plan claim)', async () => {
    const clock = { now: T0 };
    const s = signer(clock);
    const free = s.token('key000000001', 'free');
    const pro = s.token('key000000001', 'pro');
    const other = s.token('key000000002', 'free');
    expect(decodeJwt(free)).toMatchObject({ sub: 'key000000001', plan: 'free' });
    expect(decodeJwt(pro)).toMatchObject({ sub: 'key000000001', plan: 'pro' });
    expect(decodeJwt(other)).toMatchObject({ sub: 'key000000002', plan: 'free' });
    expect(s.signed).toBe(3);
  });

  it('signs synchronously (a miss is a token, not a promise), once for many requests of one key', () => {
    const s = signer({ now: T0 });
    const tokens = Array.from({ length: 20 }, () => s.token('key000000001', 'free'));
    expect(typeof tokens[0]).toBe('string');
    expect(new Set(tokens).size).toBe(1);
    expect(s.signed).toBe(1);
    expect(typeof s.anonymousToken()).toBe('string');
  });

  it('signs tokens that another secret or a changed claim do not verify', async () => {
    const token = signer({ now: T0 }).token('key000000001', 'free');
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const verify = (jwt: string, secretText: string) => jwtVerify(jwt, new TextEncoder().encode(secretText), { currentDate: new Date(T0) });
    await expect(verify(token, TEST_ASSERTION_SECRET)).resolves.toBeDefined();
    await expect(verify(token, `${TEST_ASSERTION_SECRET}x`)).rejects.toThrow(/signature/);
    const forged = Buffer.from(JSON.stringify({ ...decodeJwt(token), plan: 'enterprise' })).toString('base64url');
    await expect(verify(`${header}.${forged}.${signature}`, TEST_ASSERTION_SECRET)).rejects.toThrow(/signature/);
    expect(payload).not.toMatch(/[=+/]/);
  });

  it('holds at most maxEntries tokens (least recently used go first)', async () => {
    const s = signer({ now: T0 }, 2);
    s.token('key000000001', 'free');
    s.token('key000000002', 'free');
    s.token('key000000003', 'free');
    expect(s.cached('key000000001', 'free')).toBeUndefined();
    expect(s.cached('key000000003', 'free')).toBeDefined();
  });

  it("signs afresh when the clock steps back past the cached token's iat (a backend would refuse an iat in the future)", async () => {
    const clock = { now: T0 + 20_000 };
    const s = signer(clock);
    const verify = assertionVerifier({
      secrets: assertionSecretsFromEnv({ TOLLGATE_ASSERTION_SECRET: TEST_ASSERTION_SECRET }),
      settings,
      logger: pino({ level: 'silent' }),
      nowMs: () => clock.now,
    });
    const before = s.token('key000000001', 'free');
    clock.now = T0 + 20_000 - 60_000; // an NTP step back of a minute, well inside the old token's reuse window
    const after = s.token('key000000001', 'free');
    expect(after).not.toBe(before);
    expect(decodeJwt(after).iat).toBe(Math.floor(clock.now / 1000));
    const headers = { 'x-tollgate-consumer-id': 'key000000001', 'x-tollgate-plan': 'free', 'x-tollgate-assertion': after };
    expect(await verify({ headers } as unknown as IncomingMessage)).toBeNull();
    expect(s.cached('key000000001', 'free')).toBe(after);
  });
});
