import type { Answer, Policy, Rejection, RequestContext } from './context.js';

/**
 * Runs the policies in order; the first rejection (or answer) ends the chain. Faults are not caught here:
 * they propagate to the server, which answers them once.
 */
export async function runChain(ctx: RequestContext, chain: readonly Policy[]): Promise<Rejection | Answer | null> {
  for (const policy of chain) {
    // Most policies decide synchronously; awaiting only real promises saves a microtask hop each.
    const result = policy(ctx);
    const decision = result instanceof Promise ? await result : result;
    if (decision) return decision;
  }
  return null;
}
