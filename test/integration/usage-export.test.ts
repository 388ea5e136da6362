import { describe, expect, it } from 'vitest';
import { TEST_CLOCK_ENV } from '../../src/gateway/test-clock.js';
import { admin, ADMIN_TOKENS, OPS_TOKEN } from '../helpers/admin-client.js';
import { pollUntil } from '../helpers/poll.js';
import { runCli } from '../helpers/processes.js';
import { threeGateways } from '../helpers/quota-stack.js';
import { configCopy, keysCli, slackRedisTimeout } from '../helpers/stack.js';
import { testClockFile } from '../helpers/test-clock-file.js';

// Usage for invoicing on three real gateways sharing one real redis-server, gateway.yaml as
// shipped (quota leases on) but in `quota.timeZone: Europe/Berlin`: a hot key admitted mostly from
// leases, a month plan refused at its month's end, a prepaid plan spending credits, an owner's
// shared windows. For every consumer the export's units equal what its windows counted, its
// admitted requests the 200s the clients got, its refusals their 429s and 402s, its credits the
// balance's change; Berlin's hours sum to Berlin's day; CLI and admin API give the same rows.
// The gateways run on a test clock (src/gateway/test-clock.ts) set to two hours of one Berlin day,
// so nothing depends on when the test runs.

const PLANS = `
plans:
  hot:     { perMinute: 1000000, perDay: 100000000 }
  monthly: { perMinute: 40, perDay: 40, perMonth: 40 }
  prepaid: { perMinute: 1000000, perDay: 100000000, credits: required }
  shared:  { perMinute: 1000000, perDay: 100000000, scope: owner }
ban: { afterRejections: 1000, window: 60, duration: 60 }
`;
const HOUR_MS = 3_600_000;
/**
 * How long after the traffic every lease has ended and given its block back, so that the requests
 * it admitted are in the usage rows: a hot lease within leaseMs of its key's last request, but a
 * key below hotPerSecond that a replica has seen for 5 s takes a warm lease, which lives until its
 * minute's end (quota-leases.ts, rule 15): up to about 58 s, on the gateways' own clocks (the test
 * clock moves only the quota's). The hot key's rate falls that low on a loaded machine, and the
 * other consumers' keys may hold one too. Seen: 25-29 s with other tests' gateways and two busy
 * loops beside this one, 34 s at a load of 2.
 */
const LEASES_BACK_MS = 90_000;
/** 10:00 in Berlin (UTC+1 in November) on 2026-11-15; the day began at 2026-11-14T23:00Z. */
const TEN_BERLIN = Date.parse('2026-11-15T09:00:00Z');
const DAY_START = '2026-11-14T23:00:00.000Z';
const VIEWER_TOKEN = 'viewer-token-0123456789abcdefghijklmnopqr';
const ACME_TOKEN = 'acme-token-0123456789abcdefghijklmnopqrst';
const OWNER = 'acme';

const clock = testClockFile(TEN_BERLIN + 5 * 60_000);
const stack = threeGateways(
  () =>
    configCopy({
      'plans.yaml': () => PLANS,
      'gateway.yaml': (y) => slackRedisTimeout(y).replace(/^ {2}timeZone: UTC\b/m, '  timeZone: Europe/Berlin'),
    }),
  {
    [TEST_CLOCK_ENV]: clock.file,
    TOLLGATE_ADMIN_TOKENS: `${ADMIN_TOKENS},viewer:viewer:${VIEWER_TOKEN},acme:viewer:${OWNER}:${ACME_TOKEN}`,
  },
);

/** Every gateway's quota clock reads `atMs` now (and runs on from there). */
const setClock = clock.set;

interface Row {
  consumer: string;
  from: string;
  to: string;
  admitted: number;
  refused: number;
  units: number;
  credits: number;
}

/** What the clients were told, per consumer. */
const told = new Map<string, { ok: number; refused: number }>();

/** `loops` concurrent loops over the three gateways, each sending `perLoop` requests of `key` (stopping at a refusal when asked). */
async function traffic(consumer: string, key: string, loops: number, perLoop: number, untilRefused = false): Promise<void> {
  const tally = told.get(consumer) ?? { ok: 0, refused: 0 };
  told.set(consumer, tally);
  await Promise.all(
    Array.from({ length: loops }, async (_, loop) => {
      for (let i = 0; i < perLoop; i++) {
        const res = await stack.send(key, loop + i);
        await res.arrayBuffer();
        if (res.status === 200) tally.ok++;
        else {
          expect([429, 402]).toContain(res.status);
          tally.refused++;
          if (untilRefused) return;
        }
      }
    }),
  );
}

async function exportCli(args: string[]): Promise<Row[]> {
  const result = await runCli(['usage', 'export', ...args, '--format', 'jsonl'], {
    REDIS_URL: stack.redis().url,
    TOLLGATE_CONFIG_DIR: stack.configDir(),
  });
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return result.stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Row);
}

function sums(rows: Row[]): Map<string, Omit<Row, 'consumer' | 'from' | 'to'>> {
  const out = new Map<string, Omit<Row, 'consumer' | 'from' | 'to'>>();
  for (const r of rows) {
    const s = out.get(r.consumer) ?? { admitted: 0, refused: 0, units: 0, credits: 0 };
    s.admitted += r.admitted;
    s.refused += r.refused;
    s.units += r.units;
    s.credits += r.credits;
    out.set(r.consumer, s);
  }
  return out;
}

/** The windows' counts of a key's subject, through a gateway's admin API (on the test clock). */
async function windows(id: string): Promise<{ day: number; month?: number; credits?: number }> {
  const usage = await admin(stack.gateways()[0]!.adminUrl, 'GET', `/keys/${id}/usage`);
  expect(usage.status).toBe(200);
  return { day: usage.body.day.used, month: usage.body.month?.used, credits: usage.body.credits };
}

const DAY = ['--from', '2026-11-15', '--to', '2026-11-16'];

describe('usage for invoicing over three gateways with leases on', { timeout: 600_000 }, () => {
  let hot: { id: string; key: string };
  let monthly: { id: string; key: string };
  let prepaid: { id: string; key: string };
  const shared: Array<{ id: string; key: string }> = [];

  it('counts every consumer exactly as its windows did, hour by hour of a Berlin day', async () => {
    hot = await stack.newKey(['--plan', 'hot']);
    monthly = await stack.newKey(['--plan', 'monthly']);
    prepaid = await stack.newKey(['--plan', 'prepaid']);
    shared.push(await stack.newKey(['--plan', 'shared', '--owner', OWNER]), await stack.newKey(['--plan', 'shared', '--owner', OWNER]));
    const topUp = await keysCli(stack.redis(), ['credits', 'add', prepaid.id, '150', '--reason', 'order 1', '--json'], stack.configDir());
    expect(topUp.code).toBe(0);

    // 10:05 Berlin: a hot key (leases), the month plan to its end, credits to zero, the owner's two keys.
    await Promise.all([
      traffic(hot.id, hot.key, 12, 60),
      traffic(monthly.id, monthly.key, 6, 10, true),
      traffic(prepaid.id, prepaid.key, 6, 20),
      traffic(`owner:${OWNER}`, shared[0]!.key, 3, 30),
      traffic(`owner:${OWNER}`, shared[1]!.key, 3, 30),
    ]);
    // 11:05 Berlin, once every lease has given its units back: the hot key again, another hour.
    await pollUntil(
      () => exportCli(DAY),
      (rows) => rows.find((r) => r.consumer === hot.id)?.admitted === told.get(hot.id)!.ok,
      { deadline: Date.now() + LEASES_BACK_MS, everyMs: 200 },
    );
    setClock(TEN_BERLIN + HOUR_MS + 5 * 60_000);
    await traffic(hot.id, hot.key, 12, 60);

    const consumers = [hot.id, monthly.id, prepaid.id, `owner:${OWNER}`];
    const windowOf: Record<string, string> = {
      [hot.id]: hot.id,
      [monthly.id]: monthly.id,
      [prepaid.id]: prepaid.id,
      [`owner:${OWNER}`]: shared[0]!.id,
    };
    // Leases give their blocks back when they end (LEASES_BACK_MS).
    const settled = async () => {
      const rows = await exportCli([...DAY, '--by', 'hour']);
      const totals = sums(rows);
      let equal = true;
      for (const consumer of consumers) {
        const { admitted, units } = totals.get(consumer) ?? {};
        if (admitted !== told.get(consumer)!.ok || units !== (await windows(windowOf[consumer]!)).day) equal = false;
      }
      return { rows, equal };
    };
    const byHour = (await pollUntil(settled, (s) => s.equal, { deadline: Date.now() + LEASES_BACK_MS, everyMs: 200 })).rows;

    // The hot key was admitted from leases (Redis granted it blocks); the credits plan never is.
    const redis = stack.redis().client();
    expect(await redis.hget(`tg:quota:{${hot.id}}`, 'lds')).not.toBeNull();
    redis.disconnect();
    const totals = sums(byHour);
    for (const consumer of consumers) {
      const w = await windows(windowOf[consumer]!);
      expect({ consumer, ...totals.get(consumer) }).toMatchObject({
        consumer,
        admitted: told.get(consumer)!.ok,
        refused: told.get(consumer)!.refused,
        units: w.day,
      });
    }
    // The month plan: its month window counted what the export says, and refused the rest.
    expect(told.get(monthly.id)!.ok).toBe(40);
    expect((await windows(monthly.id)).month).toBe(40);
    // Credits: spent exactly the balance's change (150 → 0), each admitted request one.
    expect(totals.get(prepaid.id)).toMatchObject({ admitted: 120, units: 120, credits: 120, refused: 0 });
    expect((await windows(prepaid.id)).credits).toBe(30);

    // Berlin's hours: 10:00 and 11:00 local, and the day row is their sum, from Berlin's midnight.
    expect(new Set(byHour.filter((r) => r.consumer === hot.id).map((r) => r.from))).toEqual(
      new Set(['2026-11-15T09:00:00.000Z', '2026-11-15T10:00:00.000Z']),
    );
    const byDay = await exportCli([...DAY, '--by', 'day']);
    for (const row of byDay) expect(row).toMatchObject({ from: DAY_START, to: '2026-11-15T23:00:00.000Z' });
    expect(sums(byDay)).toEqual(totals);
    // The month: the month plan's window (Berlin's November), equal to its month count.
    const byMonth = await exportCli(['--from', '2026-11-01', '--to', '2026-12-01', '--by', 'month']);
    expect(byMonth.find((r) => r.consumer === monthly.id)).toEqual({
      consumer: monthly.id,
      from: '2026-10-31T23:00:00.000Z',
      to: '2026-11-30T23:00:00.000Z',
      admitted: 40,
      refused: told.get(monthly.id)!.refused,
      units: 40,
      credits: 0,
    });
    // One consumer only.
    expect((await exportCli([...DAY, '--consumer', prepaid.id])).map((r) => r.consumer)).toEqual([prepaid.id]);
  });

  it('answers GET /admin/v1/usage with the same rows, as CSV or JSON Lines, to viewers and above, an owner-scoped token its owner’s only', async () => {
    const adminUrl = stack.gateways()[2]!.adminUrl;
    const url = (query: string) => `${adminUrl}/admin/v1/usage?${query}`;
    const get = (query: string, token: string | null) =>
      fetch(url(query), { headers: token === null ? {} : { authorization: `Bearer ${token}` } });

    const cliRows = await exportCli([...DAY, '--by', 'hour']);
    const jsonl = await get('from=2026-11-15&to=2026-11-16&by=hour&format=jsonl', VIEWER_TOKEN);
    expect(jsonl.status).toBe(200);
    expect(jsonl.headers.get('content-type')).toBe('application/jsonl; charset=utf-8');
    const apiRows = (await jsonl.text())
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Row);
    const order = (rows: Row[]) => [...rows].sort((a, b) => `${a.consumer}${a.from}`.localeCompare(`${b.consumer}${b.from}`));
    expect(order(apiRows)).toEqual(order(cliRows));

    const csv = await get('from=2026-11-15&to=2026-11-16&by=day&format=csv', OPS_TOKEN);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const lines = (await csv.text()).split('\r\n').filter(Boolean);
    expect(lines[0]).toBe('consumer,from,to,admitted,refused,units,credits');
    const prepaidLine = lines.find((l) => l.startsWith(`${prepaid.id},`));
    expect(prepaidLine).toBe(`${prepaid.id},${DAY_START},2026-11-15T23:00:00.000Z,120,0,120,120`);

    // Owner scope: acme's shared windows only (no other key, no owner-less consumer).
    const scoped = await get('from=2026-11-15&to=2026-11-16&format=jsonl', ACME_TOKEN);
    expect(scoped.status).toBe(200);
    const scopedRows = (await scoped.text())
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Row);
    expect(scopedRows.map((r) => r.consumer)).toEqual([`owner:${OWNER}`]);
    const other = await admin(adminUrl, 'GET', '/usage?from=2026-11-15&to=2026-11-16&owner=other', { token: ACME_TOKEN });
    expect(other.status).toBe(403);

    // Refusals: no token, and bad parameters named.
    expect((await get('from=2026-11-15&to=2026-11-16', null)).status).toBe(401);
    const bad = await admin(adminUrl, 'GET', '/usage?from=2026-11-16&to=2026-11-15', { token: VIEWER_TOKEN });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ code: 'invalid_query', message: 'to must be later than from', status: 400 });
    const by = await admin(adminUrl, 'GET', '/usage?from=2026-11-15&to=2026-11-16&by=week', { token: VIEWER_TOKEN });
    expect(by.body.message).toBe('by must be hour, day or month');
  });
});
