import type { IncomingMessage } from 'node:http';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { assertionVerifier } from '../../src/backend/verify-assertion.js';
import { assertionSecretsFromEnv } from '../../src/identity/assertion-secrets.js';
import { kidOf, signTestAssertion, TEST_ASSERTION_SECRET, type TestAssertion } from '../helpers/assertion.js';

// The backend's check of the gateway assertion, in process with an injected clock. Tokens are
// signed by the test helper with jose directly, not by the gateway's signer.

const settings = { issuer: 'tollgate', audience: 'tollgate-backend', ttlSeconds: 60, clockToleranceSeconds: 5 };
const NOW_S = Math.floor(Date.parse('2026-11-22T10:00:00Z') / 1000);
const OTHER_SECRET = 'another-secret-that-is-long-enough-0123456789';

function setup(env: NodeJS.ProcessEnv = { TOLLGATE_ASSERTION_SECRET: TEST_ASSERTION_SECRET }) {
  const clock = { nowMs: NOW_S * 1000 };
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  const verify = assertionVerifier({ secrets: assertionSecretsFromEnv(env), settings, logger, nowMs: () => clock.nowMs });
  return { verify, clock, lines };
}

async function request(opts: TestAssertion & { token?: string; consumerId?: string; planHeader?: string } = {}): Promise<IncomingMessage> {
  const token = opts.token ?? (await signTestAssertion({ iat: NOW_S, ...opts }));
  return {
    headers: {
      'x-tollgate-assertion': token,
      'x-tollgate-consumer-id': opts.consumerId ?? opts.sub ?? 'testkey00001',
      'x-tollgate-plan': opts.planHeader ?? opts.plan ?? 'free',
    },
  } as unknown as IncomingMessage;
}

describe('backend assertion verifier', () => {
  it('accepts a valid assertion whose sub and plan match the identity headers', async () => {
    const { verify } = setup();
    expect(await verify(await request())).toBeNull();
    expect(await verify(await request({ sub: 'k3j9x0a7b2c1', plan: 'enterprise' }))).toBeNull();
  });

  it('refuses a request without an assertion and logs why (never the token)', async () => {
    const { verify, lines } = setup();
    const req = { headers: { 'x-tollgate-consumer-id': 'testkey00001', 'x-tollgate-plan': 'free' } } as unknown as IncomingMessage;
    expect(await verify(req)).toBe('invalid_gateway_assertion');
    expect(lines.join('')).toContain('no x-tollgate-assertion header');
  });

  const refusals: Array<[string, RegExp, () => Promise<IncomingMessage>]> = [
    ['signed with another secret (its own kid)', /ERR_JWKS_NO_MATCHING_KEY/, () => request({ secret: OTHER_SECRET })],
    [
      'signed with another secret under our kid',
      /ERR_JWS_SIGNATURE_VERIFICATION_FAILED/,
      () => request({ secret: OTHER_SECRET, kid: kidOf(TEST_ASSERTION_SECRET) }),
    ],
    ['without a kid', /ERR_JWKS_NO_MATCHING_KEY/, () => request({ kid: null })],
    ['for another audience', /"aud"/, () => request({ audience: 'someone-else' })],
    ['from another issuer', /"iss"/, () => request({ issuer: 'not-tollgate' })],
    ['expired beyond the clock tolerance', /ERR_JWT_EXPIRED/, () => request({ iat: NOW_S - 66, ttlSeconds: 60 })],
    ['issued in the future beyond the tolerance', /"iat".*past/, () => request({ iat: NOW_S + 30 })],
    ['older than ttlSeconds even if its exp is later', /"iat".*too far in the past/, () => request({ iat: NOW_S - 120, ttlSeconds: 3600 })],
    [
      'for another consumer than X-Tollgate-Consumer-Id',
      /consumer-id does not match/,
      () => request({ sub: 'testkey00001', consumerId: 'testkey00002' }),
    ],
    ['for another plan than X-Tollgate-Plan', /plan does not match/, () => request({ plan: 'free', planHeader: 'enterprise' })],
    [
      'with the identity headers missing',
      /consumer-id does not match/,
      async () => ({ headers: { 'x-tollgate-assertion': await signTestAssertion({ iat: NOW_S }) } }) as unknown as IncomingMessage,
    ],
    ['unsigned (alg none)', /ERR_JOSE_ALG_NOT_ALLOWED/, () => request({ token: unsecuredToken() })],
    ['that is not a JWT', /ERR_JWS_INVALID/, () => request({ token: 'not.a.jwt' })],
    [
      'sent twice (joined by node)',
      /ERR_JWS_INVALID/,
      async () => request({ token: `${await signTestAssertion({ iat: NOW_S })}, ${await signTestAssertion({ iat: NOW_S })}` }),
    ],
  ];
  for (const [label, reason, make] of refusals) {
    it(`refuses an assertion ${label}`, async () => {
      const { verify, lines } = setup();
      expect(await verify(await make())).toBe('invalid_gateway_assertion');
      expect(JSON.parse(lines[0]!).reason).toMatch(reason);
    });
  }

  it('allows clock skew within clockToleranceSeconds', async () => {
    const { verify } = setup();
    expect(await verify(await request({ iat: NOW_S - 63, ttlSeconds: 60 }))).toBeNull();
    expect(await verify(await request({ iat: NOW_S + 4 }))).toBeNull();
  });

  it('remembers a verified token, and still refuses it once expired', async () => {
    const { verify, clock } = setup();
    const req = await request();
    expect(await verify(req)).toBeNull();
    clock.nowMs = (NOW_S + 64) * 1000;
    expect(await verify(req)).toBeNull();
    clock.nowMs = (NOW_S + 65) * 1000;
    expect(await verify(req)).toBe('invalid_gateway_assertion');
  });

  it('checks the identity headers against a remembered token too', async () => {
    const { verify } = setup();
    const good = await request();
    expect(await verify(good)).toBeNull();
    const spoofed = { headers: { ...good.headers, 'x-tollgate-consumer-id': 'testkey00002' } } as unknown as IncomingMessage;
    expect(await verify(spoofed)).toBe('invalid_gateway_assertion');
  });

  it('accepts the anonymous marker (no sub, no plan) on a request marked X-Tollgate-Anonymous without consumer headers', async () => {
    const { verify, lines } = setup();
    const token = await signTestAssertion({ iat: NOW_S, anonymous: true });
    const anonymous = (headers: Record<string, string>) =>
      ({ headers: { 'x-tollgate-assertion': token, ...headers } }) as unknown as IncomingMessage;
    expect(await verify(anonymous({ 'x-tollgate-anonymous': 'true' }))).toBeNull();
    expect(await verify(anonymous({}))).toBe('invalid_gateway_assertion');
    expect(await verify(anonymous({ 'x-tollgate-anonymous': 'true', 'x-tollgate-consumer-id': 'testkey00001' }))).toBe(
      'invalid_gateway_assertion',
    );
    // A marker that names a subject is neither one thing nor the other.
    const both = await signTestAssertion({ iat: NOW_S, anonymous: true, sub: 'testkey00001' });
    expect(await verify({ headers: { 'x-tollgate-assertion': both, 'x-tollgate-anonymous': 'true' } } as unknown as IncomingMessage)).toBe(
      'invalid_gateway_assertion',
    );
    // A consumer's assertion on a request that also says anonymous.
    const consumer = await request();
    expect(await verify({ headers: { ...consumer.headers, 'x-tollgate-anonymous': 'true' } } as unknown as IncomingMessage)).toBe(
      'invalid_gateway_assertion',
    );
    expect(lines.map((l) => JSON.parse(l).reason as string)).toEqual([
      'an anonymous assertion without x-tollgate-anonymous: true',
      'an anonymous assertion with consumer headers',
      'an anonymous assertion names a subject',
      "x-tollgate-anonymous with a consumer's assertion",
    ]);
  });

  it('accepts the previous secret during a rotation, and only while it is configured', async () => {
    const rotating = setup({ TOLLGATE_ASSERTION_SECRET: OTHER_SECRET, TOLLGATE_ASSERTION_SECRET_PREVIOUS: TEST_ASSERTION_SECRET });
    expect(await rotating.verify(await request())).toBeNull();
    expect(await rotating.verify(await request({ secret: OTHER_SECRET }))).toBeNull();
    const rotated = setup({ TOLLGATE_ASSERTION_SECRET: OTHER_SECRET });
    expect(await rotated.verify(await request())).toBe('invalid_gateway_assertion');
  });
});

function unsecuredToken(): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part({ iss: 'tollgate', aud: 'tollgate-backend', sub: 'testkey00001', plan: 'free', iat: NOW_S, exp: NOW_S + 60 })}.`;
}
