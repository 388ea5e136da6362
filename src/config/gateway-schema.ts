import { z } from 'zod';

// Schema of config/gateway.yaml. Environment variables override some fields (see env.ts).

const port = z.number().int().min(0).max(65535);
const host = z.string().min(1);
const ms = (min: number, max: number) => z.number().int().min(min).max(max);

export const gatewayFileSchema = z.strictObject({
  gateway: z.strictObject({
    host: host.default('0.0.0.0'),
    port: port.default(8080),
    /** Seconds in-flight requests get to finish after SIGTERM before the process exits anyway. */
    shutdownGraceSeconds: z.number().int().min(0).max(300).default(10),
  }).prefault({}),
  admin: z.strictObject({
    host: host.default('127.0.0.1'),
    port: port.default(9090),
  }).prefault({}),
  backend: z.strictObject({
    host: host.default('127.0.0.1'),
    port: port.default(8081),
    /** Largest request body the category service reads, in bytes; larger ones get 413. */
    maxBodyBytes: z.number().int().min(1).max(10 * 1024 * 1024).default(65536),
  }).prefault({}),
  upstream: z.strictObject({
    url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).default('http://127.0.0.1:8081'),
    /** Time the upstream gets to start answering; past it the client gets 504. */
    timeoutMs: ms(1, 600_000).default(15_000),
    /** Keep-alive sockets kept open to the upstream. */
    maxSockets: z.number().int().min(1).max(65536).default(512),
  }).prefault({}),
  redis: z.strictObject({
    /** Empty: the embedded in-memory store (one process only). REDIS_URL overrides. */
    url: z.string().default(''),
    /** Per-command timeout: a slow Redis must never stall requests. */
    commandTimeoutMs: ms(10, 10_000).default(250),
  }).prefault({}),
  quota: z.strictObject({
    /**
     * What quotas do while Redis is unreachable: `local` (each replica enforces its share of
     * every limit in memory and marks responses degraded), `open` (admit everything) or
     * `closed` (503 rate_limit_store_unavailable).
     */
    onRedisFailure: z.enum(['local', 'open', 'closed']).default('local'),
    /** Gateway replicas sharing the load; in `local` mode each enforces 1/replicas of a limit. */
    replicas: z.number().int().min(1).max(1000).default(1),
  }).prefault({}),
  unauthenticated: z.strictObject({
    /** Failed authentications allowed per client address per minute before 429s (anti-guessing). */
    perMinute: z.number().int().min(1).max(1_000_000).default(60),
  }).prefault({}),
  keyCache: z.strictObject({
    /** Seconds a validated key record is served from memory; revocations are pushed at once anyway. */
    ttlSeconds: z.number().int().min(0).max(3600).default(30),
    /** Seconds a key validated before Redis became unreachable stays usable from memory. */
    staleSeconds: z.number().int().min(0).max(86_400).default(300),
    /** Most key records held per process (bounded memory under millions of keys). */
    maxEntries: z.number().int().min(1).max(10_000_000).default(100_000),
  }).prefault({}),
});

export type GatewayFile = z.infer<typeof gatewayFileSchema>;
