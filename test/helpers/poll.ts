/**
 * Waiting for something the product does on its own (a change pushed to every replica, a state it
 * reports) without betting on how fast the machine is: `probe` runs again until `done` holds or the
 * deadline passes, and the last answer is returned for the test to assert on. A loaded machine makes
 * the wait longer, never the test red; a product that never gets there still fails, at the deadline.
 */
export async function pollUntil<T>(
  probe: () => Promise<T>,
  done: (answer: T) => boolean,
  { deadline, everyMs = 25 }: { deadline: number; everyMs?: number },
): Promise<T> {
  let answer = await probe();
  while (!done(answer) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, everyMs));
    answer = await probe();
  }
  return answer;
}

/** Until `check` holds: what replicas do in the background (no bet on the machine's speed; 30 s at most, then an error naming `what`). */
export async function pollFor(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`no ${what} within 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The key cache's shipped ttlSeconds (src/config/gateway-schema.ts). */
const KEY_CACHE_TTL_MS = 30_000;

/**
 * The deadline for a key change that must be *pushed* (pub/sub) to replicas holding the key in
 * their cache: anything seen before the cached record could have expired on its own
 * (`cachedSince`: a time taken before the request that cached it) proves the push, however slow
 * the machine. A few seconds are kept back for the last probe's own round trip.
 */
export function beforeKeyCacheExpiry(cachedSince: number, ttlMs = KEY_CACHE_TTL_MS): number {
  return cachedSince + ttlMs - 5_000;
}
