import { createHmac, hkdfSync } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import type { ServiceConfig } from '../config/services-schema.js';
import { parseByPart, RULE_WINDOWS, type ByPart, type LimitRuleConfig } from '../config/limits-schema.js';
import { addressOf } from '../policies/ip-rules/cidr.js';
import { clientAddressOf, clientOf } from '../http/client-address.js';
import type { ProxyTrust } from '../http/proxy-trust.js';
import { ruleGcra, type RuleCharge } from '../quota/limit-rules.js';
import type { RequestContext } from './context.js';
import { pathOf } from './route-rules.js';

/** Characters of a digest kept in a counter's key: 132 bits of base64url. */
const DIGEST_CHARS = 22;

interface CompiledRule {
  config: LimitRuleConfig;
  /** Upper-case methods (a GET rule also covers HEAD); undefined: every method. */
  methods?: ReadonlySet<string>;
  /** The path pattern with a capture group per parameter; undefined: every path. */
  pattern?: RegExp;
  params: string[];
  by: ByPart[];
  /** Everything of the charge but the digest, made once per load. */
  limit: Omit<RuleCharge, 'digest'>;
}

/** What a request's rules ask of the quota step: the charges, or the rule whose attribute is missing under `whenMissing: refuse`. */
export type RulesFor = { charges: RuleCharge[] } | { missing: { rule: string; attribute: string } };

const NONE: RulesFor = Object.freeze({ charges: [] });

/**
 * gateway.yaml `limits` (global and per service), compiled once per load: which rules a request
 * matches and the counter each names. A counter is named by a keyed digest (HMAC-SHA-256 under a
 * key derived from the assertion secret every replica shares) of the rule's name and the request's
 * values of `by`: bounded length, the same on every replica, and no address, header or claim in
 * clear in any Redis key (a plain hash of an IPv4 address could be reversed by trying them all).
 */
export class LimitRules {
  private readonly global: CompiledRule[];
  private readonly byService = new Map<string, CompiledRule[]>();
  readonly size: number;

  constructor(
    global: readonly LimitRuleConfig[],
    services: readonly ServiceConfig[],
    private readonly key: Buffer,
  ) {
    this.global = global.map(compile);
    let size = this.global.length;
    for (const service of services)
      if (service.limits.length) {
        this.byService.set(service.name, service.limits.map(compile));
        size += service.limits.length;
      }
    this.size = size;
  }

  /** The key digests are made under: derived from the shared assertion secret (a rotation starts new counters). */
  static keyFrom(sharedSecret: Uint8Array): Buffer {
    return Buffer.from(hkdfSync('sha256', sharedSecret, 'tollgate', 'limit rule counter', 32));
  }

  /** The rules `ctx`'s request matches (the global ones, then its service's), with their counters. */
  forRequest(ctx: RequestContext, trust: ProxyTrust): RulesFor {
    if (this.size === 0) return NONE;
    const service = ctx.route && this.byService.get(ctx.route.service.config.name);
    if (this.global.length === 0 && !service) return NONE;
    const method = ctx.req.method ?? 'GET';
    const path = pathOf(ctx.req.url);
    const charges: RuleCharge[] = [];
    let client: string | undefined;
    const clientAddress = () => (client ??= clientAddressOf(ctx.req, trust));
    for (const rule of service ? [...this.global, ...service] : this.global) {
      if (rule.methods && !rule.methods.has(method)) continue;
      let params: RegExpExecArray | null = null;
      if (rule.pattern && !(params = rule.pattern.exec(path))) continue;
      const values: string[] = [];
      let missing: string | undefined;
      for (let i = 0; i < rule.by.length && missing === undefined; i++) {
        const value = valueOf(rule.by[i]!, ctx, clientAddress, rule.params, params);
        if (value === undefined) missing = rule.config.by[i];
        else values.push(value);
      }
      if (missing !== undefined) {
        if (rule.config.whenMissing === 'refuse') return { missing: { rule: rule.config.name, attribute: missing } };
        continue;
      }
      charges.push({ ...rule.limit, digest: this.digest(rule.config.name, values) });
    }
    return charges.length ? { charges } : NONE;
  }

  /** Each value length-prefixed, so that no two lists of values read alike. */
  private digest(name: string, values: string[]): string {
    const hmac = createHmac('sha256', this.key).update(name);
    for (const value of values) hmac.update(`\0${value.length}:${value}`);
    return hmac.digest('base64url').slice(0, DIGEST_CHARS);
  }
}

function compile(config: LimitRuleConfig): CompiledRule {
  const window = (Object.keys(RULE_WINDOWS) as Array<keyof typeof RULE_WINDOWS>).find((w) => config[w] !== undefined)!;
  const limit = config[window]!;
  const windowMs = RULE_WINDOWS[window];
  const gcra = config.algorithm === 'gcra' ? ruleGcra(limit, windowMs, config.burst) : undefined;
  const methods = config.match.methods && new Set(config.match.methods.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])));
  const params: string[] = [];
  const pattern = config.match.path === undefined ? undefined : patternWithParams(config.match.path, params);
  return {
    config,
    methods,
    pattern,
    params,
    by: config.by.map((text) => parseByPart(text) as ByPart),
    limit: {
      name: config.name,
      limit,
      windowMs,
      gcra: gcra !== undefined,
      intervalUs: gcra?.intervalUs ?? 0,
      burst: gcra?.burst ?? 0,
      cost: config.cost,
    },
  };
}

/** As route-rules.ts patternToRegExp (whole segments, any case, one trailing slash), each parameter captured. */
function patternWithParams(pattern: string, params: string[]): RegExp {
  if (pattern === '/') return /^\/$/;
  const parts = pattern
    .slice(1)
    .split('/')
    .map((segment) => {
      if (!segment.startsWith('{')) return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      params.push(segment.slice(1, -1));
      return '([^/]+)';
    });
  return new RegExp(`^/${parts.join('/')}/?$`, 'i');
}

function valueOf(
  part: ByPart,
  ctx: RequestContext,
  client: () => string,
  params: readonly string[],
  matched: RegExpExecArray | null,
): string | undefined {
  const consumer = ctx.consumer!;
  switch (part.kind) {
    case 'consumer.id':
      return consumer.id;
    case 'consumer.plan':
      return consumer.plan;
    case 'consumer.owner':
      return consumer.owner || undefined;
    case 'client.address':
      return clientOf(client());
    case 'client.prefix':
      return prefixOf(client(), part.v4Bits, part.v6Bits);
    case 'header': {
      const value = ctx.req.headers[part.name];
      const text = Array.isArray(value) ? value.join(', ') : value;
      return text === undefined || text === '' ? undefined : text;
    }
    case 'claim': {
      const value = consumer.claims?.[part.name];
      if (value === undefined || value === null || value === '') return undefined;
      return typeof value === 'string' ? value : JSON.stringify(value);
    }
    case 'path': {
      const at = params.indexOf(part.name);
      return at < 0 ? undefined : matched?.[at + 1];
    }
  }
}

/** The network of `address` (an IPv4-mapped IPv6 address as its IPv4), as `a.b.c.0/24` or `2001:db8::/48`. */
function prefixOf(address: string, v4Bits: number, v6Bits: number): string {
  const parsed = addressOf(address);
  if (!parsed) return address;
  const bits = parsed.kind() === 'ipv4' ? v4Bits : v6Bits;
  const mask = (parsed.kind() === 'ipv4' ? ipaddr.IPv4 : ipaddr.IPv6).subnetMaskFromPrefixLength(bits).toByteArray();
  const bytes = parsed.toByteArray().map((byte, i) => byte & mask[i]!);
  return `${ipaddr.fromByteArray(bytes).toString()}/${bits}`;
}
