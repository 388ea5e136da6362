import type { Decision, Policy, RequestContext } from './context.js';

/**
 * Runs the policies in order; the first rejection (or answer) ends the chain. Faults are not caught here:
 * they propagate to the server, which answers them once (a synchronous throw as it is, an
 * asynchronous one as a rejected promise).
 *
 * Most policies decide synchronously: only a real promise is awaited, and a chain in which none
 * returned one decides synchronously too, so the server forwards the request in the same turn
 * rather than a promise and a microtask hop later (one per policy, then one for the chain).
 */
export function runChain(ctx: RequestContext, chain: readonly Policy[], from = 0): Decision | Promise<Decision> {
  for (let i = from; i < chain.length; i++) {
    const result = chain[i]!(ctx);
    if (result instanceof Promise) return result.then((decision) => decision ?? runChain(ctx, chain, i + 1));
    if (result) return result;
  }
  return null;
}
