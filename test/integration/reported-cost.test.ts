import { get, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { h2Session } from '../helpers/h2-client.js';
import { TestCerts } from '../helpers/tls-certs.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { pollUntil } from '../helpers/poll.js';
import { TestRedis } from '../helpers/redis-server.js';
import {
  bearer,
  configCopy,
  createKey,
  keysCli,
  slackRedisTimeout,
  startGateway,
  startGateways,
  type GatewayHandle,
} from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// A cost the upstream reports (routes.costs `cost: { fromResponseHeader, fromTrailer, reserve, max }`)
// on three real gateways sharing one real redis-server, gateway.yaml as shipped (quota leases on),
// in front of a real upstream that reports costs in a header, in a trailer, too much, nothing,
// garbage, or dies mid-answer. Each request reserves 10 units before it is forwarded and is
// settled once its answer is over: the day window (minute limits are out of reach, so only the
// day counts here, away from midnight) and the credit balance change by exactly the settled costs.

const PLANS = `
plans:
  metered: { perMinute: 10000000, perDay: 100000000 }
  prepaid: { perMinute: 10000000, perDay: 100000000, credits: required }
ban: { afterRejections: 1000, window: 60, duration: 60 }
`;
const COSTS = `  costs:
    - { method: GET, path: "/v1/metered/{kind}", cost: { fromResponseHeader: x-usage-units, fromTrailer: x-usage-final, reserve: 10, max: 1000 } }
    - { method: GET, path: "/v1/shown/{kind}", cost: { fromResponseHeader: x-usage-units, fromTrailer: x-usage-final, reserve: 10, max: 1000, forwardHeader: true } }`;

/** The upstream: `/v1/<any>/<kind>?units=N` answers as `kind` says; `hold` keeps its answer open until released. */
const held: ServerResponse[] = [];
function reportCost(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://upstream');
  const units = url.searchParams.get('units') ?? '0';
  const kind = url.pathname.split('/')[3];
  switch (kind) {
    case 'header':
      res.setHeader('x-usage-units', units);
      return void res.end('ok');
    case 'trailer':
      // A streamed answer: the cost is known at its end (a header says otherwise: the trailer wins).
      res.setHeader('trailer', 'x-usage-final');
      res.setHeader('x-usage-units', '999');
      res.write('part one, ');
      res.addTrailers({ 'x-usage-final': units });
      return void res.end('part two');
    case 'none':
      return void res.end('ok');
    case 'garbage':
      res.setHeader('x-usage-units', units);
      return void res.end('ok');
    case 'refuse':
      return void req.socket.destroy();
    case 'die':
      res.setHeader('x-usage-units', units);
      res.write('the beginning of a long answer');
      setTimeout(() => req.socket.destroy(), 50);
      return;
    case 'hold':
      res.write('the beginning of a long answer');
      held.push(res);
      return;
    default:
      res.statusCode = 404;
      res.end();
  }
}

let redis: TestRedis;
let upstream: EchoUpstream;
let configDir = '';
const gateways: GatewayHandle[] = [];
beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  upstream.behaviour = reportCost;
  // A service whose every request reports its cost (no routes.costs rule matches its paths).
  const service = `services:\n  - { name: svc, paths: [/v1/svc], targets: ["${upstream.url}"], cost: { fromResponseHeader: x-usage-units, reserve: 5, max: 50 } }`;
  configDir = configCopy({
    'plans.yaml': () => PLANS,
    'gateway.yaml': (yaml) =>
      slackRedisTimeout(yaml)
        .replace(/^ {2}costs: \[\].*$/m, COSTS)
        .replace(/^services: \[\].*$/m, service),
  });
  gateways.push(...(await startGateways(3, { redisUrl: redis.url, upstreamUrl: upstream.url, configDir })));
}, 180_000);
afterAll(async () => {
  for (const res of held) res.destroy();
  await Promise.all(gateways.map((g) => g.process.stop()));
  await upstream?.stop();
  await redis?.stop();
});

const cli = async <T>(args: string[]) => JSON.parse((await keysCli(redis, [...args, '--json'], configDir)).stdout) as T;
const dayUsed = async (id: string) => (await cli<{ day: { used: number } }>(['usage', id])).day.used;
const creditsOf = async (id: string) => (await cli<{ credits: number }>(['credits', 'show', id])).credits;
const send = (key: string, i: number, path: string) => fetch(`${gateways[i % gateways.length]!.url}${path}`, { headers: bearer(key) });

/** The key's day count once it is `expected` (settlements go out after the answers), or the last one read at the deadline. */
const dayReaches = (id: string, expected: number, ms = 30_000) =>
  pollUntil(
    () => dayUsed(id),
    (used) => used === expected,
    { deadline: Date.now() + ms, everyMs: 100 },
  );

/** A GET by node:http, which hands the client the trailers (fetch does not). */
function withTrailers(url: string, key: string): Promise<{ status: number; body: string; trailers: NodeJS.Dict<string> }> {
  return new Promise((resolve, reject) => {
    get(url, { headers: bearer(key) }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body, trailers: res.trailers }));
    }).on('error', reject);
  });
}

/** A counter's total over the three gateways' /metrics (the samples of `name` whose labels contain `labels`). */
async function metricTotal(name: string, labels = ''): Promise<number> {
  let total = 0;
  for (const gateway of gateways) {
    const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (!line.startsWith(name) || !line.includes(labels)) continue;
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return total;
}

/** Waits until `count` more reservations have been decided (settlements counted by outcome) than `before`. */
async function settled(before: number, count: number): Promise<void> {
  const total = await pollUntil(
    () => metricTotal('tollgate_cost_settlements_total{'),
    (n) => n >= before + count,
    {
      deadline: Date.now() + 30_000,
    },
  );
  expect(total).toBe(before + count);
}

describe('a cost the upstream reports, over three gateways on Redis', { timeout: 240_000 }, () => {
  it('settles each answer once: the reported cost from a header or a trailer, capped at max, the reservation when nothing or garbage is reported, nothing when no answer came', async () => {
    await awayFromDayEdge(60);
    const key = await createKey(redis, ['--plan', 'metered'], configDir);
    const before = await metricTotal('tollgate_cost_settlements_total{');
    const cases: Array<[path: string, status: number, charged: number]> = [
      ['/v1/metered/header?units=25', 200, 25],
      ['/v1/metered/header?units=0', 200, 0],
      ['/v1/metered/trailer?units=3', 200, 3],
      ['/v1/metered/header?units=5000', 200, 1000],
      ['/v1/metered/none', 200, 10],
      ['/v1/metered/garbage?units=lots', 200, 10],
      ['/v1/metered/garbage?units=-5', 200, 10],
      ['/v1/metered/garbage?units=2.5', 200, 10],
      ['/v1/metered/refuse', 502, 0],
    ];
    let expected = 0;
    for (const [i, [path, status, charged]] of cases.entries()) {
      const res = await send(key.key, i, path);
      expect(res.status, path).toBe(status);
      // The upstream's field is not the client's: removed (unless forwardHeader).
      expect(res.headers.get('x-usage-units'), path).toBeNull();
      await res.text();
      expected += charged;
    }
    await settled(before, cases.length);
    expect(await dayReaches(key.id, expected)).toBe(expected);
    expect(await metricTotal('tollgate_cost_settlements_total{', 'outcome="capped"')).toBeGreaterThanOrEqual(1);
    expect(await metricTotal('tollgate_cost_settlements_total{', 'outcome="unreached"')).toBeGreaterThanOrEqual(1);
    // Settled once: a second look after every gateway's settlements went out finds the same count.
    expect(await dayUsed(key.id)).toBe(expected);
  });

  it('settles a service’s reported cost on every path of the service (its own reserve and max)', async () => {
    await awayFromDayEdge(60);
    const key = await createKey(redis, ['--plan', 'metered'], configDir);
    for (const [i, path] of ['/v1/svc/header?units=70', '/v1/svc/none', '/v1/svc/header?units=2'].entries()) {
      const res = await send(key.key, i, path);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-usage-units')).toBeNull();
      await res.text();
    }
    // 50 (capped), 5 (the reservation), 2.
    expect(await dayReaches(key.id, 57)).toBe(57);
  });

  it('an answer that dies mid-way keeps its reservation, whatever its header said; forwardHeader keeps the field and the trailer', async () => {
    await awayFromDayEdge(60);
    const key = await createKey(redis, ['--plan', 'metered'], configDir);
    const before = await metricTotal('tollgate_cost_settlements_total{');
    const died = await send(key.key, 0, '/v1/metered/die?units=400');
    expect(died.status).toBe(200);
    await expect(died.text()).rejects.toThrow();
    await settled(before, 1);
    expect(await dayUsed(key.id)).toBe(10);

    const shown = await send(key.key, 1, '/v1/shown/header?units=7');
    expect(shown.headers.get('x-usage-units')).toBe('7');
    await shown.text();
    // The trailer too, relayed to the client at the end of the streamed answer (and it is what counts).
    const trailed = await withTrailers(`${gateways[2]!.url}/v1/shown/trailer?units=4`, key.key);
    expect([trailed.status, trailed.body, trailed.trailers['x-usage-final']]).toEqual([200, 'part one, part two', '4']);
    await settled(before, 3);
    expect(await dayReaches(key.id, 21)).toBe(21);
  });

  it('spends credits by the reported costs under 3 × 30 loops with leases on: never below zero, the balance change is the settled costs less the shortfall', async () => {
    await awayFromDayEdge(120);
    const key = await createKey(redis, ['--plan', 'prepaid'], configDir);
    await cli(['credits', 'add', key.id, '3000', '--reason', 'test balance']);
    const shortfallBefore = await metricTotal('tollgate_credit_shortfall_units_total');
    const settledBefore = await metricTotal('tollgate_cost_settlements_total{');
    let admitted = 0;
    let reported = 0;
    const balances: number[] = [];
    await Promise.all(
      Array.from({ length: 90 }, async (_, loop) => {
        for (let n = 0; ; n++) {
          // 0 … 40 units: some under the reservation (given back), some over (charged more).
          const units = (loop * 7 + n * 13) % 41;
          const res = await send(key.key, loop, `/v1/metered/header?units=${units}`);
          const text = await res.text();
          // Shed by a replica too busy to hear Redis in time (a loaded machine): nothing reserved, send again.
          if (res.status === 503 && text.includes('"gateway_overloaded"')) continue;
          balances.push(Number(res.headers.get('tollgate-credits-remaining')));
          if (res.status === 402) return;
          expect(res.status).toBe(200);
          admitted++;
          reported += units;
        }
      }),
    );
    await settled(settledBefore, admitted);
    expect(await dayReaches(key.id, reported)).toBe(reported);
    const shortfall = (await metricTotal('tollgate_credit_shortfall_units_total')) - shortfallBefore;
    const balance = await creditsOf(key.id);
    expect(balance).toBeGreaterThanOrEqual(0);
    expect(Math.min(...balances)).toBeGreaterThanOrEqual(0);
    expect(3000 - balance).toBe(reported - shortfall);
  });

  it('counts a hot key’s reported costs exactly with leases on (reservations admitted from leases, settled through Redis)', async () => {
    await awayFromDayEdge(120);
    const key = await createKey(redis, ['--plan', 'metered'], configDir);
    const settledBefore = await metricTotal('tollgate_cost_settlements_total{');
    const leasedBefore = await metricTotal('tollgate_quota_decisions_total{', 'source="lease"');
    let reported = 0;
    const requests = 3 * 30 * 8;
    await Promise.all(
      Array.from({ length: 90 }, async (_, loop) => {
        for (let n = 0; n < 8; n++) {
          const units = (loop * 5 + n * 11) % 31;
          const res = await send(key.key, loop, `/v1/metered/header?units=${units}`);
          expect(res.status).toBe(200);
          await res.text();
          reported += units;
        }
      }),
    );
    await settled(settledBefore, requests);
    // Some reservations were admitted from leases (the key ran hot), and settled through Redis all the same.
    expect(await metricTotal('tollgate_quota_decisions_total{', 'source="lease"')).toBeGreaterThan(leasedBefore);
    // Leased units come back when the leases end: from then on the day holds exactly the settled costs.
    expect(await dayReaches(key.id, reported, 60_000)).toBe(reported);
  });

  it('settles a streamed answer to an HTTP/2 client by its trailer, and relays the trailer there when forwarded', async () => {
    await awayFromDayEdge(60);
    const certs = new TestCerts();
    const pair = certs.make('gateway');
    const tls = await startGateway({
      REDIS_URL: redis.url,
      UPSTREAM_URL: upstream.url,
      TOLLGATE_CONFIG_DIR: configDir,
      GATEWAY_TLS_CERT: pair.cert,
      GATEWAY_TLS_KEY: pair.key,
    });
    const session = await h2Session(tls.url);
    try {
      const key = await createKey(redis, ['--plan', 'metered'], configDir);
      const stream = (path: string) =>
        new Promise<{ status: number; body: string; trailers: IncomingHttpHeaders }>((resolve, reject) => {
          const request = session.request({ ':path': path, ...bearer(key.key) });
          let status = 0;
          let body = '';
          let trailers: IncomingHttpHeaders = {};
          request.on('response', (headers) => (status = Number(headers[':status'])));
          request.on('trailers', (t) => (trailers = t));
          request.setEncoding('utf8');
          request.on('data', (chunk: string) => (body += chunk));
          request.on('end', () => resolve({ status, body, trailers }));
          request.on('error', reject);
        });
      const stripped = await stream('/v1/metered/trailer?units=2');
      expect([stripped.status, stripped.body, stripped.trailers['x-usage-final']]).toEqual([200, 'part one, part two', undefined]);
      const forwarded = await stream('/v1/shown/trailer?units=6');
      expect([forwarded.status, forwarded.trailers['x-usage-final']]).toEqual([200, '6']);
      expect(await dayReaches(key.id, 8)).toBe(8);
    } finally {
      session.close();
      await tls.process.stop();
      certs.remove();
    }
  });

  // Last: it kills a gateway.
  it('keeps the reservation of an answer under way when its replica is killed (-9), and settles nothing twice', async () => {
    await awayFromDayEdge(60);
    const key = await createKey(redis, ['--plan', 'metered'], configDir);
    const victim = gateways[2]!;
    const res = await fetch(`${victim.url}/v1/metered/hold?units=300`, { headers: bearer(key.key) });
    expect(res.status).toBe(200);
    await pollUntil(
      async () => held.length,
      (n) => n > 0,
      { deadline: Date.now() + 10_000 },
    );
    await victim.process.stop('SIGKILL');
    await expect(res.text()).rejects.toThrow();
    // The upstream finishes its answer and reports a cost nobody is left to settle.
    for (const answer of held.splice(0)) {
      answer.addTrailers({ 'x-usage-final': '300' });
      answer.end();
    }
    expect(await dayUsed(key.id)).toBe(10);
    // The other replicas go on settling that key's answers, once each.
    const next = await send(key.key, 0, '/v1/metered/header?units=4');
    await next.text();
    expect(await dayReaches(key.id, 14)).toBe(14);
  });
});
