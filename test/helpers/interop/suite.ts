import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestRedis } from '../redis-server.js';
import { describeNeeding } from '../needs-tool.js';
import { createKey, startGateway, type GatewayHandle } from '../stack.js';
import { PATHS, sha256, Site } from './site.js';
import type { InteropUpstream } from './upstream.js';
import { sleep, until } from './upstream.js';
import { endedCleanly, earlyAnswerThenMore, GatewayClient, HANG_BOUND_MS, measureIdleCloseMs } from './wire.js';

/** One real server under test, and what it is. */
export interface InteropTarget {
  /** Names the server in test titles. */
  server: string;
  /** Unset: the server can run here. Set: why not (a binary missing); the suite is skipped saying so. */
  missing?: string;
  /** HTTP/1.1 with keep-alive; false: HTTP/1.0, one connection per request. */
  keepAlive: boolean;
  /** The server reads a POST body and reports `{length, sha256}` (nginx reads and discards it). */
  echoesDigest: boolean;
  /** Paths that answer 413 before reading a large POST body. */
  earlyAnswerPaths: string[];
  /**
   * Set when the server closes the connection with the body still unread right after its early
   * answer, so the kernel resets it (RFC 9112 §9.6 asks for a lingering close instead): the reset
   * can reach the gateway before the answer is read, and undici then reports the failed body write
   * (EPIPE) rather than the 413 already in the socket. The client may get that as 502 bad_gateway;
   * everything else (no hang, later requests answered) must hold. The reason, for the reader.
   */
  resetsAfterEarlyAnswer?: string;
  start(site: Site): Promise<InteropUpstream>;
  /**
   * The same server with a short idle timeout (about 1 s; nginx's 100 ms), for the spaced
   * requests; unset: the one `start` gives has one already (Python's HTTP/1.0 server).
   */
  startShortIdle?(site: Site): Promise<InteropUpstream>;
}

/** Requests of the connection-reuse test; "a handful" of upstream connections is at most `REUSE_MAX_CONNECTIONS`. */
const REUSE_REQUESTS = 200;
const REUSE_MAX_CONNECTIONS = 5;
const EARLY_BODY_BYTES = 8 * 1024 * 1024;

/** The gateway (real process, Redis store, shipped config) in front of one upstream, with a key. */
class InteropStack {
  private constructor(
    readonly upstream: InteropUpstream,
    readonly gateway: GatewayHandle,
    readonly key: string,
  ) {}

  /** Owns `upstream` from here: stopped with the stack, or at once if the gateway does not start. */
  static async start(redis: TestRedis, upstream: InteropUpstream, key: string): Promise<InteropStack> {
    try {
      const gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: upstream.url });
      return new InteropStack(upstream, gateway, key);
    } catch (err) {
      await upstream.stop();
      throw err;
    }
  }

  client(): GatewayClient {
    return new GatewayClient(this.gateway.url, this.key);
  }

  get port(): number {
    return Number(new URL(this.gateway.url).port);
  }

  /** The upstream's counts once it has seen at least `requests` requests (its log may trail the answer). */
  async countsAfter(requests: number) {
    await until(async () => (await this.upstream.counts()).requests >= requests);
    return this.upstream.counts();
  }

  async stop(): Promise<void> {
    await this.gateway.process.stop();
    await this.upstream.stop();
  }
}

/**
 * The interop behaviours (issue 21, item 4), run against one real server behind a real gateway:
 * connection reuse counted at the server, GET/HEAD/POST, 204 and 304, a multi-megabyte streamed
 * body byte-exact, early 413 answers followed by more requests on the same client connection, and
 * GETs spaced around the server's idle timeout.
 */
export function describeInterop(target: InteropTarget): void {
  // Skipped where the server is not installed, saying so; never in CI, which installs it.
  describeNeeding(target.missing, `${target.server} behind the gateway`, () => describeBehaviours(target));
}

function describeBehaviours(target: InteropTarget): void {
  let redis: TestRedis;
  let site: Site;
  let key: string;
  let stack: InteropStack;
  beforeAll(async () => {
    redis = await TestRedis.start();
    site = Site.create(target.server);
    key = (await createKey(redis, ['--plan', 'enterprise'])).key;
    stack = await InteropStack.start(redis, await target.start(site), key);
  });
  afterAll(async () => {
    await stack?.stop();
    await redis?.stop();
    site?.remove();
  });

  describe(`${target.server} behind the gateway`, () => {
    const reuseTitle = target.keepAlive
      ? `${REUSE_REQUESTS} sequential GETs over one client connection open at most ${REUSE_MAX_CONNECTIONS} upstream connections`
      : `${REUSE_REQUESTS} sequential GETs over one client connection are all answered, one upstream connection each (HTTP/1.0 closes)`;
    it(reuseTitle, async () => {
      const before = await stack.upstream.counts();
      const client = stack.client();
      const statuses: number[] = [];
      for (let i = 0; i < REUSE_REQUESTS; i++) statuses.push((await client.request('GET', PATHS.json)).status);
      await client.close();
      const after = await stack.countsAfter(before.requests + REUSE_REQUESTS);
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      expect(client.connects).toBe(1);
      expect(after.requests - before.requests).toBe(REUSE_REQUESTS);
      const opened = after.connections - before.connections;
      if (target.keepAlive) expect(opened).toBeLessThanOrEqual(REUSE_MAX_CONNECTIONS);
      else expect(opened).toBe(REUSE_REQUESTS);
    });

    it('GET, POST and HEAD pass through, one after another on one client connection', async () => {
      const client = stack.client();
      const get = await client.request('GET', PATHS.json);
      expect(get.status).toBe(200);
      expect(get.body.equals(site.json)).toBe(true);
      expect(String(get.headers['content-type'])).toMatch(/^application\/json/);

      const body = randomBytes(256 * 1024);
      const post = await client.request('POST', PATHS.echo, { body });
      expect(post.status).toBe(200);
      if (target.echoesDigest) expect(JSON.parse(post.body.toString())).toEqual({ length: body.length, sha256: sha256(body) });

      const again = await client.request('GET', PATHS.json);
      expect(again.status).toBe(200);
      expect(again.body.equals(site.json)).toBe(true);
      expect(client.connects).toBe(1);

      // Last: undici closes its own connection after a HEAD (it sends `Connection: close`, against
      // servers that send a body anyway; undici issue 258), so a GET after it reconnects.
      const head = await client.request('HEAD', PATHS.json);
      expect(head.status).toBe(200);
      expect(head.body.length).toBe(0);
      expect(head.headers['content-length'] ?? String(site.json.length)).toBe(String(site.json.length));
      const afterHead = await client.request('GET', PATHS.json);
      expect(afterHead.body.equals(site.json)).toBe(true);
      await client.close();
    });

    it('204 and 304 pass through without a body, and the client connection goes on', async () => {
      const client = stack.client();
      const empty = await client.request('GET', PATHS.empty);
      expect(empty.status).toBe(204);
      expect(empty.body.length).toBe(0);

      const first = await client.request('GET', PATHS.json);
      const etag = first.headers.etag;
      expect(typeof etag).toBe('string');
      const notModified = await client.request('GET', PATHS.json, { headers: { 'if-none-match': String(etag) } });
      expect(notModified.status).toBe(304);
      expect(notModified.body.length).toBe(0);

      const after = await client.request('GET', PATHS.json);
      expect(after.status).toBe(200);
      expect(after.body.equals(site.json)).toBe(true);
      await client.close();
      expect(client.connects).toBe(1);
    });

    it('an 8 MiB streamed response arrives byte-exact (sha256), and the client connection goes on', async () => {
      const client = stack.client();
      const big = await client.request('GET', PATHS.big);
      expect(big.status).toBe(200);
      expect(big.body.length).toBe(site.bigBytes);
      expect(sha256(big.body)).toBe(site.bigSha256);
      const next = await client.request('GET', PATHS.json);
      expect(next.status).toBe(200);
      await client.close();
    });

    for (const path of target.earlyAnswerPaths) {
      it(
        `an early 413 (${path}) to an 8 MiB POST: every later request on that client connection is answered or cleanly closed, never left hanging`,
        async () => {
          const outcome = await earlyAnswerThenMore(stack.port, key, {
            path,
            bodyBytes: EARLY_BODY_BYTES,
            getPath: PATHS.json,
            followUps: 3,
          });
          const summary = { statuses: outcome.responses.map((r) => r.status), requestsSent: outcome.requestsSent, closed: outcome.closed };
          expect(outcome.hung, JSON.stringify(summary)).toBeUndefined();
          const firstAllowed = target.resetsAfterEarlyAnswer ? [413, 502] : [413];
          expect(firstAllowed, JSON.stringify(summary)).toContain(outcome.responses[0]?.status);
          expect(outcome.responses.slice(1).filter((r) => r.status !== 200)).toEqual([]);
          expect(endedCleanly(outcome), JSON.stringify(summary)).toBe(true);
          // And the gateway serves the next client as before.
          const client = stack.client();
          expect((await client.request('GET', PATHS.json)).status).toBe(200);
          await client.close();
        },
        2 * HANG_BOUND_MS + 10_000,
      );
    }

    describe('GETs spaced around the upstream idle timeout', () => {
      let spaced: InteropStack;
      beforeAll(async () => {
        spaced = target.startShortIdle ? await InteropStack.start(redis, await target.startShortIdle(site), key) : stack;
      });
      afterAll(async () => {
        if (spaced && spaced !== stack) await spaced.stop();
      });

      it(
        'land just before, at and just after the moment it closes idle connections: no 502',
        async () => {
          const idleMs = await measureIdleCloseMs(spaced.upstream.url, PATHS.json);
          expect(idleMs, 'the upstream closes idle connections (measured on the wire)').toBeDefined();
          const client = spaced.client();
          const overheadMs = await gatewayOverheadMs(spaced, client);
          const statuses: number[] = [];
          for (const gap of spacing(idleMs!, overheadMs)) {
            await sleep(gap);
            statuses.push((await client.request('GET', PATHS.json)).status);
          }
          await client.close();
          expect(statuses.filter((s) => s === 502)).toEqual([]);
          expect(statuses.filter((s) => s !== 200)).toEqual([]);
        },
        SPACED_BUDGET_MS + 4 * HANG_BOUND_MS,
      );
    });
  });
}

/** About how long the spaced requests of one server take (the number of gaps follows from its idle timeout). */
const SPACED_BUDGET_MS = 12_000;

/**
 * Gaps between requests, each measured from the previous answer, for an upstream that closes
 * connections idle for `idleMs`: where a request reaches the upstream as it closes the
 * connection. The upstream's timer starts as it sends an answer, and the next request reaches it
 * about `overheadMs` (the gateway's part of a round trip) after the client sent it: so the gaps
 * cluster just under `idleMs - overheadMs`, a few on each side. A server that closes after every
 * response (HTTP/1.0) gets a few short gaps.
 */
function spacing(idleMs: number, overheadMs: number): number[] {
  if (idleMs < 50) return [20, 50, 100, 200];
  const count = Math.max(4, Math.min(120, Math.floor(SPACED_BUDGET_MS / idleMs)));
  const center = idleMs - overheadMs;
  const [from, to] = [center - 6, center + 3];
  return Array.from({ length: count }, (_, i) => Math.max(0, from + ((to - from) * i) / (count - 1)));
}

/** The gateway's share of a round trip: median time through it, less the median straight to the upstream. */
async function gatewayOverheadMs(stack: InteropStack, client: GatewayClient): Promise<number> {
  const direct = new GatewayClient(stack.upstream.url);
  const median = async (through: GatewayClient) => {
    const times: number[] = [];
    let closedUnder = 0;
    while (times.length < 11) {
      const start = performance.now();
      try {
        await through.request('GET', PATHS.json);
      } catch (err) {
        // Straight to the upstream nothing retries: on a loaded machine a pause longer than its
        // idle timeout lets it close the connection under the next request. Not a sample; again.
        if (through === direct && (err as { code?: string }).code === 'UND_ERR_SOCKET' && ++closedUnder <= 11) continue;
        throw err;
      }
      times.push(performance.now() - start);
    }
    return times.sort((x, y) => x - y)[5]!;
  };
  try {
    return Math.max(0, (await median(client)) - (await median(direct)));
  } finally {
    await direct.close();
  }
}
