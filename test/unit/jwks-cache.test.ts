import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  FAILED_FETCH_BACKOFF_MS,
  JwksCache,
  maxAgeMsOf,
  MAX_FRESH_MS,
  MIN_FRESH_MS,
  STALE_IF_ERROR_MS,
  UNKNOWN_KID_REFETCH_MS,
} from '../../src/auth/jwt/jwks-cache.js';
import { JwksServer, signingKey } from '../helpers/jwks-server.js';

// One issuer's key set against a real HTTP endpoint, with the clock injected: how long a set is
// fresh, what is served while the IdP is down, and how often it is asked.

const logger = pino({ level: 'silent' });
let server: JwksServer;
let now: number;

beforeAll(async () => {
  server = await new JwksServer().start();
  server.keys = [(await signingKey('k1')).publicJwk];
});
afterAll(() => server.stop());
beforeEach(() => {
  now = 1_000_000;
  server.status = 200;
  server.cacheControl = 'max-age=300';
});

const cache = () => new JwksCache({ jwksUri: () => Promise.resolve(server.url), logger, issuerName: 't', now: () => now });

describe('jwks cache', () => {
  it('fetches on first use and serves from memory while fresh', async () => {
    const jwks = cache();
    const before = server.fetches;
    expect(await jwks.resolver()).toBeTypeOf('function');
    expect(jwks.resolver()).toBeTypeOf('function'); // synchronous: no fetch
    now += MIN_FRESH_MS - 1;
    expect(jwks.resolver()).toBeTypeOf('function');
    expect(server.fetches - before).toBe(1);
  });

  it('serves the last good set while the IdP is down, up to the stale bound, then nothing', async () => {
    const jwks = cache();
    await jwks.resolver();
    server.status = 503;
    now += MIN_FRESH_MS + 1;
    // Stale: served at once, a refresh behind it fails.
    expect(jwks.resolver()).toBeTypeOf('function');
    await new Promise((resolve) => setTimeout(resolve, 50));
    now += STALE_IF_ERROR_MS - 2;
    expect(jwks.resolver()).toBeTypeOf('function');
    now += 10 + FAILED_FETCH_BACKOFF_MS;
    expect(await jwks.resolver()).toBeUndefined();
    expect(jwks.retryAfterSeconds()).toBeGreaterThanOrEqual(1);
  });

  it('with no set at all and the IdP down: undefined, and no new fetch during the back-off', async () => {
    server.status = 500;
    const jwks = cache();
    const before = server.fetches;
    expect(await jwks.resolver()).toBeUndefined();
    expect(await jwks.resolver()).toBeUndefined();
    expect(server.fetches - before).toBe(1);
    expect(jwks.retryAfterSeconds()).toBe(Math.ceil(FAILED_FETCH_BACKOFF_MS / 1000));
    now += FAILED_FETCH_BACKOFF_MS;
    server.status = 200;
    expect(await jwks.resolver()).toBeTypeOf('function');
  });

  it('refetches for an unknown kid at most once per 30 s', async () => {
    const jwks = cache();
    await jwks.resolver();
    const before = server.fetches;
    expect(jwks.refetchForUnknownKid()).toBeUndefined(); // the first fetch was just now
    now += UNKNOWN_KID_REFETCH_MS;
    expect(await jwks.refetchForUnknownKid()).toBeTypeOf('function');
    expect(jwks.refetchForUnknownKid()).toBeUndefined();
    now += UNKNOWN_KID_REFETCH_MS - 1;
    expect(jwks.refetchForUnknownKid()).toBeUndefined();
    expect(server.fetches - before).toBe(1);
  });

  it('keeps Cache-Control within 5 minutes and 24 hours', async () => {
    for (const [header, freshMs] of [
      ['no-store', MIN_FRESH_MS],
      ['max-age=10', MIN_FRESH_MS],
      ['public, max-age=3600', 3_600_000],
      ['max-age=31536000', MAX_FRESH_MS],
    ] as const) {
      server.cacheControl = header;
      now = 1_000_000;
      const jwks = cache();
      await jwks.resolver();
      const before = server.fetches;
      now += freshMs - 1;
      expect(jwks.resolver(), header).toBeTypeOf('function');
      now += 2;
      expect(jwks.resolver(), header).toBeTypeOf('function'); // stale: served, one refresh behind the request
      await vi.waitFor(() => expect(server.fetches, header).toBe(before + 1));
    }
  });

  it('reads max-age, and no-store / no-cache as 0', () => {
    expect(maxAgeMsOf(null)).toBeUndefined();
    expect(maxAgeMsOf('public')).toBeUndefined();
    expect(maxAgeMsOf('max-age=60, must-revalidate')).toBe(60_000);
    expect(maxAgeMsOf('no-cache')).toBe(0);
  });
});
