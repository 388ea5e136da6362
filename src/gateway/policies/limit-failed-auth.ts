import { statusOf } from '../../errors/registry.js';
import type { ProxyTrust } from '../../http/proxy-trust.js';
import { LRUCache } from 'lru-cache';
import { clientAddressOf, clientOf } from '../../http/client-address.js';
import type { RedisClient } from '../../store/redis/connect.js';
import type { Decision, Policy, RequestContext } from '../context.js';
import { isAnswer, reject } from '../context.js';
import { addressWindow, WINDOW_SECONDS } from './address-window.js';

/**
 * Failed authentications are limited per client address (shared across replicas through Redis,
 * with an in-memory insurance limiter while Redis is down: address-window.ts), so the key store
 * cannot be used to guess keys. Their 401s carry that limit's headers; past it the address gets 429
 * until the window ends for every key that does not authenticate; a valid key is never refused by
 * this limit (see authenticate.ts). CORS preflights have a budget of their own (limit-preflights.ts).
 */
export function failedAuthLimiter(
  perMinute: number,
  redis: RedisClient | undefined,
  proxyTrust: ProxyTrust,
): {
  wrap: (authenticate: Policy) => Policy;
  /** Seconds the address stays blocked, or 0. */
  blockedSeconds: (ctx: RequestContext) => number;
  /** A refusal that counts as a failed authentication (ip_not_allowed): counted, and 429 once over the limit. */
  counted: (ctx: RequestContext, refusal: Decision & object) => Promise<Decision>;
} {
  const window = addressWindow(redis, 'tg:unauth');
  const blockedUntilMs = new LRUCache<string, number>({ max: 100_000 });

  function setLimitHeaders(ctx: RequestContext, remaining: number, resetSeconds: number): void {
    const res = ctx.res;
    res.setHeader('x-ratelimit-limit', String(perMinute));
    res.setHeader('x-ratelimit-remaining', String(remaining));
    res.setHeader('x-ratelimit-reset', String(Math.ceil(Date.now() / 1000) + resetSeconds));
    res.setHeader('ratelimit-policy', `"unauthenticated";q=${perMinute};w=${WINDOW_SECONDS}`);
    res.setHeader('ratelimit', `"unauthenticated";r=${remaining};t=${resetSeconds}`);
  }

  const blockedSeconds = (ctx: RequestContext) => {
    const untilMs = blockedUntilMs.get(clientOf(clientAddress(ctx, proxyTrust))) ?? 0;
    return untilMs > Date.now() ? Math.ceil((untilMs - Date.now()) / 1000) : 0;
  };

  /** One failure counted: the seconds the address must now wait (0: under its limit, or both stores failed). */
  async function count(ctx: RequestContext): Promise<number> {
    // Per client as the anonymous tier counts one: an IPv6 /64, an IPv4-mapped address as its IPv4.
    const address = clientOf(clientAddress(ctx, proxyTrust));
    const counted = await window(address, perMinute);
    if (!counted) return 0; // both stores failed: answer plainly
    setLimitHeaders(ctx, counted.remaining, counted.resetSeconds);
    if (!counted.limited) return 0;
    blockedUntilMs.set(address, Date.now() + counted.msBeforeNext);
    return counted.resetSeconds;
  }

  async function onFailure(ctx: RequestContext, failure: Decision & object): Promise<Decision> {
    const waitSeconds = await count(ctx);
    if (waitSeconds === 0) return failure;
    return reject('too_many_unauthenticated_requests', undefined, { 'retry-after': waitSeconds });
  }

  const wrap =
    (authenticate: Policy): Policy =>
    (ctx) => {
      const decision = authenticate(ctx);
      const settle = (d: Decision) => {
        if (!d || isAnswer(d)) return d;
        if (d.code === 'too_many_unauthenticated_requests') setLimitHeaders(ctx, 0, Number(d.headers?.['retry-after'] ?? 1));
        return statusOf(d.code) === 401 ? onFailure(ctx, d) : d;
      };
      return decision instanceof Promise ? decision.then(settle) : settle(decision);
    };
  return { wrap, blockedSeconds, counted: onFailure };
}

/** The client's address; behind a load balancer, from X-Forwarded-For (see clientAddressOf). */
export function clientAddress(ctx: RequestContext, proxyTrust: ProxyTrust): string {
  return clientAddressOf(ctx.req, proxyTrust);
}
