import { request as httpRequest } from 'node:http';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CountingTarget } from './counting-targets.js';
import { ADMIN_TOKENS } from './admin-client.js';
import { TestRedis } from './redis-server.js';
import { configCopy, createKey, startGateway, type CreatedKey, type GatewayHandle } from './stack.js';
import { sleep } from './services-stack.js';

/** One answer as the client saw it. */
export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json: any;
}

/** One request over node:http: from a chosen source address, to an IPv4 or IPv6 gateway. */
export function call(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer; localAddress?: string } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: options.method ?? 'GET', headers: options.headers, localAddress: options.localAddress },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(body);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode!, headers: res.headers, body, json });
        });
      },
    );
    req.on('error', reject);
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    req.end(options.body);
  });
}

/**
 * A real gateway on its own redis-server in front of one CountingTarget (every service's target
 * and upstream.url), with gateway.yaml made by `edit` from the shipped one; rewritten for reloads.
 */
export class EdgeRulesStack {
  private constructor(
    readonly redis: TestRedis,
    readonly gateway: GatewayHandle,
    readonly target: CountingTarget,
    readonly configDir: string,
    /** gateway.yaml as shipped, before `edit`. */
    readonly shipped: string,
    private readonly edit: (yaml: string, targetUrl: string) => string,
  ) {}

  static async start(
    edit: (yaml: string, targetUrl: string) => string,
    env: Record<string, string> = {},
    files: Record<string, string> = {},
  ): Promise<EdgeRulesStack> {
    const target = await new CountingTarget('edge').start();
    const redis = await TestRedis.start();
    let shipped = '';
    const configDir = configCopy({
      'gateway.yaml': (t) => {
        shipped = t;
        return edit(t, target.url);
      },
    });
    for (const [name, text] of Object.entries(files)) writeFileSync(join(configDir, name), text);
    const gateway = await startGateway({
      REDIS_URL: redis.url,
      UPSTREAM_URL: target.url,
      TOLLGATE_CONFIG_DIR: configDir,
      TOLLGATE_ADMIN_TOKENS: ADMIN_TOKENS,
      ...env,
    });
    return new EdgeRulesStack(redis, gateway, target, configDir, shipped, edit);
  }

  key(args: string[] = ['--plan', 'enterprise', '--per-minute', '100000', '--per-day', '1000000']): Promise<CreatedKey> {
    return createKey(this.redis, args, this.configDir);
  }

  /** Rewrites gateway.yaml through `edit` and waits for the gateway to take it (or to refuse it). */
  async reload(edit: (yaml: string, targetUrl: string) => string, expect: 'config reloaded' | 'config reload refused' = 'config reloaded') {
    const lines = () => this.gateway.process.logs().filter((l) => typeof l.msg === 'string' && l.msg.startsWith(expect));
    const count = () => lines().length;
    const before = count();
    const path = join(this.configDir, 'gateway.yaml');
    writeFileSync(`${path}.next`, edit(this.shipped, this.target.url));
    renameSync(`${path}.next`, path);
    const deadline = Date.now() + 15_000;
    while (count() === before) {
      if (Date.now() > deadline) throw new Error(`no "${expect}":\n${this.gateway.process.outputTail()}`);
      await sleep(25);
    }
    return lines().at(-1)!;
  }

  /** The sum of a metric's samples whose labels include `labels`. */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    const text = await (await fetch(`${this.gateway.adminUrl}/metrics`)).text();
    let sum = 0;
    for (const line of text.split('\n')) {
      const match = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
      if (!match || match[1] !== name) continue;
      const have = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
      if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(match[3]);
    }
    return sum;
  }

  async close(): Promise<void> {
    await this.gateway.process.stop();
    await this.redis.stop();
    await this.target.kill();
  }
}

/** gateway.yaml with its `services: []` line replaced by `yaml` (top-level sections may follow it). */
export function replacingServices(gatewayYaml: string, yaml: string): string {
  if (!/^services: \[\]/m.test(gatewayYaml)) throw new Error('gateway.yaml has no `services: []` line to replace');
  // A top-level ipRules in `yaml` replaces the shipped (empty) one: YAML allows no key twice.
  const base = /^ipRules:/m.test(yaml) ? withoutShippedIpRules(gatewayYaml) : gatewayYaml;
  return base.replace(/^services: \[\][^\n]*\n/m, yaml.trimEnd() + '\n');
}

/** gateway.yaml with the public listener on `host` (IPv6 `::1` for the IPv6 tests). */
export function listeningOn(gatewayYaml: string, host: string): string {
  return gatewayYaml.replace(/^( {2}host: )0\.0\.0\.0/m, `$1"${host}"`);
}

/** gateway.yaml without its shipped `ipRules:` section (an empty deny list). */
export function withoutShippedIpRules(gatewayYaml: string): string {
  return gatewayYaml.replace(/^ipRules:[^\n]*\n {2}deny: \[\][^\n]*\n/m, '');
}
