import { clientAddressOf } from '../../http/client-address.js';
import type { ProxyTrust } from '../../http/proxy-trust.js';
import type { RedisClient } from '../../store/redis/connect.js';
import type { RequestContext } from '../context.js';
import { addressWindow } from './address-window.js';

/**
 * The preflight budget (`cors.preflightsPerMinute`): CORS preflights need no key and cost no quota,
 * so they are counted per client address on a counter of their own, apart from failed
 * authentications. An office behind one NAT address makes many legitimate preflights (one per URL,
 * method and header set, cached only `maxAgeSeconds`): they must neither exhaust the failed-auth
 * limit of that address nor be refused by it.
 *
 * One counter per (address, budget): each preflight is held to the budget of the `cors:` section
 * that answers it, and sections with the same budget share a counter. A single counter per address
 * held to the strictest budget would let preflights to a generous service use up a strict one's; a
 * reload that changes a budget starts a fresh counter, at most one window early.
 *
 * Returns the seconds to wait once over the budget, else 0 (also when both stores failed). Sets no
 * rate-limit headers: a browser never shows a preflight's headers to the page.
 */
export function preflightLimiter(
  redis: RedisClient | undefined,
  proxyTrust: ProxyTrust,
): (ctx: RequestContext, perMinute: number) => Promise<number> {
  const window = addressWindow(redis, 'tg:preflight');
  return async (ctx, perMinute) => {
    const counted = await window(`${perMinute}:${clientAddressOf(ctx.req, proxyTrust)}`, perMinute);
    return counted?.limited ? counted.resetSeconds : 0;
  };
}
