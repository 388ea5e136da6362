import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { gatewayFileSchema } from '../../src/config/gateway-schema.js';
import { validated } from '../../src/config/load.js';
import { addressOf, parseCidr } from '../../src/policies/ip-rules/cidr.js';
import { IpRules, keyAdmits } from '../../src/policies/ip-rules/ip-rules.js';
import { HeaderRules } from '../../src/policies/header-rules/header-rules.js';

// The edge rules' config checks (docs/policies.md): each refusal names gateway.yaml and the field.

const service = (rules: string) => `
services:
  - name: categories
    paths: [/v1/categories]
    targets: [http://127.0.0.1:9]
${rules}
`;
const refusal = (yaml: string) => {
  try {
    validated('gateway.yaml', gatewayFileSchema, parse(yaml));
  } catch (err) {
    return (err as Error).message;
  }
  return 'accepted';
};

describe('IP rules', () => {
  it('parses IPv4, IPv6, bare addresses and IPv4-mapped networks strictly', () => {
    expect(parseCidr('198.51.100.0/24')).not.toBeTypeOf('string');
    expect(parseCidr('2001:db8::/32')).not.toBeTypeOf('string');
    expect(parseCidr('::1')).not.toBeTypeOf('string');
    for (const bad of ['127.1', '0x7f.0.0.1/8', '10.0.0.0/33', '::/129', 'fe80::1%eth0/64', '10.0.0.0/8/8', '10.0.0.0/', 'example.com'])
      expect(parseCidr(bad), bad).toBeTypeOf('string');
    const mapped = new IpRules({ deny: ['::ffff:203.0.113.0/120'] });
    expect(mapped.admits('203.0.113.7')).toBe(false);
    expect(mapped.admits('::ffff:203.0.113.7')).toBe(false);
    expect(mapped.admits('203.0.114.7')).toBe(true);
  });

  it('denies first, then allows only the allow list; a non-address is refused where an allow list exists', () => {
    const rules = new IpRules({ deny: ['198.51.100.66'], allow: ['198.51.100.0/24', '2001:db8::/32'] });
    expect(rules.admits('198.51.100.1')).toBe(true);
    expect(rules.admits('198.51.100.66')).toBe(false);
    expect(rules.admits('2001:db8:0:1::5')).toBe(true);
    expect(rules.admits('2001:db9::5')).toBe(false);
    expect(rules.admits('unknown')).toBe(false);
    expect(new IpRules({ deny: [] }).admits('unknown')).toBe(true);
    expect(addressOf('::ffff:1.2.3.4')?.kind()).toBe('ipv4');
  });

  it("a key's networks: none means anywhere; a stored entry that is no network admits no one", () => {
    expect(keyAdmits({}, '192.0.2.1')).toBe(true);
    expect(keyAdmits({ allowedCidrs: ['192.0.2.0/24'] }, '::ffff:192.0.2.9')).toBe(true);
    expect(keyAdmits({ allowedCidrs: ['not a cidr'] }, '192.0.2.9')).toBe(false);
  });

  it('refuses a bad CIDR at load, naming the file and the field', () => {
    expect(refusal('ipRules: { deny: ["10.0.0.0/8", "10.0.0.256"] }')).toBe(
      'gateway.yaml: ipRules.deny.1: "10.0.0.256": must be an IPv4 or IPv6 address or CIDR like 198.51.100.0/24 or 2001:db8::/32',
    );
    expect(refusal(service('    ipRules: { allow: ["2001:db8::/200"] }'))).toBe(
      'gateway.yaml: services.0.ipRules.allow.0: "2001:db8::/200": an IPv6 prefix length is at most 128',
    );
    expect(refusal('ipRules: { block: [] }')).toMatch(/^gateway\.yaml: ipRules: Unrecognized key/);
  });
});

describe('header rules', () => {
  const cases: Array<[string, string]> = [
    [
      '    requestHeaders: { set: { X-Tollgate-Plan: gold } }',
      'services.0.requestHeaders.set.X-Tollgate-Plan: "x-tollgate-plan" belongs to the gateway',
    ],
    ['    requestHeaders: { remove: [x_consumer_id] }', 'services.0.requestHeaders.remove.0: "x_consumer_id" belongs to the gateway'],
    ['    requestHeaders: { remove: [X-Request-Id] }', 'services.0.requestHeaders.remove.0: "x-request-id" is written by the gateway'],
    ['    requestHeaders: { set: { x-forwarded-for: 1.2.3.4 } }', 'x-forwarded-*'],
    ['    responseHeaders: { remove: [retry-after] }', 'services.0.responseHeaders.remove.0: "retry-after" is written by the gateway'],
    ['    responseHeaders: { set: { RateLimit-Policy: x } }', '"ratelimit-policy" is written by the gateway'],
    [
      '    responseHeaders: { set: { Content-Length: "5" } }',
      'services.0.responseHeaders.set.Content-Length: "content-length" is a hop-by-hop or framing field',
    ],
    ['    responseHeaders: { remove: [transfer-encoding] }', 'hop-by-hop or framing field'],
    ['    requestHeaders: { remove: [Connection] }', 'hop-by-hop or framing field'],
    ['    requestHeaders: { set: { host: example.com } }', 'services.0.requestHeaders.set.host: "host" is a hop-by-hop'],
    ['    requestHeaders: { set: { x-a: "one\\r\\nx-b: two" } }', 'services.0.requestHeaders.set.x-a: must hold no control character'],
    ['    requestHeaders: { set: { x-a: "nul\\0" } }', 'must hold no control character'],
    [
      '    requestHeaders: { set: { x-a: "${consumer.secret}" } }',
      'services.0.requestHeaders.set.x-a: unknown variable ${consumer.secret} (known: ${consumer.id}, ${consumer.plan}, ${request.id})',
    ],
    ['    requestHeaders: { set: { "x a": "1" } }', 'must be a header field name'],
    ['    requestHeaders: { set: { x-a: "1", X-A: "2" } }', 'is set twice'],
    ['    requestHeaders: { set: { x-a: "1" }, remove: [X-A] }', 'is also set'],
  ];
  it.each(cases)('refuses %s', (rules, message) => {
    const error = refusal(service(rules));
    expect(error.startsWith('gateway.yaml: services.0.')).toBe(true);
    expect(error).toContain(message);
  });

  it('applies removals, then sets with the variables filled in', () => {
    const rules = new HeaderRules({
      set: { 'X-Caller': '${consumer.id}:${consumer.plan} ($${request.id})', 'x-v': '2' },
      remove: ['X-Debug'],
    });
    const fields: Record<string, string | undefined> = { 'x-debug': '1', 'x-v': '1' };
    rules.apply(
      { set: (n, v) => (fields[n] = v), remove: (n) => (fields[n] = undefined) },
      { 'consumer.id': 'abc', 'consumer.plan': 'free', 'request.id': 'r-1' },
    );
    expect(fields).toEqual({ 'x-debug': undefined, 'x-v': '2', 'x-caller': 'abc:free ($r-1)' });
  });
});
