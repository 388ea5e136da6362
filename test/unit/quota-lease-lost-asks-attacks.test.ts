import { describe, expect, it } from 'vitest';
import type { Quota } from '../../src/config/plans-schema.js';
import { QuotaLeases } from '../../src/quota/quota-leases.js';
import { NO_BANS, QUOTA, scriptedStore, SETTINGS } from '../helpers/scripted-lease-store.js';

// Reviewer's attacks on 5234e5b, the replica side: what a QuotaLeases replica sends after an ask
// whose answer never came. (test/integration/lease-lost-asks-attacks.test.ts: what Redis does with it.)

const settle = () => new Promise((resolve) => setImmediate(resolve));
const CREDITS: Quota = { perMinute: 1000, perDay: 1_000_000, credits: 'required' };

function replica() {
  const { store, asks } = scriptedStore();
  const clock = { nowMs: 5_000 };
  const leases = new QuotaLeases(store, SETTINGS, () => clock.nowMs);
  const send = (quota: Quota, n: number) => {
    for (let i = 0; i < n; i++) {
      const answer = leases.admit('k', quota, NO_BANS, 1);
      if (answer instanceof Promise) answer.catch(() => undefined);
    }
  };
  return { leases, asks, clock, send };
}

describe('lost asks, the replica side (attacks)', () => {
  // The path to the credits / gcra-interval findings: `lost` survives the key's change (forget ends
  // its leases, not its unanswered asks), so the key's next ask names the lost one under the new
  // plan, and LEASE_SCRIPT reads the lost block's credits and cells with that plan's arguments.
  it("a plan change between a lost ask and the key's next ask: the name goes out with the new plan", async () => {
    const { leases, asks, send } = replica();
    send(QUOTA, 3);
    expect(asks).toHaveLength(1);
    asks[0]!.fail(new Error('Command timed out'));
    await settle();
    leases.forget('k'); // keys.onChange: the key moved to a credits plan
    send(CREDITS, 1);
    expect(asks).toHaveLength(2);
    expect(asks[1]!.quota).toBe(CREDITS);
    expect(asks[1]!.request.cancelFrom).toBe(asks[0]!.request.block);
    // Nothing in the request tells Redis the lost block was granted without credits.
    expect(Object.keys(asks[1]!.request).filter((k) => /credit/i.test(k))).toEqual([]);
  });

  // `covers` (rule leases, and the plan's lease beside them) keeps asks one at a time too.
  it('covers(): no new lease asked for while a renewal is on its way', async () => {
    const { leases, asks, clock } = replica();
    for (let i = 0; i < 3; i++) leases.covers('k', QUOTA, NO_BANS, 1);
    expect(asks).toHaveLength(1);
    asks[0]!.answer({ granted: 10, seq: 1 });
    await settle();
    for (let i = 0; i < 6; i++) if (leases.covers('k', QUOTA, NO_BANS, 1)) leases.take('k', 1);
    expect(asks).toHaveLength(2); // the renewal
    clock.nowMs += 2 * SETTINGS.leaseMs;
    for (let i = 0; i < 5; i++) leases.covers('k', QUOTA, NO_BANS, 1);
    expect(asks).toHaveLength(2);
    asks[1]!.fail(new Error('Connection is closed.'));
    await settle();
    leases.covers('k', QUOTA, NO_BANS, 1);
    // (The lapsed lease's ending step went out meanwhile: want 0.)
    const wanting = asks.filter(({ request }) => request.want > 0);
    expect(wanting).toHaveLength(3);
    expect(wanting[2]!.request.cancelFrom).toBe(asks[1]!.request.block);
  });
});
