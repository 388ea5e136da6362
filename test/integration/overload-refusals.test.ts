import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { TestRedis } from '../helpers/redis-server.js';
import {
  bearer,
  configCopy,
  createKey,
  slackRedisTimeout,
  startGateways,
  testPlans,
  withLeases,
  withRulesAndAnonymous,
  type GatewayHandle,
} from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// Sustained overload costs Redis almost nothing per refusal (docs/performance.md, "Overload"):
// three real gateway processes on one real redis-server, 30 keep-alive loops sending a fixed
// number of requests, Redis's own count of the commands it ran (INFO commandstats: a count, not a
// timing). A plan key far over its limit is refused until its ban, at exactly ban.afterRejections
// refusals across the replicas, then answered from each replica's ban cache
// (gateway/local-verdicts.ts), with quota leases on (shipped) and off, and with a lease out when
// the limit is reached (its recall). An anonymous caller over a per-address limit rule is never
// banned (a rule's refusal counts towards no ban), so each replica answers the rule's refusal from
// memory until the rule could fit again (gateway/rule-refusals.ts): a fixed window and a gcra rule.
// Every key and rule here has a day window, so no minute edge during a run changes a count.

const AFTER_REJECTIONS = 20;
const LOOPS = 30;
const REQUESTS = 3000;
const RULES = `limits:
  - { name: fixed-per-address, match: { path: /v1/categories }, by: [client.address], perDay: 30 }
  - { name: cells-per-address, match: { path: /v1/pets }, by: [client.address], perDay: 30, algorithm: gcra, burst: 30 }
`;

let redis: TestRedis;
let upstream: EchoUpstream;

beforeAll(async () => {
  [redis, upstream] = await Promise.all([TestRedis.start(), new EchoUpstream().start()]);
});

afterAll(async () => {
  await upstream?.stop();
  await redis?.stop();
});

/** Commands Redis has run by name (its INFO commandstats), scripts' inner commands included, INFO's own left out. */
async function commandsRun(): Promise<Map<string, number>> {
  const stats = await redis.client().info('commandstats');
  const byName = new Map<string, number>();
  for (const [, name, calls] of stats.matchAll(/cmdstat_([^:]+):calls=(\d+)/g)) if (name !== 'info') byName.set(name!, Number(calls));
  return byName;
}

/** What ran between two readings: by name (reported), and the total (asserted). */
function ranBetween(before: Map<string, number>, after: Map<string, number>) {
  const byName: Record<string, number> = {};
  let total = 0;
  for (const [name, calls] of after) {
    const ran = calls - (before.get(name) ?? 0);
    if (ran > 0) byName[name] = ran;
    total += ran;
  }
  return { total, byName };
}

/** `total` requests from LOOPS keep-alive loops over `gateways` (loop i on gateway i mod 3): the answers' codes, and the commands Redis ran meanwhile. */
async function overload(gateways: GatewayHandle[], path: string, headers: Record<string, string>, total = REQUESTS) {
  const codes = new Map<string, number>();
  const before = await commandsRun();
  let sent = 0;
  await Promise.all(
    Array.from({ length: LOOPS }, async (_, loop) => {
      const url = `${gateways[loop % gateways.length]!.url}${path}`;
      while (sent < total) {
        sent++;
        const res = await fetch(url, { headers, signal: AbortSignal.timeout(60_000) });
        const code = res.status === 200 ? 'ok' : ((await res.json()) as { code: string }).code;
        if (res.status === 200) await res.arrayBuffer();
        codes.set(code, (codes.get(code) ?? 0) + 1);
      }
    }),
  );
  const { total: commands, byName } = ranBetween(before, await commandsRun());
  const refused = total - (codes.get('ok') ?? 0);
  return { codes: Object.fromEntries(codes), commands, byName, perRefusal: commands / refused };
}

function configWith(leases: boolean): string {
  return configCopy({
    'plans.yaml': () =>
      testPlans(2, { afterRejections: AFTER_REJECTIONS, window: 600, duration: 900 }).replace(
        'plans:\n',
        'plans:\n  public: { perMinute: 1000000, perDay: 1000000 }\n',
      ),
    'gateway.yaml': (text) =>
      withRulesAndAnonymous(RULES, 'public', ['/v1/categories', '/v1/pets'])(withLeases(leases)(slackRedisTimeout(text))),
  });
}

for (const leases of [true, false]) {
  describe(`sustained overload, quota leases ${leases ? 'on (shipped)' : 'off'}`, () => {
    let gateways: GatewayHandle[];
    let configDir: string;

    beforeAll(async () => {
      configDir = configWith(leases);
      gateways = await startGateways(3, { redisUrl: redis.url, upstreamUrl: upstream.url, configDir });
    }, 600_000);

    afterAll(async () => {
      await Promise.all(gateways?.map((g) => g.process.stop()) ?? []);
    });

    it('a used-up plan key: banned at exactly the configured count, ≤ 0.1 Redis commands per refusal', async () => {
      await awayFromDayEdge(120);
      const { key } = await createKey(redis, ['--plan', 'free', '--per-minute', '2', '--per-day', '2'], configDir);
      const run = await overload(gateways, '/v1/plan', bearer(key));
      console.log(`plan key used up, leases ${leases}:`, run);
      expect(run.codes).toEqual({
        ok: 2,
        rate_limit_exceeded: AFTER_REJECTIONS - 1,
        api_key_banned: REQUESTS - 2 - (AFTER_REJECTIONS - 1),
      });
      expect(run.perRefusal).toBeLessThanOrEqual(0.1);
    }, 600_000);

    it('a key reaching its limit under the overload (leases out, then recalled): exact, banned at the count', async () => {
      await awayFromDayEdge(120);
      const { key } = await createKey(redis, ['--plan', 'free', '--per-minute', '300', '--per-day', '300'], configDir);
      const run = await overload(gateways, '/v1/plan', bearer(key), 2 * REQUESTS);
      console.log(`plan key reaching its limit, leases ${leases}:`, run);
      expect(run.codes).toEqual({
        ok: 300,
        rate_limit_exceeded: AFTER_REJECTIONS - 1,
        api_key_banned: 2 * REQUESTS - 300 - (AFTER_REJECTIONS - 1),
      });
      // At most one script call per admission and per refusal to the ban, plus the requests in
      // flight when a replica learns of the ban, each decided again after a recall, and the leases'
      // grants: no recall per refusal, nothing per banned request. Without the ban cache, ~5,700.
      const scripts = (run.byName.evalsha ?? 0) + (run.byName.eval ?? 0);
      expect(scripts).toBeLessThanOrEqual(300 + AFTER_REJECTIONS + 3 * 2 * LOOPS + 100);
    }, 600_000);

    if (!leases) return;

    for (const [path, rule] of [
      ['/v1/categories', 'fixed-per-address'],
      ['/v1/pets', 'cells-per-address'],
    ] as const) {
      it(`an anonymous caller over the ${rule} rule: exactly its limit, ≤ 0.1 Redis commands per refusal, never banned`, async () => {
        await awayFromDayEdge(120);
        const run = await overload(gateways, path, {});
        console.log(`anonymous over ${rule}:`, run);
        expect(run.codes).toEqual({ ok: 30, rate_limit_exceeded: REQUESTS - 30 });
        expect(run.perRefusal).toBeLessThanOrEqual(0.1);
      }, 600_000);
    }
  });
}
