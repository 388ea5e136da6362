import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { CountingTarget, withServices } from './counting-targets.js';
import { CONFIG_DIR } from './processes.js';
import { TestRedis } from './redis-server.js';
import { bearer, configCopy, createKey, startGateway, type GatewayHandle } from './stack.js';

/**
 * A real gateway process in front of services of CountingTargets, on its own redis-server, for
 * the services-*.test.ts behaviours: requests as a client sees them (a network error is status 0,
 * never a throw), the admin /metrics read by name and labels, the access lines by request id, and
 * gateway.yaml rewritten for a hot reload.
 */
export interface Answer {
  id: string;
  status: number;
  /** The Error body's code, when the gateway answered one. */
  code?: string;
  /** The target named in a CountingTarget's echo. */
  target?: string;
  retryAfter: string | null;
  error?: string;
}

export interface AccessLine {
  method: string;
  status: number;
  service?: string;
  target?: string;
  tries?: number;
}

export class ServicesStack {
  private seq = 0;

  private constructor(
    readonly redis: TestRedis,
    readonly gateway: GatewayHandle,
    readonly key: string,
    readonly configDir: string,
    private readonly idPrefix: string,
    private readonly targets: readonly CountingTarget[],
  ) {}

  /**
   * Starts `targets` and a fallback (upstream.url, which no test here reaches), then the gateway
   * with the `services:` section `servicesYaml` writes once the targets have their ports.
   */
  static async start(
    targets: readonly CountingTarget[],
    servicesYaml: () => string,
    idPrefix: string,
    env: Record<string, string> = {},
  ): Promise<ServicesStack> {
    const all = [new CountingTarget('fallback'), ...targets];
    await Promise.all(all.map((t) => t.start()));
    const redis = await TestRedis.start();
    const configDir = configCopy({ 'gateway.yaml': (t) => withServices(t, servicesYaml()) });
    const gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: all[0]!.url, TOLLGATE_CONFIG_DIR: configDir, ...env });
    // Own quotas far above anything a test sends: no test here is about quotas.
    const key = await createKey(redis, ['--plan', 'enterprise', '--per-minute', '1000000', '--per-day', '10000000']);
    return new ServicesStack(redis, gateway, key.key, configDir, idPrefix, all);
  }

  /** A request id of this stack's own, well-formed, so the gateway keeps it and the targets record it. */
  nextId(kind: string): string {
    return `${this.idPrefix}-${kind}-${String(++this.seq).padStart(6, '0')}`;
  }

  async request(
    method: string,
    path: string,
    options: { body?: string; headers?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<Answer> {
    const id = this.nextId(method.toLowerCase());
    try {
      const res = await fetch(`${this.gateway.url}${path}`, {
        method,
        headers: {
          ...bearer(this.key),
          'x-request-id': id,
          ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...options.headers,
        },
        body: options.body,
        // A bound against hangs, not a timing assertion.
        signal: AbortSignal.timeout(options.timeoutMs ?? 90_000),
      });
      const text = await res.text();
      let parsed: { code?: string; target?: string } = {};
      try {
        parsed = JSON.parse(text) as typeof parsed;
      } catch {
        /* not JSON: a body some target sent */
      }
      return { id, status: res.status, code: parsed.code, target: parsed.target, retryAfter: res.headers.get('retry-after') };
    } catch (err) {
      return { id, status: 0, retryAfter: null, error: String((err as Error).cause ?? err) };
    }
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

  /** Waits until `metric` reaches at least `min`; a bound against hangs. */
  async metricAtLeast(name: string, labels: Record<string, string>, min: number, timeoutMs = 60_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await this.metric(name, labels);
      if (value >= min || Date.now() > deadline) return value;
      await sleep(50);
    }
  }

  /** The access line of each of these requests, by request id, once all are written (a bound against hangs). */
  async accessLines(answers: readonly Answer[]): Promise<Map<string, AccessLine>> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const lines = new Map<string, AccessLine>();
      for (const line of this.gateway.process.logs())
        if (line.msg === 'request' && typeof line.reqId === 'string') lines.set(line.reqId, line as unknown as AccessLine);
      if (answers.every((a) => lines.has(a.id)) || Date.now() > deadline) return lines;
      await sleep(25);
    }
  }

  /** Rewrites gateway.yaml's services section (the gateway polls the file) and waits for the reload. */
  async reloadServices(servicesYaml: string): Promise<void> {
    const before = this.gateway.process.logs().filter((l) => l.msg === 'services reloaded').length;
    const shipped = readFileSync(join(CONFIG_DIR, 'gateway.yaml'), 'utf8');
    // Written aside and renamed over: the poll never sees half a file.
    const path = join(this.configDir, 'gateway.yaml');
    writeFileSync(`${path}.next`, withServices(shipped, servicesYaml));
    renameSync(`${path}.next`, path);
    const deadline = Date.now() + 60_000;
    while (this.gateway.process.logs().filter((l) => l.msg === 'services reloaded').length === before) {
      if (Date.now() > deadline) throw new Error(`no reload:\n${this.gateway.process.outputTail()}`);
      await sleep(25);
    }
  }

  async close(): Promise<void> {
    await this.gateway.process.stop();
    await this.redis.stop();
    await Promise.all(this.targets.map((t) => t.kill()));
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Behaviour = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** A CountingTarget's behaviour: answer `status` with a small Error-like body, after `delayMs`. */
export function answerStatus(target: CountingTarget, status: number, delayMs = 0): Behaviour {
  return (_req, res) => {
    setTimeout(() => {
      res.statusCode = status;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ target: target.name, status }));
    }, delayMs);
  };
}

/** A CountingTarget's behaviour: its usual echo, after `delayMs` (a slow instance, or requests kept in flight). */
export function echoAfter(target: CountingTarget, delayMs: number): Behaviour {
  return (req, res, body) => {
    setTimeout(() => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ target: target.name, method: req.method, url: req.url, body }));
    }, delayMs);
  };
}

/** How many times each request id reached any of `targets` with `method`. */
export function deliveries(targets: readonly CountingTarget[], method: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const t of targets) for (const hit of t.hitsOf(method)) counts.set(hit.requestId, (counts.get(hit.requestId) ?? 0) + 1);
  return counts;
}

/**
 * A CountingTarget's behaviour that holds every answer until the test releases it: requests kept
 * in flight for as long as a test needs, without a timing.
 */
export class Held {
  private readonly waiting: Array<() => void> = [];

  behaviour(target: CountingTarget): Behaviour {
    const echo = echoAfter(target, 0);
    return (req, res, body) => this.hold(() => echo(req, res, body));
  }

  /** Runs `answer` at the next release. */
  hold(answer: () => void): void {
    this.waiting.push(answer);
  }

  get count(): number {
    return this.waiting.length;
  }

  release(): void {
    for (const answer of this.waiting.splice(0)) answer();
  }
}
