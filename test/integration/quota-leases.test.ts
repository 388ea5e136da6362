import { describe, expect, it } from 'vitest';
import { leaseConfig, leasedRequests } from '../helpers/gcra-leases.js';
import { threeGateways } from '../helpers/quota-stack.js';
import { keysCli } from '../helpers/stack.js';
import { QUOTA_NOTICE_CHANNEL } from '../../src/store/redis/redis-keys.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// Quota leases with three real gateway processes on one real redis-server: hot keys are admitted
// against blocks reserved in Redis, and no window ever admits more than its limit.

const PLANS = `
plans:
  hot:      { perMinute: 400, perDay: 1000000 }
  hotowner: { perMinute: 400, perDay: 1000000, scope: owner }
  hotday:   { perMinute: 800, perDay: 800 }
  killday:  { perMinute: 3000, perDay: 3000 }
  tiny:     { perMinute: 1, perDay: 1 }
ban:
  afterRejections: 1000000
  window: 60
  duration: 60
`;
const LEASES = '  leases: { enabled: true, leaseMs: 500, hotPerSecond: 3, minBlock: 4, maxBlock: 200, spread: 2 }';

const stack = threeGateways(() => leaseConfig(PLANS, 3, LEASES));

interface Answer {
  status: number;
  /** X-RateLimit-Reset: the end of the window that decided (minute-bound plans here). */
  reset: number;
}

/** `concurrency` clients sending the keys' requests round robin over `gateways` until `until()`. */
async function hammer(keys: string[], until: (sent: number) => boolean, concurrency = 12, gateways = [0, 1, 2]): Promise<Answer[]> {
  const answers: Answer[] = [];
  let sent = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (!until(sent)) {
        const i = sent++;
        const res = await stack.send(keys[i % keys.length]!, gateways[i % gateways.length]!);
        await res.arrayBuffer();
        answers.push({ status: res.status, reset: Number(res.headers.get('x-ratelimit-reset')) });
      }
    }),
  );
  return answers;
}

/** Admitted and refused per window (by X-RateLimit-Reset). */
function perWindow(answers: Answer[]): Map<number, { admitted: number; refused: number }> {
  const windows = new Map<number, { admitted: number; refused: number }>();
  for (const { status, reset } of answers) {
    const window = windows.get(reset) ?? { admitted: 0, refused: 0 };
    if (status === 200) window.admitted++;
    else if (status === 429) window.refused++;
    else throw new Error(`unexpected status ${status}`);
    windows.set(reset, window);
  }
  return windows;
}

/** Requests the gateways admitted on a lease, from their metrics. */
const leased = () => leasedRequests(stack);

/** tollgate_quota_lease_notices_total of one gateway. */
async function noticesHeard(adminUrl: string): Promise<number> {
  const text = await fetch(`${adminUrl}/metrics`).then((r) => r.text());
  return Number(/^tollgate_quota_lease_notices_total (\d+)/m.exec(text)?.[1] ?? NaN);
}

async function dayUsed(id: string): Promise<number> {
  const result = await keysCli(stack.redis(), ['usage', id, '--json'], stack.configDir());
  return (JSON.parse(result.stdout) as { day: { used: number } }).day.used;
}

describe('quota leases across three gateways', { timeout: 180_000 }, () => {
  it('never admit more than the minute limit across a minute edge, for a key and an owner', async () => {
    await awayFromDayEdge(90);
    const key = await stack.newKey(['--plan', 'hot']);
    const ownerKeys = [
      await stack.newKey(['--plan', 'hotowner', '--owner', 'acme']),
      await stack.newKey(['--plan', 'hotowner', '--owner', 'acme']),
    ];
    // Start 8 to 12 s before a minute's edge, wherever in the minute the test began, and go on
    // until 8 s after it: both windows see more requests than their limit.
    const inMinute = () => (Date.now() % 60_000) / 1000;
    while (inMinute() < 48 || inMinute() >= 52) await new Promise((r) => setTimeout(r, 200));
    const edgeMs = Math.ceil(Date.now() / 60_000) * 60_000;
    const before = await leased();
    const [single, owner] = await Promise.all([
      hammer([key.key], () => Date.now() > edgeMs + 8000),
      hammer(
        ownerKeys.map((k) => k.key),
        () => Date.now() > edgeMs + 8000,
      ),
    ]);
    for (const answers of [single, owner]) {
      const windows = perWindow(answers);
      expect(windows.size).toBeGreaterThanOrEqual(2);
      for (const [, { admitted, refused }] of windows) {
        expect(admitted).toBeLessThanOrEqual(400);
        // Overloaded (some refused): all of the limit was admitted.
        if (refused > 0) expect(admitted).toBe(400);
      }
    }
    expect(await leased()).toBeGreaterThan(before);
  });

  it('never admit more than the day limit; units on ended leases come back', async () => {
    await awayFromDayEdge(60);
    const key = await stack.newKey(['--plan', 'hotday']);
    const first = await hammer([key.key], (sent) => sent >= 1400);
    // Leases still out when the load stopped end within leaseMs and give their units back.
    await new Promise((r) => setTimeout(r, 1200));
    const second = await hammer([key.key], (sent) => sent >= 300, 4);
    const admitted = [...first, ...second].filter((a) => a.status === 200).length;
    expect(admitted).toBe(800);
    expect(await dayUsed(key.id)).toBe(800);
  });

  it('ends the leases of a key moved to another plan', async () => {
    await awayFromDayEdge(60);
    const key = await stack.newKey(['--plan', 'hotday']);
    await hammer([key.key], (sent) => sent >= 300);
    expect((await keysCli(stack.redis(), ['set-plan', key.id, 'tiny'], stack.configDir())).code).toBe(0);
    for (let gateway = 0; gateway < 3; gateway++) {
      // Once this gateway has heard of the change (pub/sub), no lease admits a request any more.
      const deadline = Date.now() + 10_000;
      while ((await stack.send(key.key, gateway)).status === 200) expect(Date.now()).toBeLessThan(deadline);
      const after = await Promise.all(Array.from({ length: 20 }, () => stack.send(key.key, gateway)));
      expect(after.map((r) => r.status)).toEqual(Array(20).fill(429));
    }
  });

  it('every gateway hears every lease notice of a key the others hold leases of', async () => {
    await awayFromDayEdge(60);
    const key = await stack.newKey(['--plan', 'hotday']);
    const listener = stack.redis().client();
    let published = 0;
    listener.on('message', () => published++);
    await listener.subscribe(QUOTA_NOTICE_CHANNEL);
    try {
      // The earlier tests' last notices (give-backs) are in: counting starts from here.
      const heardAt = () => Promise.all(stack.gateways().map((g) => noticesHeard(g.adminUrl)));
      let before = await heardAt();
      for (let settled = false; !settled;) {
        await new Promise((r) => setTimeout(r, 300));
        const now = await heardAt();
        settled = now.every((n, i) => n === before[i]);
        before = now;
      }
      published = 0;
      const answers = await hammer([key.key], (sent) => sent >= 500);
      expect(answers.every((a) => a.status === 200)).toBe(true);
      // Grants, Redis's own admissions beside leases, then give-backs as the leases end: each one
      // published once and heard by every gateway (pub/sub; waited for, not timed).
      const deadline = Date.now() + 30_000;
      let heard: number[] = [];
      do {
        await new Promise((r) => setTimeout(r, 100));
        heard = (await heardAt()).map((n, i) => n - before[i]!);
      } while (heard.some((n) => n !== published) && Date.now() < deadline);
      expect(published).toBeGreaterThan(0);
      expect(heard).toEqual([published, published, published]);
    } finally {
      listener.disconnect();
    }
  });

  // Last: it kills a gateway.
  it('a gateway killed with -9 while holding a lease loses at most that lease', async () => {
    await awayFromDayEdge(60);
    const key = await stack.newKey(['--plan', 'killday']);
    // Only gateway 2 sees the key: it alone takes a lease.
    const warm = await hammer([key.key], (sent) => sent >= 300, 8, [2]);
    const admittedBefore = warm.filter((a) => a.status === 200).length;
    await stack.gateways()[2]!.process.stop('SIGKILL');
    const held = (await dayUsed(key.id)) - admittedBefore;
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThanOrEqual(200);
    const rest = await hammer([key.key], (sent) => sent >= 3500, 12, [0, 1]);
    await new Promise((r) => setTimeout(r, 1200));
    const tail = await hammer([key.key], (sent) => sent >= 300, 4, [0, 1]);
    const admitted = admittedBefore + [...rest, ...tail].filter((a) => a.status === 200).length;
    expect(admitted).toBe(3000 - held);
  });
});
