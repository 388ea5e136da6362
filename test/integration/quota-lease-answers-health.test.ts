import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeNoticesSubscribed, proxiedGateway, recordCached, type ProxiedGateway } from '../helpers/held-answers.js';
import { requestLoops, sleep } from '../helpers/request-loops.js';
import { createKey, type CreatedKey, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// A timeout is no outage while Redis answered within the last four command timeouts
// (store-health.ts). A lease's grant is Redis answering too: a gateway whose hot keys were all
// admitted from leases (their blocks granted and renewed in time) asked Redis nothing else for
// longer than that, and one command held on the path (here another key's decision) must not
// send it to local counting, which admits past the limit while Redis still answers. Before, only
// a quota decision or a key read told StoreHealth that Redis answered: the held request was
// admitted locally (quota-local), and so were the hot key's requests behind it. No timing is
// asserted: how the held request was answered, and whether anything was marked degraded.

const COMMAND_TIMEOUT_MS = 2000;

let stack: ProxiedGateway;
let gateway: GatewayHandle;
let hot: CreatedKey;
let cold: CreatedKey;

beforeAll(async () => {
  // One request loop keeps a key on leases: blocks of five seconds of its rate, renewed when half
  // used, so that a request goes to the store only at a minute's edge (rule 4).
  stack = await proxiedGateway((yaml) =>
    yaml
      .replace(/commandTimeoutMs: 250\b/, `commandTimeoutMs: ${COMMAND_TIMEOUT_MS}`)
      .replace(/leases: \{ enabled: true \}/, 'leases: { enabled: true, hotPerSecond: 5, leaseMs: 5000 }')
      // The cold key's record stays fresh however long the wait below takes: it is not read again.
      .replace(/ttlSeconds: 30\b/, 'ttlSeconds: 3600'),
  );
  gateway = stack.gateway;
  hot = await createKey(stack.redis, ['--plan', 'enterprise', '--per-minute', '1000000', '--per-day', '10000000'], stack.configDir);
  cold = await createKey(stack.redis, ['--plan', 'free'], stack.configDir);
});

afterAll(() => stack?.stop());

const call = (key: CreatedKey) => stack.call(key);

/** The gateway's admitted decisions by source (store, lease), from its metrics. */
async function decisions(): Promise<{ store: number; lease: number }> {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`, { signal: AbortSignal.timeout(30_000) })).text();
  const sum = (source: string) =>
    [...text.matchAll(new RegExp(`^tollgate_quota_decisions_total\\{[^}]*source="${source}"[^}]*\\} (\\d+)`, 'gm'))].reduce(
      (total, [, n]) => total + Number(n),
      0,
    );
  return { store: sum('store'), lease: sum('lease') };
}

describe('a gateway whose requests are all admitted from leases', () => {
  it('counts the leases granted as Redis answering: a command held then is shed, never decided locally', async () => {
    await awayFromDayEdge(120);
    await changeNoticesSubscribed(stack.redis);
    // The gateway knows the cold key's record; its one decision is the last the store answers.
    // (Cached: a read of it, answered, would tell StoreHealth that Redis answered just before.)
    await recordCached(stack, cold);
    const loop = requestLoops([gateway.url], hot.key, 1, () => undefined);
    try {
      // Until no request was decided in the store for longer than four command timeouts while
      // the hot key's were admitted from leases (not a timed assertion: how long that takes).
      for (let tries = 0; ; tries++) {
        const before = await decisions();
        await sleep(COMMAND_TIMEOUT_MS * 4 + 1000);
        const after = await decisions();
        if (after.store === before.store && after.lease > before.lease) break;
        if (tries === 10) throw new Error(`the hot key never stayed on leases: ${JSON.stringify({ before, after })}`);
      }
      stack.proxy.holdFrom(`tg:quota:{${cold.id}}`);
      const answer = await call(cold);
      stack.proxy.release();
      const tally = await loop.stop();
      console.log(
        `held: ${JSON.stringify(answer)}; hot key: ${JSON.stringify(Object.fromEntries(tally.statuses))}, degraded ${JSON.stringify(Object.fromEntries(tally.degraded))}`,
      );
      expect(answer).toEqual({ status: 503, code: 'gateway_overloaded', degraded: null });
      expect(tally.degraded.size).toBe(0);
    } finally {
      await loop.stop();
    }
  }, 240_000);
});
