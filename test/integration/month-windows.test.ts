import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TEST_CLOCK_ENV } from '../../src/gateway/test-clock.js';
import { pollUntil } from '../helpers/poll.js';
import { quotaStack } from '../helpers/quota-stack.js';
import { bearer, keysCli } from '../helpers/stack.js';
import { testClockFile } from '../helpers/test-clock-file.js';

// Month windows with three real gateway processes on one real redis-server, in
// `quota.timeZone: Europe/Berlin`: exactly perMonth admitted per month across the three, and the
// month edge where Berlin has it, for calendar months and for a billing anchor of the 31st. The
// gateways run on a test clock (src/gateway/test-clock.ts: this machine's clock plus an offset the
// test writes to a file), set an hour before an edge and then at it: no phase depends on how long
// anything takes. (Edges to the millisecond, daylight saving and short months on an injected
// clock: test/unit/calendar.test.ts, test/integration/quota-stores-differential.test.ts.)

const PLANS = (perMonth: number) => `
plans:
  monthly: { perMinute: 3, perDay: 3, perMonth: ${perMonth} }
ban: { afterRejections: 1000, window: 60, duration: 60 }
`;
const HOUR_MS = 3_600_000;
const clock = testClockFile();
const stack = quotaStack(PLANS(5), (yaml) => yaml.replace(/^ {2}timeZone: UTC\b/m, '  timeZone: Europe/Berlin'), {
  [TEST_CLOCK_ENV]: clock.file,
});

/** Every gateway's quota clock reads `atMs` now (and runs on from there). */
const setClock = clock.set;

interface Reply {
  status: number;
  headers: Headers;
}

/** `count` requests, one after another, through the three gateways in turn. */
async function send(key: string, count: number): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < count; i++) {
    const response = await stack.send(key, i);
    await response.arrayBuffer();
    replies.push({ status: response.status, headers: response.headers });
  }
  return replies;
}

const statuses = (replies: Reply[]) => replies.map((r) => r.status);

/**
 * A month of 5 spent over two days of 3, the day before `edgeMs` and the day it ends: exactly 5
 * admitted across the gateways, the refusals for the month (its room gone, the day's not), with
 * Retry-After, RateLimit's t and X-RateLimit-Reset all at `edgeMs`.
 */
async function spendMonthBefore(key: string, edgeMs: number): Promise<void> {
  setClock(edgeMs - 25 * HOUR_MS);
  const dayBefore = await send(key, 3);
  expect(statuses(dayBefore)).toEqual([200, 200, 200]);
  expect(dayBefore[0]!.headers.get('ratelimit-policy')).toBe('"minute";q=3;w=60, "day";q=3;w=86400, "month";q=5;w=2592000');
  setClock(edgeMs - HOUR_MS);
  const lastDay = await send(key, 4);
  expect(statuses(lastDay)).toEqual([200, 200, 429, 429]);
  for (const refused of lastDay.slice(2)) {
    expect(refused.headers.get('ratelimit')).toMatch(/^"month";r=0;t=\d+$/);
    expect(refused.headers.get('x-ratelimit-reset')).toBe(String(edgeMs / 1000));
    const t = Number(/t=(\d+)/.exec(refused.headers.get('ratelimit')!)![1]);
    expect(Number(refused.headers.get('retry-after'))).toBe(t);
    expect(t).toBeGreaterThan(HOUR_MS / 1000 - 600);
  }
}

/** The key's own usage of its month, through the third gateway (consumes nothing). */
async function monthUsage(key: string): Promise<unknown> {
  const response = await fetch(`${stack.gateways()[2]!.url}/v1/usage`, { headers: bearer(key) });
  return ((await response.json()) as { month: unknown }).month;
}

describe('month windows across three gateways, in Europe/Berlin', { timeout: 120_000 }, () => {
  it('count calendar months from midnight in Berlin, exactly, and reset there', async () => {
    const key = await stack.newKey(['--plan', 'monthly']);
    // March begins in Berlin at 2026-02-28T23:00Z (CET); April at 2026-03-31T22:00Z (CEST).
    const march = Date.UTC(2026, 1, 28, 23);
    await spendMonthBefore(key.key, march);
    setClock(march);
    expect(statuses(await send(key.key, 4))).toEqual([200, 200, 200, 429]);
    expect(await monthUsage(key.key)).toEqual({ used: 3, limit: 5, remaining: 2, resetAt: '2026-03-31T22:00:00.000Z' });
  });

  it('begin the month of a key anchored on the 31st on the last day of a shorter month', async () => {
    const key = await stack.newKey(['--plan', 'monthly', '--billing-anchor', '2026-01-31']);
    // February has no 31st: the anchored month begins on the 28th, 00:00 in Berlin; the next on March 31st.
    const edge = Date.UTC(2026, 1, 27, 23);
    await spendMonthBefore(key.key, edge);
    setClock(edge);
    expect(statuses(await send(key.key, 4))).toEqual([200, 200, 200, 429]);
    expect(await monthUsage(key.key)).toEqual({ used: 3, limit: 5, remaining: 2, resetAt: '2026-03-30T22:00:00.000Z' });
    const shown = await keysCli(stack.redis(), ['show', key.id, '--json'], stack.configDir());
    expect(JSON.parse(shown.stdout)).toMatchObject({ billingAnchor: '2026-01-31' });
  });

  it('refuses an anchor that is not a date, naming the option', async () => {
    const refused = await keysCli(stack.redis(), ['create', '--plan', 'monthly', '--billing-anchor', '2026-02-30'], stack.configDir());
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('--billing-anchor');
  });

  it('take a plans reload with a larger month on every gateway, and stay exact', async () => {
    const key = await stack.newKey(['--plan', 'monthly']);
    setClock(Date.UTC(2026, 4, 10, 12));
    expect(statuses(await send(key.key, 3))).toEqual([200, 200, 200]);
    setClock(Date.UTC(2026, 4, 11, 12));
    expect(statuses(await send(key.key, 3))).toEqual([200, 200, 429]);
    writeFileSync(join(stack.configDir(), 'plans.yaml'), PLANS(7));
    // A usage read consumes nothing: it shows when each gateway has the new plans.
    const deadline = Date.now() + 60_000;
    for (const gateway of stack.gateways()) {
      const policy = await pollUntil(
        async () => (await fetch(`${gateway.url}/v1/usage`, { headers: bearer(key.key) })).headers.get('ratelimit-policy'),
        (p) => p?.includes('"month";q=7') ?? false,
        { deadline },
      );
      expect(policy).toContain('"month";q=7');
    }
    setClock(Date.UTC(2026, 4, 12, 12));
    expect(statuses(await send(key.key, 3))).toEqual([200, 200, 429]);
    expect(await monthUsage(key.key)).toMatchObject({ used: 7, limit: 7, remaining: 0 });
  });
});
