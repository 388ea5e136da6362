import { createHmac, createSecretKey, hkdfSync, type KeyObject } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import { LRUCache } from 'lru-cache';
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

/**
 * Charges kept per rule and request values (`LimitRules.charges`): the hot values (a key, its
 * addresses, a tenant) are few, and a miss costs only the HMAC. Bounded in number and in size, so
 * that values an attacker chooses (headers, path parameters, claims: up to a request head's
 * 16 KiB each) cost memory no more than MEMO_BYTES. A key longer than MEMO_KEY_CHARS is not
 * kept: hot values are short, and a long one's HMAC costs more than the memo saves.
 */
const MEMO_ENTRIES = 10_000;
const MEMO_BYTES = 2_000_000;
const MEMO_KEY_CHARS = 1024;
/** An entry's memory besides its key (the frozen charge, its digest, the cache's bookkeeping), about. */
const MEMO_ENTRY_BYTES = 200;

interface CompiledRule {
  /** Its place among the load's rules: names it in the memo of charges. */
  id: number;
  config: LimitRuleConfig;
  /** Upper-case methods (a GET rule also covers HEAD); undefined: every method. */
  methods?: ReadonlySet<string>;
  /** The path pattern with a capture group per parameter; undefined: every path. */
  pattern?: RegExp;
  params: string[];
  by: ByPart[];
  /** Everything of the charge but the digest, made once per load; undefined for a rule with no window (maxConcurrent only). */
  limit?: Omit<RuleCharge, 'digest'>;
  /**
   * The values and charge of the last request counted that the memo keeps: a hot key's or
   * address's requests find theirs by comparing values, without a memo key or lookup.
   */
  last?: { raws: readonly string[]; counted: Counted };
}

/**
 * A concurrency slot a request must hold under a rule's `maxConcurrent` (rule-slots.ts). Its
 * subject `rule:<name>:<digest>` is a namespace of its own beside consumer ids (a key id, `owner:`,
 * `anon:`, `jwt:`), so its slot set (tg:slots:{rule:…}) is never a consumer's.
 */
export interface RuleSlot {
  rule: string;
  subject: string;
  max: number;
}

/** What one rule asks of a request with given values: its window's charge, its slot, or both. */
interface Counted {
  charge?: RuleCharge;
  slot?: RuleSlot;
}

/**
 * What a request's rules ask of the quota step: the charges and the slots, or the rule whose
 * attribute is missing under `whenMissing: refuse`.
 */
export type RulesFor = { charges: RuleCharge[]; slots: RuleSlot[] } | { missing: { rule: string; attribute: string } };

const NONE: RulesFor = Object.freeze({ charges: [], slots: [] });

/**
 * gateway.yaml `limits` (global and per service), compiled once per load: which rules a request
 * matches and the counter each names. A counter is named by a keyed digest (HMAC-SHA-256 under a
 * key derived from the assertion secret every replica shares) of the rule's name and the request's
 * values of `by`: bounded length, the same on every replica, and no address, header or claim in
 * clear in any Redis key (a plain hash of an IPv4 address could be reversed by trying them all).
 */
export class LimitRules {
  private readonly global: CompiledRule[];
  /** A service's rules after the global ones: the list its requests are matched against. */
  private readonly byService = new Map<string, CompiledRule[]>();
  readonly size: number;
  /** The digests' key as a KeyObject: createHmac with raw bytes makes one per call, most of an HMAC's cost. */
  private readonly key: KeyObject;
  /**
   * Each rule's charge per request values (the raw ones: a `client.*` part's address before its
   * prefix is taken), so that a hot key or address costs neither an HMAC nor an address parse per
   * request. One load's rules and key: a reload (a rotated secret) starts an empty one.
   */
  private readonly counted = new LRUCache<string, Counted>({
    max: MEMO_ENTRIES,
    maxSize: MEMO_BYTES,
    sizeCalculation: (_counted, memo) => memo.length + MEMO_ENTRY_BYTES,
  });

  constructor(global: readonly LimitRuleConfig[], services: readonly ServiceConfig[], key: Buffer) {
    this.key = createSecretKey(key);
    let size = 0;
    const compileNext = (config: LimitRuleConfig) => compile(config, size++);
    this.global = global.map(compileNext);
    for (const service of services)
      if (service.limits.length) this.byService.set(service.name, [...this.global, ...service.limits.map(compileNext)]);
    this.size = size;
  }

  /** The key digests are made under: derived from the shared assertion secret (a rotation starts new counters). */
  static keyFrom(sharedSecret: Uint8Array): Buffer {
    return Buffer.from(hkdfSync('sha256', sharedSecret, 'tollgate', 'limit rule counter', 32));
  }

  /** The rules `ctx`'s request matches (the global ones, then its service's), with their counters. */
  forRequest(ctx: RequestContext, trust: ProxyTrust): RulesFor {
    if (this.size === 0) return NONE;
    const rules = (ctx.route && this.byService.get(ctx.route.service.config.name)) ?? this.global;
    if (rules.length === 0) return NONE;
    const method = ctx.req.method ?? 'GET';
    const path = pathOf(ctx.req.url);
    const charges: RuleCharge[] = [];
    const slots: RuleSlot[] = [];
    let client: string | undefined;
    const clientAddress = () => (client ??= clientAddressOf(ctx.req, trust));
    for (const rule of rules) {
      if (rule.methods && !rule.methods.has(method)) continue;
      let params: RegExpExecArray | null = null;
      if (rule.pattern && !(params = rule.pattern.exec(path))) continue;
      const raws: string[] = [];
      let missing: string | undefined;
      for (let i = 0; i < rule.by.length && missing === undefined; i++) {
        const raw = rawValueOf(rule.by[i]!, ctx, clientAddress, rule.params, params);
        if (raw === undefined) missing = rule.config.by[i];
        else raws.push(raw);
      }
      if (missing !== undefined) {
        if (rule.config.whenMissing === 'refuse') return { missing: { rule: rule.config.name, attribute: missing } };
        continue;
      }
      const { charge, slot } = rule.last && sameValues(rule.last.raws, raws) ? rule.last.counted : this.remembered(rule, raws);
      if (charge) charges.push(charge);
      if (slot) slots.push(slot);
    }
    return charges.length || slots.length ? { charges, slots } : NONE;
  }

  /** A rule's charge and slot for the request values `raws`: the memo's, or made now and kept. */
  private remembered(rule: CompiledRule, raws: readonly string[]): Counted {
    // The memo's key: the rule, then each raw value length-prefixed (no two lists read alike).
    let memo = String(rule.id);
    for (const raw of raws) memo += `\0${raw.length}:${raw}`;
    const counted = this.counted.get(memo) ?? this.count(rule, raws, memo);
    if (memo.length <= MEMO_KEY_CHARS) rule.last = { raws, counted };
    return counted;
  }

  /** A rule's charge and slot for the request values `raws`, kept under `memo`; never changed after (shared by the requests that name them). */
  private count(rule: CompiledRule, raws: readonly string[], memo: string): Counted {
    const values = raws.map((raw, i) => valueOf(rule.by[i]!, raw));
    const digest = this.digest(rule.config.name, values);
    const { name, maxConcurrent: max } = rule.config;
    const counted: Counted = Object.freeze({
      charge: rule.limit && Object.freeze({ ...rule.limit, digest }),
      slot: max === undefined ? undefined : Object.freeze({ rule: name, subject: `rule:${name}:${digest}`, max }),
    });
    if (memo.length <= MEMO_KEY_CHARS) this.counted.set(memo, counted);
    return counted;
  }

  /** Each value length-prefixed, so that no two lists of values read alike. */
  private digest(name: string, values: string[]): string {
    const hmac = createHmac('sha256', this.key).update(name);
    for (const value of values) hmac.update(`\0${value.length}:${value}`);
    return hmac.digest('base64url').slice(0, DIGEST_CHARS);
  }
}

function sameValues(a: readonly string[], b: readonly string[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return a.length === b.length;
}

function compile(config: LimitRuleConfig, id: number): CompiledRule {
  const methods = config.match.methods && new Set(config.match.methods.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])));
  const params: string[] = [];
  const pattern = config.match.path === undefined ? undefined : patternWithParams(config.match.path, params);
  return {
    id,
    config,
    methods,
    pattern,
    params,
    by: config.by.map((text) => parseByPart(text) as ByPart),
    limit: chargeOf(config),
  };
}

/** A rule's window as the quota step charges it; undefined for a rule with none (maxConcurrent only). */
function chargeOf(config: LimitRuleConfig): Omit<RuleCharge, 'digest'> | undefined {
  const window = (Object.keys(RULE_WINDOWS) as Array<keyof typeof RULE_WINDOWS>).find((w) => config[w] !== undefined);
  if (!window) return undefined;
  const limit = config[window]!;
  const windowMs = RULE_WINDOWS[window];
  const gcra = config.algorithm === 'gcra' ? ruleGcra(limit, windowMs, config.burst) : undefined;
  return {
    name: config.name,
    limit,
    windowMs,
    gcra: gcra !== undefined,
    intervalUs: gcra?.intervalUs ?? 0,
    burst: gcra?.burst ?? 0,
    cost: config.cost,
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

/**
 * The request's value of `part` as read, or undefined when it has none: a `client.*` part's is
 * the client address (`valueOf` makes the counted value from it), any other's is the value.
 */
function rawValueOf(
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
    case 'client.prefix':
      return client();
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

/** The value counted for `part` from its raw value: a client address's own form (clientOf) or its network, a path parameter decoded. */
function valueOf(part: ByPart, raw: string): string {
  if (part.kind === 'client.address') return clientOf(raw);
  if (part.kind === 'client.prefix') return prefixOf(raw, part.v4Bits, part.v6Bits);
  if (part.kind === 'path') return decodedParam(raw);
  return raw;
}

/**
 * A path parameter as the upstream reads it. The canonical path (http/canonical-target.ts) keeps a
 * reserved character's percent-encoding apart from the character (`%40`, `@`), as RFC 3986 says of
 * URIs, but servers decode a parameter whole: counting the two apart would give a client one more
 * limit per such character it chooses to encode. A value that is not UTF-8 once decoded is counted
 * as sent.
 */
function decodedParam(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
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
