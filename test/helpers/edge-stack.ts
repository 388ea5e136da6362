import { exchange, type Exchange } from './raw-client.js';
import { RecordingUpstream } from './recording-upstream.js';
import { TestRedis } from './redis-server.js';
import { configCopy, createKey, startGateway, type CreatedKey, type GatewayHandle } from './stack.js';

/**
 * A real gateway process (shipped config: GET /v1/pets/{petId} deprecated) in front of a
 * RecordingUpstream, with a real Redis and one valid key: the rig of the edge attack tests.
 */
export class EdgeStack {
  redis!: TestRedis;
  upstream!: RecordingUpstream;
  gateway!: GatewayHandle;
  key!: CreatedKey;
  port = 0;

  static async start(opts: { env?: Record<string, string>; gatewayYaml?: (text: string) => string } = {}): Promise<EdgeStack> {
    const stack = new EdgeStack();
    stack.redis = await TestRedis.start();
    stack.upstream = await new RecordingUpstream().start();
    const config = configCopy({
      // A short upstream timeout, so the silent-upstream cases end soon.
      'gateway.yaml': (t) => (opts.gatewayYaml ?? ((x) => x))(t.replace('timeoutMs: 15000', 'timeoutMs: 1500')),
    });
    stack.gateway = await startGateway({
      REDIS_URL: stack.redis.url,
      UPSTREAM_URL: stack.upstream.url,
      TOLLGATE_CONFIG_DIR: config,
      ...opts.env,
    });
    stack.port = Number(new URL(stack.gateway.url).port);
    // Quotas no fuzz run reaches: a fast machine sends its thousands of requests within a minute.
    stack.key = await createKey(stack.redis, ['--plan', 'enterprise', '--per-minute', '1000000', '--per-day', '100000000']);
    return stack;
  }

  async stop(): Promise<void> {
    await this.gateway?.process.stop();
    await this.upstream?.stop();
    await this.redis?.stop();
  }

  /** `Authorization` and `Host` lines for a request head. */
  get auth(): string {
    return `Host: gateway.test\r\nAuthorization: Bearer ${this.key.key}\r\n`;
  }

  send(parts: Array<string | Buffer>, opts?: Parameters<typeof exchange>[2]): Promise<Exchange> {
    return exchange(this.port, parts, opts);
  }

  /**
   * A plain request sent after an attack. The gateway reuses its most recent upstream socket (LIFO
   * pool), so anything an attack smuggled onto that socket is framed by the upstream before this
   * one: afterwards the recorded requests are exactly what the upstream parsed.
   */
  async sentinel(): Promise<void> {
    const result = await this.send([`GET /v1/sentinel HTTP/1.1\r\n${this.auth}\r\n`]);
    if (result.responses.at(-1)?.status !== 200) throw new Error(`sentinel failed: ${result.raw.slice(0, 300)}`);
  }

  /** Targets the upstream framed, sentinels included. */
  targets(): string[] {
    return this.upstream.requests.map((r) => `${r.method} ${r.target}`);
  }

  async metrics(): Promise<string> {
    return (await fetch(`${this.gateway.adminUrl}/metrics`)).text();
  }
}
