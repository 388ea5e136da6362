import type { Answer, Policy, Rejection, RequestContext } from './context.js';

/**
 * Runs the policies in order; the first rejection (or answer) ends the chain. Faults are not caught here:
 * they propagate to the server, which answers them once.
 */
export async function runChain(ctx: RequestContext, chain: readonly Policy[]): Promise<Rejection | Answer | null> {
  for (const policy of chain) {
    const decision = await policy(ctx);
    if (decision) return decision;
  }
  return null;
}
