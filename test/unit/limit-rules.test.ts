import { createHmac } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { gatewayFileSchema } from '../../src/config/gateway-schema.js';
import { limitsSchema } from '../../src/config/limits-schema.js';
import type { RequestContext } from '../../src/gateway/context.js';
import { LimitRules, type RulesFor } from '../../src/gateway/limit-rules.js';
import { ProxyTrust } from '../../src/http/proxy-trust.js';
import { ruleGcra, type RuleCharge } from '../../src/quota/limit-rules.js';
import { rulesHeaders } from '../../src/quota/rule-headers.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';

// Limit rules as pure units: the memory store's all-or-nothing step (the Redis script is held to it
// by test/integration/limit-rules-differential.test.ts), the headers' binding rule, and which
// rules a request matches with which counters.

const T0 = Date.UTC(2026, 10, 22, 10, 0, 10);
const ban = { afterRejections: 2, window: 60, duration: 600 };
const fixed = (name: string, limit: number, windowMs = 60_000, cost = 1): RuleCharge => ({
  name,
  digest: name,
  limit,
  windowMs,
  gcra: false,
  intervalUs: 0,
  burst: 0,
  cost,
});

describe('the memory store decides rules with the plan, all or nothing', () => {
  it('charges every rule and the plan together, and none when a rule refuses; a rule refusal counts towards no ban', async () => {
    const clock = { now: T0 };
    const store = new MemoryQuotaStore(() => clock.now);
    const plan = { perMinute: 10, perDay: 100 };
    const [a, b] = [fixed('a', 2), fixed('b', 5)];
    expect((await store.consumeRules('k', plan, ban, 1, [a, b])).verdict).toBe('allowed');
    expect((await store.consumeRules('k', plan, ban, 1, [a, b])).verdict).toBe('allowed');
    for (let i = 0; i < 3; i++) {
      const refused = await store.consumeRules('k', plan, ban, 1, [a, b]);
      expect(refused).toMatchObject({ verdict: 'limited', refusedBy: 0, minuteCount: 2, rejections: 0 });
      expect(refused.rules.map((r) => r.count)).toEqual([2, 2]);
    }
    // b was never charged by the refused requests: 3 more fit in it.
    for (let i = 0; i < 3; i++) expect((await store.consumeRules('k', plan, ban, 1, [b])).verdict).toBe('allowed');
    expect(await store.consumeRules('k', plan, ban, 1, [b])).toMatchObject({ verdict: 'limited', refusedBy: 0 });
    expect((await store.usage('k', plan)).minuteCount).toBe(5);
  });

  it('charges no rule when the plan refuses, and bans on the plan refusals as ever', async () => {
    const store = new MemoryQuotaStore(() => T0);
    const plan = { perMinute: 1, perDay: 100 };
    const rule = fixed('r', 10);
    expect((await store.consumeRules('k', plan, ban, 1, [rule])).rules[0]!.count).toBe(1);
    expect(await store.consumeRules('k', plan, ban, 1, [rule])).toMatchObject({ verdict: 'limited', refusedBy: -1, rules: [{ count: 1 }] });
    expect(await store.consumeRules('k', plan, ban, 1, [rule])).toMatchObject({ verdict: 'banned', rules: [{ count: 1 }] });
    expect(await store.consumeRules('k', plan, ban, 1, [rule])).toMatchObject({ verdict: 'banned', refusedBy: -1 });
  });

  it('runs a gcra rule as a cell rate over its window', async () => {
    const clock = { now: T0 };
    const store = new MemoryQuotaStore(() => clock.now);
    const g = ruleGcra(4, 60_000, 2);
    const rule: RuleCharge = {
      name: 'g',
      digest: 'g',
      limit: 4,
      windowMs: 60_000,
      gcra: true,
      intervalUs: g.intervalUs,
      burst: g.burst,
      cost: 1,
    };
    const plan = { perMinute: 100, perDay: 100 };
    const verdicts = [];
    for (let i = 0; i < 3; i++) verdicts.push((await store.consumeRules('k', plan, ban, 1, [rule])).verdict);
    expect(verdicts).toEqual(['allowed', 'allowed', 'limited']);
    clock.now += g.intervalUs / 1000;
    expect((await store.consumeRules('k', plan, ban, 1, [rule])).verdict).toBe('allowed');
  });
});

/** The plan's outcome with 3 units used in its minute and day. */
const plan = { perMinute: 60, perDay: 1000 };
const planOutcome = (verdict: 'allowed' | 'limited') => ({
  verdict,
  minuteCount: 3,
  dayCount: 3,
  rejections: 0,
  nowMs: T0,
  bannedUntilMs: 0,
  cost: 1,
  minuteTatUs: 0,
});

describe('rate-limit headers with rules', () => {
  it('list every policy and name the binding one: the one the request waits on longest', () => {
    const rules = [fixed('login', 10, 60_000), fixed('hourly', 50, 3_600_000)];
    const outcome = planOutcome('limited');
    const states = [
      { startMs: T0 - 10_000, count: 10, tatUs: 0 },
      { startMs: T0 - (T0 % 3_600_000), count: 50, tatUs: 0 },
    ];
    const { headers, retryAfterSeconds } = rulesHeaders(plan, outcome, rules, states);
    expect(headers['ratelimit-policy']).toBe('"minute";q=60;w=60, "day";q=1000;w=86400, "login";q=10;w=60, "hourly";q=50;w=3600');
    const hourEnd = T0 - (T0 % 3_600_000) + 3_600_000;
    expect(headers.ratelimit).toBe(`"hourly";r=0;t=${Math.ceil((hourEnd - T0) / 1000)}`);
    expect(retryAfterSeconds).toBe(Math.ceil((hourEnd - T0) / 1000));
    expect(headers['x-ratelimit-limit']).toBe('50');
  });

  it('name the fewest remaining when the request passed', () => {
    const outcome = planOutcome('allowed');
    const { headers } = rulesHeaders(plan, outcome, [fixed('login', 10)], [{ startMs: T0 - 10_000, count: 7, tatUs: 0 }]);
    expect(headers.ratelimit).toBe('"login";r=3;t=50');
    expect(headers['x-ratelimit-remaining']).toBe('3');
  });
});

const SERVICE = { name: 'auth', limits: limitsSchema.parse([{ name: 's', by: ['consumer.id'], perMinute: 5 }]) };

function ctx(
  method: string,
  url: string,
  headers: Record<string, string> = {},
  remoteAddress = '198.51.100.7',
  consumer: object = {},
): RequestContext {
  return {
    req: { method, url, headers, socket: { remoteAddress } } as unknown as IncomingMessage,
    res: {} as ServerResponse,
    startedAtMs: 0,
    requestId: 'r',
    consumer: { id: 'k1', plan: 'free', ...consumer },
    route: { service: { config: SERVICE }, path: url } as unknown as RequestContext['route'],
  };
}

const charges = (rules: RulesFor) => ('charges' in rules ? rules.charges : []);

describe('which rules a request matches', () => {
  const rules = new LimitRules(
    limitsSchema.parse([
      { name: 'login', match: { methods: ['POST'], path: '/v1/login' }, by: ['client.address'], perMinute: 10 },
      { name: 'tenant', by: ['header:X-Tenant'], perHour: 100, whenMissing: 'refuse', match: { path: '/v1/t/{id}' } },
      { name: 'item', match: { path: '/v1/items/{itemId}' }, by: ['path:itemId', 'client.prefix/24/48'], perDay: 3 },
      { name: 'org', by: ['claim:org'], perSecond: 2, algorithm: 'gcra', burst: 2 },
    ]),
    [{ ...SERVICE } as never],
    LimitRules.keyFrom(Buffer.alloc(32, 1)),
  );
  const trust = ProxyTrust.none;

  it('by method and path pattern, global then the service', () => {
    expect(charges(rules.forRequest(ctx('POST', '/v1/login'), trust)).map((c) => c.name)).toEqual(['login', 's']);
    expect(charges(rules.forRequest(ctx('GET', '/v1/login'), trust)).map((c) => c.name)).toEqual(['s']);
    expect(charges(rules.forRequest(ctx('POST', '/V1/LOGIN/'), trust)).map((c) => c.name)).toEqual(['login', 's']);
  });

  it('names one counter per value, the same on every replica, never the value in clear', () => {
    const one = charges(rules.forRequest(ctx('POST', '/v1/login'), trust))[0]!;
    const again = charges(rules.forRequest(ctx('POST', '/v1/login'), trust))[0]!;
    const other = charges(rules.forRequest(ctx('POST', '/v1/login', {}, '198.51.100.8'), trust))[0]!;
    expect(one.digest).toBe(again.digest);
    expect(one.digest).not.toBe(other.digest);
    expect(one.digest).toMatch(/^[A-Za-z0-9_-]{22}$/);
    // client.prefix/24: two addresses of one /24 share the counter; the path parameter does not.
    const a = charges(rules.forRequest(ctx('GET', '/v1/items/7', {}, '203.0.113.5'), trust)).find((c) => c.name === 'item')!;
    const b = charges(rules.forRequest(ctx('GET', '/v1/items/7', {}, '203.0.113.99'), trust)).find((c) => c.name === 'item')!;
    const c = charges(rules.forRequest(ctx('GET', '/v1/items/8', {}, '203.0.113.5'), trust)).find((c) => c.name === 'item')!;
    expect(a.digest).toBe(b.digest);
    expect(a.digest).not.toBe(c.digest);
  });

  it('counts a path parameter by the value the upstream reads: a reserved character encoded or not is one counter', () => {
    // The canonical path keeps `%40` and `@` apart (RFC 3986 §2.2: not equivalent in a URI), but a
    // server reads both parameters as `a@b`: two counters would let a client double its limit per
    // such character.
    const item = (path: string) =>
      charges(rules.forRequest(ctx('GET', path, {}, '203.0.113.5'), trust)).find((c) => c.name === 'item')!.digest;
    expect(item('/v1/items/a%40b')).toBe(item('/v1/items/a@b'));
    expect(item('/v1/items/urn%3Ax%3Ay')).toBe(item('/v1/items/urn:x:y'));
    expect(item('/v1/items/a%2540')).not.toBe(item('/v1/items/a%40'));
    // Not UTF-8 once decoded: counted as sent.
    expect(item('/v1/items/%FF')).not.toBe(item('/v1/items/%FE'));
  });

  it('names a counter by the HMAC of the rule and its values, the same when the charge is remembered', () => {
    // The digest as every replica, and every earlier version, makes it: upgrades keep the counters.
    const hmac = (name: string, ...values: string[]) => {
      const h = createHmac('sha256', LimitRules.keyFrom(Buffer.alloc(32, 1))).update(name);
      for (const value of values) h.update(`\0${value.length}:${value}`);
      return h.digest('base64url').slice(0, 22);
    };
    const both = new LimitRules(
      limitsSchema.parse([
        { name: 'address', by: ['client.address', 'consumer.id'], perMinute: 10 },
        { name: 'network', by: ['client.prefix/24', 'consumer.id'], perMinute: 10 },
      ]),
      [],
      LimitRules.keyFrom(Buffer.alloc(32, 1)),
    );
    const expected = [hmac('address', '203.0.113.5', 'k1'), hmac('network', '203.0.113.0/24', 'k1')];
    // Twice: the first computes the charges, the second finds them remembered.
    for (let i = 0; i < 2; i++) {
      const found = charges(both.forRequest(ctx('GET', '/v1/x', {}, '203.0.113.5'), trust));
      expect(found.map((c) => c.digest)).toEqual(expected);
    }
    // The same address under another key: other counters, not the remembered ones.
    const other = charges(both.forRequest(ctx('GET', '/v1/x', {}, '203.0.113.5', { id: 'k2' }), trust));
    expect(other.map((c) => c.digest)).toEqual([hmac('address', '203.0.113.5', 'k2'), hmac('network', '203.0.113.0/24', 'k2')]);
  });

  it('skips or refuses a request lacking a value, as the rule says', () => {
    expect(rules.forRequest(ctx('GET', '/v1/t/1'), trust)).toEqual({ missing: { rule: 'tenant', attribute: 'header:X-Tenant' } });
    expect(charges(rules.forRequest(ctx('GET', '/v1/t/1', { 'x-tenant': 'acme' }), trust)).map((c) => c.name)).toEqual(['tenant', 's']);
    // No claims (an API key): the claim rule is skipped; a JWT's claim counts.
    expect(charges(rules.forRequest(ctx('GET', '/v1/x'), trust)).map((c) => c.name)).toEqual(['s']);
    const jwt = charges(rules.forRequest(ctx('GET', '/v1/x', {}, '198.51.100.7', { claims: { org: 'acme' } }), trust));
    expect(jwt.map((c) => c.name)).toEqual(['org', 's']);
    expect(jwt[0]).toMatchObject({ gcra: true, limit: 2, burst: 2, windowMs: 1000 });
  });

  it('names a slot set per value for a rule with maxConcurrent, in a subject namespace of its own; alone it charges no window', () => {
    const slotted = new LimitRules(
      limitsSchema.parse([
        { name: 'reports', match: { path: '/v1/reports' }, by: ['client.address'], maxConcurrent: 3 },
        { name: 'both', match: { path: '/v1/reports' }, by: ['consumer.id'], perMinute: 5, maxConcurrent: 2 },
      ]),
      [],
      LimitRules.keyFrom(Buffer.alloc(32, 1)),
    );
    const one = slotted.forRequest(ctx('GET', '/v1/reports'), trust);
    const other = slotted.forRequest(ctx('GET', '/v1/reports', {}, '198.51.100.8'), trust);
    if (!('slots' in one) || !('slots' in other)) throw new Error('expected slots');
    expect(one.charges.map((c) => c.name)).toEqual(['both']);
    expect(one.slots.map((s) => [s.rule, s.max])).toEqual([
      ['reports', 3],
      ['both', 2],
    ]);
    const digest = one.charges[0]!.digest;
    expect(one.slots[1]!.subject).toBe(`rule:both:${digest}`);
    expect(one.slots[0]!.subject).toMatch(/^rule:reports:[A-Za-z0-9_-]{22}$/);
    expect(other.slots[0]!.subject).not.toBe(one.slots[0]!.subject);
    expect(other.slots[1]!.subject).toBe(one.slots[1]!.subject);
    expect(slotted.forRequest(ctx('GET', '/v1/other'), trust)).toEqual({ charges: [], slots: [] });
  });

  it.each([12_000, 1_000])('remembers charges in bounded memory whatever the values a client sends (header values of %i)', (length) => {
    const tenants = new LimitRules(
      limitsSchema.parse([{ name: 't', by: ['header:X-Tenant'], perMinute: 5 }]),
      [],
      LimitRules.keyFrom(Buffer.alloc(32, 1)),
    );
    // Values up to what a request head allows (16 KiB in all), each new: every one a miss.
    const value = (i: number) => `${i}-`.padEnd(length, 'x');
    const digests = new Set<string>();
    for (let i = 0; i < 3_000; i++)
      digests.add(charges(tenants.forRequest(ctx('GET', '/v1/x', { 'x-tenant': value(i) }), trust))[0]!.digest);
    expect(digests.size).toBe(3_000);
    // What the memo holds: its keys carry the raw values.
    const memo = (tenants as unknown as { counted: { keys(): Iterable<string> } }).counted;
    let chars = 0;
    for (const key of memo.keys()) chars += key.length;
    expect(chars).toBeLessThanOrEqual(2_000_000);
    // Each value still counted as its own, remembered or not (the same digest when asked again).
    for (const i of [0, 2_999]) {
      const again = charges(tenants.forRequest(ctx('GET', '/v1/x', { 'x-tenant': value(i) }), trust))[0]!.digest;
      expect(digests.has(again)).toBe(true);
    }
  });
});

describe('the limits schema', () => {
  const issues = (limits: unknown) => {
    const result = gatewayFileSchema.safeParse({ limits });
    return result.success ? [] : result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };

  it('refuses two windows, none, a burst without gcra, a cost over the limit, an unknown attribute, a path parameter not in the pattern', () => {
    expect(issues([{ name: 'a', by: ['consumer.id'], perMinute: 1, perDay: 2 }])).toEqual([
      'limits.0.perDay: set one window, not perMinute and perDay',
    ]);
    expect(issues([{ name: 'a', by: ['consumer.id'] }])).toEqual([
      'limits.0: set one of perSecond, perMinute, perHour, perDay, or maxConcurrent',
    ]);
    // maxConcurrent alone is a rule; a cell rate without a window is not.
    expect(issues([{ name: 'a', by: ['consumer.id'], maxConcurrent: 3 }])).toEqual([]);
    expect(issues([{ name: 'a', by: ['consumer.id'], maxConcurrent: 3, algorithm: 'gcra' }])).toEqual([
      'limits.0.algorithm: gcra needs a window (perSecond, perMinute, perHour or perDay)',
    ]);
    expect(issues([{ name: 'a', by: ['consumer.id'], maxConcurrent: 0 }])[0]).toMatch(/^limits\.0\.maxConcurrent: /);
    expect(issues([{ name: 'a', by: ['consumer.id'], perMinute: 5, burst: 2 }])).toEqual(['limits.0.burst: only with algorithm: gcra']);
    expect(issues([{ name: 'a', by: ['consumer.id'], perMinute: 5, cost: 6 }])).toEqual([
      'limits.0.cost: cannot exceed the limit (5): no request could pass',
    ]);
    expect(issues([{ name: 'a', by: ['client.prefix/33'], perMinute: 5 }])[0]).toMatch(/^limits\.0\.by\.0: "client\.prefix\/33": /);
    expect(issues([{ name: 'a', by: ['path:id'], perMinute: 5, match: { path: '/v1/{other}' } }])).toEqual([
      'limits.0.by.0: match.path has no parameter {id}',
    ]);
  });

  it('refuses a name used twice in the file, globally or on a service', () => {
    const result = gatewayFileSchema.safeParse({
      limits: [{ name: 'a', by: ['consumer.id'], perMinute: 1 }],
      services: [
        { name: 'svc', paths: ['/v1/x'], targets: ['http://127.0.0.1:1'], limits: [{ name: 'a', by: ['consumer.id'], perMinute: 1 }] },
      ],
    });
    expect(result.success).toBe(false);
    expect(result.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`)).toEqual([
      'services.0.limits.0.name: duplicate limit rule name "a"',
    ]);
  });
});
