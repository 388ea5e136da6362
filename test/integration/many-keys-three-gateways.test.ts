import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MULTI_QUOTA_SCRIPT } from '../../src/store/redis/multi-quota-script.js';
import { configCopy, keysCli, slackRedisTimeout, type CreatedKey } from '../helpers/stack.js';
import { threeGateways } from '../helpers/quota-stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// Many keys at once over three real gateways on one real redis-server: a turn of each gateway
// holds requests of many keys, packed into few script calls (multi-quota-script.ts) beside a hot
// key's leases and their recall. Each kind a key can be: fixed windows of its own (each key a
// different limit, so that an answer carrying another key's numbers shows), an owner's shared
// windows (`scope: owner`), a gcra plan, prepaid credits, and a hot key whose leases are recalled
// at its limit. Every window is a day's as well (its minute's equal), so no minute edge during the
// run changes a count. Asserted per key or owner: exactly its limit admitted, the ban at exactly
// ban.afterRejections, each answer's X-RateLimit-Limit its own and the admitted answers' Remaining
// each count once, and a balance spent exactly by the admissions.

const AFTER_REJECTIONS = 20;
const OVER = 60;
const FIXED = [5, 6, 7, 9];
const PLANS = `
plans:
  fixed:   { perMinute: 1000, perDay: 1000 }
  cells11: { perMinute: 11, perDay: 11, algorithm: gcra, burst: 11 }
  cells12: { perMinute: 12, perDay: 12, algorithm: gcra, burst: 12 }
  team:    { perMinute: 13, perDay: 13, scope: owner }
  prepaid: { perMinute: 100000, perDay: 100000, credits: required }
  hot:     { perMinute: 150, perDay: 150 }
ban:
  afterRejections: ${AFTER_REJECTIONS}
  window: 600
  duration: 900
`;
const hotSooner = (text: string) => {
  const edited = slackRedisTimeout(text).replace(/^( {2}leases: \{ enabled: true)( \})/m, '$1, hotPerSecond: 5$2');
  if (!edited.includes('hotPerSecond: 5')) throw new Error('gateway.yaml no longer has the quota.leases line this test edits');
  return edited;
};
const stack = threeGateways(() => configCopy({ 'plans.yaml': () => PLANS, 'gateway.yaml': hotSooner }));

interface Answer {
  status: number;
  code?: string;
  limit: string | null;
  remaining: string | null;
  credits: string | null;
  retryAfter: string | null;
}

/** One group of keys counted together (a key, or an owner's keys): what it may admit, and how many requests it is sent. */
interface Group {
  name: string;
  keys: CreatedKey[];
  limit: number;
  sent: number;
  loopsPerGateway: number;
  answers: Answer[];
}

/** `group.sent` requests of its keys in turn from `loopsPerGateway` loops on each gateway; a shed request (503 gateway_overloaded, nothing counted) is sent again. */
async function drive(group: Group): Promise<void> {
  let sent = 0;
  await Promise.all(
    Array.from({ length: 3 * group.loopsPerGateway }, async (_, loop) => {
      while (sent < group.sent) {
        const key = group.keys[sent++ % group.keys.length]!;
        for (;;) {
          const res = await stack.send(key.key, loop % 3, '/v1/plan');
          const body = await res.text();
          const code = res.status === 200 ? undefined : (JSON.parse(body) as { code: string }).code;
          if (res.status === 503 && code === 'gateway_overloaded') continue;
          const h = (name: string) => res.headers.get(name);
          group.answers.push({
            status: res.status,
            code,
            limit: h('x-ratelimit-limit'),
            remaining: h('x-ratelimit-remaining'),
            credits: h('tollgate-credits-remaining'),
            retryAfter: h('retry-after'),
          });
          break;
        }
      }
    }),
  );
}

/** The sum over the three gateways' /metrics of every sample `pattern` matches (its first group). */
async function summed(pattern: RegExp): Promise<number> {
  let sum = 0;
  for (const gateway of stack.gateways()) {
    const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    for (const match of text.matchAll(pattern)) sum += Number(match[1]);
  }
  return sum;
}

function codes(answers: Answer[]): Record<string, number> {
  const counted: Record<string, number> = {};
  for (const a of answers) counted[a.code ?? 'ok'] = (counted[a.code ?? 'ok'] ?? 0) + 1;
  return counted;
}

describe('many keys of every kind at once over three gateways', { timeout: 400_000 }, () => {
  it('admit exactly each limit, ban at the count, spend balances exactly, and tell each key its own numbers', async () => {
    await awayFromDayEdge(300);
    const owner = `acme-${Date.now()}`;
    const group = (name: string, keys: CreatedKey[], limit: number, loopsPerGateway = 1, sent = limit + OVER): Group => ({
      name,
      keys,
      limit,
      sent,
      loopsPerGateway,
      answers: [],
    });
    const fixed = await Promise.all(
      FIXED.map(async (limit) =>
        group(`fixed-${limit}`, [await stack.newKey(['--plan', 'fixed', '--per-minute', `${limit}`, '--per-day', `${limit}`])], limit),
      ),
    );
    const cells = [
      group('cells11', [await stack.newKey(['--plan', 'cells11'])], 11),
      group('cells12', [await stack.newKey(['--plan', 'cells12'])], 12),
    ];
    const team = group('team', await Promise.all([1, 2, 3].map(() => stack.newKey(['--plan', 'team', '--owner', owner]))), 13, 2);
    const prepaid = await Promise.all(
      [8, 14].map(async (balance) => {
        const key = await stack.newKey(['--plan', 'prepaid']);
        expect(
          (await keysCli(stack.redis(), ['credits', 'set', key.id, `${balance}`, '--reason', 'test', '--json'], stack.configDir())).code,
        ).toBe(0);
        return group(`prepaid-${balance}`, [key], balance, 2, balance + 30);
      }),
    );
    const hot = group('hot', [await stack.newKey(['--plan', 'hot'])], 150, 4, 400);
    const groups = [...fixed, ...cells, team, ...prepaid, hot];
    // Which keys Redis was asked about together in one packed call (its MONITOR of EVALSHAs).
    const multiSha = createHash('sha1').update(MULTI_QUOTA_SCRIPT).digest('hex');
    const client = stack.redis().client();
    const monitor = await client.monitor();
    const packs: string[][] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args[0]?.toLowerCase() === 'evalsha' && args[1] === multiSha) packs.push(args.slice(3, 3 + Number(args[2])));
    });
    await Promise.all(groups.map(drive));
    monitor.disconnect();
    client.disconnect();

    const summary = Object.fromEntries(groups.map((g) => [g.name, codes(g.answers)]));
    const recalls = await summed(/^tollgate_quota_recalls_total (\d+)$/gm);
    const leased = await summed(/^tollgate_quota_decisions_total\{[^}]*source="lease"[^}]*\} (\d+)$/gm);
    const widest = Math.max(0, ...packs.map((keys) => keys.length));
    console.log('many keys over three gateways:', summary, { packedCalls: packs.length, widest, leased, recalls });
    // The run reached what it is about: calls packing several keys, and the hot key's leases recalled.
    expect(widest).toBeGreaterThanOrEqual(3);
    expect(leased).toBeGreaterThan(0);
    for (const g of groups) {
      const admitted = g.answers.filter((a) => a.status === 200);
      expect(admitted.length, `${g.name} admitted`).toBe(g.limit);
      if (g.name.startsWith('prepaid')) {
        // Spent exactly what was admitted: the balance is 0, never below, and the rest were 402.
        expect(summary[g.name]).toEqual({ ok: g.limit, insufficient_credits: g.sent - g.limit });
        const shown = await keysCli(stack.redis(), ['credits', 'show', g.keys[0]!.id, '--json'], stack.configDir());
        expect(JSON.parse(shown.stdout)).toMatchObject({ credits: 0 });
        for (const a of admitted) expect(Number(a.credits)).toBeGreaterThanOrEqual(0);
        continue;
      }
      expect(summary[g.name], g.name).toEqual({
        ok: g.limit,
        rate_limit_exceeded: AFTER_REJECTIONS - 1,
        api_key_banned: g.sent - g.limit - (AFTER_REJECTIONS - 1),
      });
      // Every answer names this key's (or owner's) own limit, never another key's.
      for (const a of g.answers) expect(a.limit, `${g.name} X-RateLimit-Limit`).toBe(String(g.limit));
      for (const a of g.answers.filter((x) => x.status === 429)) expect(Number(a.retryAfter)).toBeGreaterThanOrEqual(1);
      // Decided in Redis one by one (no lease is granted with fewer than spread × replicas × minBlock
      // units left, 32 as shipped: only the hot key has leases), each admission's Remaining is its own count.
      if (g.name !== 'hot')
        expect(
          admitted.map((a) => Number(a.remaining)).sort((x, y) => x - y),
          `${g.name} Remaining`,
        ).toEqual(Array.from({ length: g.limit }, (_, i) => i));
      else for (const a of admitted) expect(Number(a.remaining)).toBeLessThan(g.limit);
    }
  });
});
