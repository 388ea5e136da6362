// A Fastify gateway built from the ecosystem's parts: @fastify/http-proxy (undici, keep-alive
// pool) and @fastify/rate-limit with its Redis store, keyed on the API key id, after an onRequest
// hook that reads the key record from tollgate's Redis (HGETALL, hash compared). One window (the
// plugin has one limit per route: the key's per-minute quota), two Redis round trips per request,
// no access log (Fastify's logger off). A benchmark peer, run as its own process:
//   node --import tsx bench/peers/fastify-gateway.ts <upstream-url>   (REDIS_URL in the environment)
import httpProxy from '@fastify/http-proxy';
import rateLimit from '@fastify/rate-limit';
import Fastify, { type FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { hashApiKey, parseApiKey, sameHash } from '../../src/keys/format.js';
import { keyRecordKey } from '../../src/store/redis/redis-keys.js';
import { assertionFor, identify } from './identity.js';

const upstream = process.argv[2];
if (!upstream || !process.env.REDIS_URL) {
  process.stderr.write('usage: REDIS_URL=… node --import tsx bench/peers/fastify-gateway.ts <upstream-url>\n');
  process.exit(2);
}
const redis = new Redis(process.env.REDIS_URL);

interface Consumer {
  id: string;
  plan: string;
  perMinute: number;
  assertion: string;
}
const consumers = new WeakMap<FastifyRequest, Consumer>();

const app = Fastify({ logger: false, keepAliveTimeout: 65_000, requestTimeout: 60_000 });
app.addHook('onRequest', async (request, reply) => {
  const key = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1];
  const id = key ? parseApiKey(key) : null;
  const record = id ? await redis.hgetall(keyRecordKey(id)) : {};
  if (!key || !id || !record.hash || record.status !== 'active' || !sameHash(record.hash, hashApiKey(key))) {
    return reply.code(401).send({ code: 'invalid_api_key', message: 'invalid API key', status: 401 });
  }
  const plan = record.plan ?? '';
  consumers.set(request, { id, plan, perMinute: Number(record.perMinute ?? 60), assertion: await assertionFor(id, plan) });
});
await app.register(rateLimit, {
  redis,
  hook: 'preHandler',
  nameSpace: 'fastify-gateway-',
  timeWindow: 60_000,
  keyGenerator: (request) => consumers.get(request)!.id,
  max: async (request) => consumers.get(request)!.perMinute,
});
await app.register(httpProxy, {
  upstream,
  replyOptions: {
    rewriteRequestHeaders: (request, headers) => {
      const consumer = consumers.get(request as FastifyRequest)!;
      identify(headers, consumer.id, consumer.plan, consumer.assertion);
      return headers;
    },
  },
});

const url = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`${JSON.stringify({ msg: 'fastify gateway listening', url })}\n`);
const stop = () =>
  void app.close().finally(() => {
    redis.disconnect();
    process.exit(0);
  });
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
