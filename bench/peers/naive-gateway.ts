// A naive Node gateway, as a team would write one in an afternoon: http-proxy-3 with the same
// keep-alive agent as the bare proxy, the key record read from tollgate's Redis on every request
// (HGETALL, hash compared), and two rate-limiter-flexible Redis limiters, minute and day, consumed
// in parallel. Two or three Redis round trips per request, no access log, no metrics; the two
// windows are not consumed atomically (a request refused by one still counts in the other).
// A benchmark peer, run as its own process:
//   node --import tsx bench/peers/naive-gateway.ts <upstream-url>     (REDIS_URL in the environment)
import { Agent, createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxyServer } from 'http-proxy-3';
import { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { hashApiKey, parseApiKey, sameHash } from '../../src/keys/format.js';
import { keyRecordKey } from '../../src/store/redis/redis-keys.js';
import { assertionFor, identify } from './identity.js';
import { onStopSignal } from './stop.js';

const upstream = process.argv[2];
if (!upstream || !process.env.REDIS_URL) {
  process.stderr.write('usage: REDIS_URL=… node --import tsx bench/peers/naive-gateway.ts <upstream-url>\n');
  process.exit(2);
}
const redis = new Redis(process.env.REDIS_URL);

// One limiter pair per distinct quota (the benchmark's keys carry their own).
const limiters = new Map<string, [RateLimiterRedis, RateLimiterRedis]>();
function limitersFor(perMinute: number, perDay: number): [RateLimiterRedis, RateLimiterRedis] {
  const id = `${perMinute}/${perDay}`;
  let pair = limiters.get(id);
  if (!pair) {
    pair = [
      new RateLimiterRedis({ storeClient: redis, keyPrefix: `naive-minute-${perMinute}`, points: perMinute, duration: 60 }),
      new RateLimiterRedis({ storeClient: redis, keyPrefix: `naive-day-${perDay}`, points: perDay, duration: 86_400 }),
    ];
    limiters.set(id, pair);
  }
  return pair;
}

function reject(res: ServerResponse, status: number, code: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ code, message: code, status }));
}

const agent = new Agent({ keepAlive: true, maxSockets: 512, maxFreeSockets: 256, timeout: 60_000, scheduling: 'lifo' });
const proxy = createProxyServer({ target: upstream, agent, xfwd: true });

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const key = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
  const id = key ? parseApiKey(key) : null;
  if (!key || !id) return reject(res, 401, 'invalid_api_key');
  const record = await redis.hgetall(keyRecordKey(id));
  if (!record.hash || record.status !== 'active' || !sameHash(record.hash, hashApiKey(key))) return reject(res, 401, 'invalid_api_key');
  const [minute, day] = limitersFor(Number(record.perMinute ?? 60), Number(record.perDay ?? 1000));
  let used: RateLimiterRes;
  try {
    [used] = await Promise.all([minute.consume(id), day.consume(id)]);
  } catch (err) {
    if (!(err instanceof RateLimiterRes)) throw err;
    return reject(res, 429, 'rate_limit_exceeded', { 'retry-after': String(Math.max(1, Math.ceil(err.msBeforeNext / 1000))) });
  }
  res.setHeader('x-ratelimit-limit', String(record.perMinute));
  res.setHeader('x-ratelimit-remaining', String(used.remainingPoints));
  res.setHeader('x-ratelimit-reset', String(Math.ceil((Date.now() + used.msBeforeNext) / 1000)));
  identify(req.headers, id, record.plan ?? '', await assertionFor(id, record.plan ?? ''));
  proxy.web(req, res, {}, () => {
    if (res.headersSent) return void res.destroy();
    reject(res, 502, 'bad_gateway');
  });
}

const server = createServer(
  { headersTimeout: 10_000, requestTimeout: 60_000, keepAliveTimeout: 65_000, maxHeaderSize: 16 * 1024 },
  (req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) reject(res, 503, 'unavailable');
      else res.destroy();
    });
  },
);
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ msg: 'naive gateway listening', url: `http://127.0.0.1:${port}` })}\n`);
});
onStopSignal(server, () => {
  agent.destroy();
  redis.disconnect();
});
