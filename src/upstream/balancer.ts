import type { Target } from './target.js';

/**
 * The choice of a target among those a try may use:
 * - `round-robin`: smooth weighted round robin (nginx's): every pick adds each candidate's weight
 *   to its running total and takes the largest, which then gives back the sum of the weights; a
 *   2:1 pair goes a, b, a, a, b, a … never bunched;
 * - `least-requests`: power of two choices: two random candidates, the one with fewer requests in
 *   flight per unit of weight (Envoy's and Finagle's default against uneven targets), with no
 *   global scan and no herd onto one target just back.
 * Both use the weight as slow start scales it (target.ts).
 */
export type Balance = 'round-robin' | 'least-requests';

export function pick(balance: Balance, candidates: readonly Target[], nowMs: number, slowStartMs: number, random = Math.random): Target {
  if (candidates.length === 1) return candidates[0]!;
  return balance === 'least-requests' ? leastRequests(candidates, nowMs, slowStartMs, random) : roundRobin(candidates, nowMs, slowStartMs);
}

function roundRobin(candidates: readonly Target[], nowMs: number, slowStartMs: number): Target {
  let total = 0;
  let best: Target | undefined;
  for (const target of candidates) {
    const weight = target.effectiveWeight(nowMs, slowStartMs);
    target.current += weight;
    total += weight;
    if (!best || target.current > best.current) best = target;
  }
  best!.current -= total;
  return best!;
}

function leastRequests(candidates: readonly Target[], nowMs: number, slowStartMs: number, random: () => number): Target {
  const a = candidates[Math.floor(random() * candidates.length)]!;
  let b = candidates[Math.floor(random() * (candidates.length - 1))]!;
  if (b === a) b = candidates[candidates.length - 1]!;
  const load = (t: Target) => (t.inFlight + 1) / t.effectiveWeight(nowMs, slowStartMs);
  return load(b) < load(a) ? b : a;
}
