import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin } from '../helpers/admin-client.js';
import { lineOf } from '../helpers/config-lines.js';
import { call, EdgeRulesStack, listeningOn, replacingServices, withoutShippedIpRules } from '../helpers/edge-rules-stack.js';
import { runCli } from '../helpers/processes.js';
import { bearer, configCopy, keysCli } from '../helpers/stack.js';

// IP rules against real processes (docs/policies.md, "IP rules"): the global deny before anything,
// a service's allow and deny lists, a key's allowedCidrs; the client address as tollgate trusts
// it (X-Forwarded-For behind trustProxyHops, the socket's peer without), IPv4, IPv6 and
// IPv4-mapped IPv6 alike; a gateway listening on ::1.

const services = (partnersAllow: string) => `
ipRules:
  deny: [203.0.113.0/24, "2001:db8:bad::/48"]
services:
  - name: partners
    paths: [/v1/partners]
    targets: [TARGET]
    ipRules: { allow: [${partnersAllow}] }
  - name: open
    paths: [/v1/open]
    targets: [TARGET]
    ipRules: { deny: ["192.0.2.66"] }
`;

const behindBalancer = (partnersAllow: string) => (yaml: string, target: string) =>
  replacingServices(yaml, services(partnersAllow).replaceAll('TARGET', target)).replace(/perMinute: 60 /, 'perMinute: 4 ');

describe('IP rules behind a load balancer (trustProxyHops 1, X-Forwarded-For)', () => {
  let stack: EdgeRulesStack;
  let key: string;
  let keyId: string;
  const from = (address: string, extra: Record<string, string> = {}) => ({ ...bearer(key), 'x-forwarded-for': address, ...extra });

  beforeAll(async () => {
    stack = await EdgeRulesStack.start(behindBalancer('198.51.100.0/24'), { TRUST_PROXY_HOPS: '1' });
    const created = await stack.key();
    key = created.key;
    keyId = created.id;
  }, 120_000);
  afterAll(() => stack?.close());

  it('the global deny refuses IPv4, IPv6 and IPv4-mapped IPv6 clients with 403 ip_not_allowed, on every path', async () => {
    for (const address of ['203.0.113.5', '::ffff:203.0.113.9', '2001:db8:bad:1::7', '::FFFF:cb00:7109']) {
      const reply = await call(`${stack.gateway.url}/v1/open/x`, { headers: from(address) });
      expect(reply.status, address).toBe(403);
      expect(reply.json).toEqual({ code: 'ip_not_allowed', message: expect.any(String), status: 403 });
      // Before the key was looked up and before any failed-auth accounting: no rate-limit fields.
      expect(reply.headers['x-ratelimit-limit']).toBeUndefined();
    }
    // Even the public OpenAPI document and an unauthenticated request: the network is refused first.
    expect((await call(`${stack.gateway.url}/v1/openapi.json`, { headers: { 'x-forwarded-for': '203.0.113.5' } })).status).toBe(403);
    expect((await call(`${stack.gateway.url}/v1/open/x`, { headers: { 'x-forwarded-for': '203.0.113.5' } })).status).toBe(403);
    expect(stack.target.hits).toHaveLength(0);
    expect(await stack.metric('tollgate_ip_refusals_total', { rule: 'global' })).toBe(6);
  });

  it('trusts only the entry trustProxyHops from the end: a client cannot hide behind an address it writes itself', async () => {
    // The client wrote 198.51.100.7; the balancer appended what it saw, 192.0.2.10.
    const spoofed = await call(`${stack.gateway.url}/v1/partners/x`, { headers: from('198.51.100.7, 192.0.2.10') });
    expect(spoofed.status).toBe(403);
    // The other way round: a denied address the client wrote proves nothing either.
    const honest = await call(`${stack.gateway.url}/v1/partners/x`, { headers: from('203.0.113.5, 198.51.100.7') });
    expect(honest.status).toBe(200);
  });

  it("a service's allow list admits its network only, counted as service:<name>; other services are untouched", async () => {
    const hitsBefore = stack.target.hits.length;
    expect((await call(`${stack.gateway.url}/v1/partners/a`, { headers: from('198.51.100.200') })).status).toBe(200);
    expect((await call(`${stack.gateway.url}/v1/partners/a`, { headers: from('::ffff:198.51.100.201') })).status).toBe(200);
    const outside = await call(`${stack.gateway.url}/v1/partners/a`, { headers: from('192.0.2.10') });
    expect(outside.status).toBe(403);
    expect(outside.json.code).toBe('ip_not_allowed');
    expect(outside.json.message).toContain('"partners"');
    expect((await call(`${stack.gateway.url}/v1/open/a`, { headers: from('192.0.2.10') })).status).toBe(200);
    // A service's deny list: one host.
    expect((await call(`${stack.gateway.url}/v1/open/a`, { headers: from('192.0.2.66') })).status).toBe(403);
    expect(stack.target.hits.length - hitsBefore).toBe(3);
    expect(await stack.metric('tollgate_ip_refusals_total', { rule: 'service:partners' })).toBeGreaterThanOrEqual(2);
    expect(await stack.metric('tollgate_ip_refusals_total', { rule: 'service:open' })).toBe(1);
  });

  it('a key restricted with --allow-cidr works from its networks only; elsewhere 403, no quota consumed, never forwarded', async () => {
    const restricted = await stack.key(['--plan', 'free', '--allow-cidr', '198.51.100.0/24', '--allow-cidr', '2001:db8:1::/48']);
    const headers = (address: string) => ({ ...bearer(restricted.key), 'x-forwarded-for': address });
    expect((await call(`${stack.gateway.url}/v1/open/k`, { headers: headers('198.51.100.9') })).status).toBe(200);
    expect((await call(`${stack.gateway.url}/v1/open/k`, { headers: headers('2001:db8:1:2::3') })).status).toBe(200);
    const usageBefore = (await admin(stack.gateway.adminUrl, 'GET', `/keys/${restricted.id}/usage`)).body;
    const hitsBefore = stack.target.hits.length;
    const elsewhere = await call(`${stack.gateway.url}/v1/open/k`, { headers: headers('192.0.2.20') });
    expect(elsewhere.status).toBe(403);
    expect(elsewhere.json).toEqual({ code: 'ip_not_allowed', message: 'This API key may not be used from this network.', status: 403 });
    expect(stack.target.hits.length).toBe(hitsBefore);
    const usageAfter = (await admin(stack.gateway.adminUrl, 'GET', `/keys/${restricted.id}/usage`)).body;
    expect(usageAfter.minute.used).toBe(usageBefore.minute.used);
    expect(await stack.metric('tollgate_ip_refusals_total', { rule: 'key' })).toBe(1);
  });

  it("refusals count toward the address's failed-authentication limit: past it, 429", async () => {
    const restricted = await stack.key(['--plan', 'free', '--allow-cidr', '198.51.100.0/24']);
    const headers = { ...bearer(restricted.key), 'x-forwarded-for': '192.0.2.30' };
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await call(`${stack.gateway.url}/v1/open/l`, { headers })).status);
    // unauthenticated.perMinute is 4 here.
    expect(statuses).toEqual([403, 403, 403, 403, 429, 429]);
    // The key's own network is not affected by its misuse elsewhere.
    expect((await call(`${stack.gateway.url}/v1/open/l`, { headers: { ...headers, 'x-forwarded-for': '198.51.100.1' } })).status).toBe(200);
  });

  it('set through the admin API (create and PATCH), shown in GET /keys/{id} and audited; CLI set-cidrs and --clear', async () => {
    const created = await admin(stack.gateway.adminUrl, 'POST', '/keys', { body: { plan: 'free', allowedCidrs: ['198.51.100.0/24'] } });
    expect(created.status).toBe(201);
    expect(created.body.allowedCidrs).toEqual(['198.51.100.0/24']);
    const id = created.body.id as string;
    const bad = await admin(stack.gateway.adminUrl, 'PATCH', `/keys/${id}`, { body: { allowedCidrs: ['198.51.100.0/33'] } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/allowedCidrs\.0 .*prefix length/);
    const empty = await admin(stack.gateway.adminUrl, 'PATCH', `/keys/${id}`, { body: { allowedCidrs: [] } });
    expect(empty.status).toBe(400);
    const patched = await admin(stack.gateway.adminUrl, 'PATCH', `/keys/${id}`, { body: { allowedCidrs: ['192.0.2.0/24', '::1'] } });
    expect(patched.body.allowedCidrs).toEqual(['192.0.2.0/24', '::1']);
    expect((await admin(stack.gateway.adminUrl, 'GET', `/keys/${id}`)).body.allowedCidrs).toEqual(['192.0.2.0/24', '::1']);
    const audit = await admin(stack.gateway.adminUrl, 'GET', `/audit?keyId=${id}`);
    const update = audit.body.entries.find((e: any) => e.action === 'key.update');
    expect(update.changes.allowedCidrs).toEqual({ before: ['198.51.100.0/24'], after: ['192.0.2.0/24', '::1'] });
    // The store tells every replica at once: the new list is in force now.
    expect(
      (await call(`${stack.gateway.url}/v1/open/p`, { headers: { ...bearer(created.body.key), 'x-forwarded-for': '192.0.2.99' } })).status,
    ).toBe(200);

    const set = await keysCli(stack.redis, ['set-cidrs', id, '203.0.113.0/24', '--json'], stack.configDir);
    expect(set.code).toBe(0);
    expect(JSON.parse(set.stdout).allowedCidrs).toEqual(['203.0.113.0/24']);
    const typo = await keysCli(stack.redis, ['set-cidrs', id, '10.0.0.0/8', '300.1.1.1'], stack.configDir);
    expect(typo.code).not.toBe(0);
    expect(typo.stderr).toContain('"300.1.1.1"');
    const cleared = await keysCli(stack.redis, ['set-cidrs', id, '--clear', '--json'], stack.configDir);
    expect(JSON.parse(cleared.stdout).allowedCidrs).toBeUndefined();
    const shown = await keysCli(stack.redis, ['show', keyId], stack.configDir);
    expect(shown.stdout).not.toContain('networks:');
  });

  it('are shown by GET /admin/v1/services, follow gateway.yaml hot, and a bad CIDR in a reload is refused naming file and field', async () => {
    const before = await admin(stack.gateway.adminUrl, 'GET', '/services');
    expect(before.body.ipRules).toEqual({ deny: ['203.0.113.0/24', '2001:db8:bad::/48'] });
    expect(before.body.services.find((s: any) => s.name === 'partners').ipRules).toEqual({ deny: [], allow: ['198.51.100.0/24'] });
    expect(before.body.services.find((s: any) => s.name === 'default').ipRules).toBeNull();

    const badCidr = behindBalancer('198.51.100.0/24, 10.0.0.0/40');
    const refused = await stack.reload(badCidr, 'config reload refused');
    expect(refused.error).toBe(
      `gateway.yaml: services.0.ipRules.allow.1: "10.0.0.0/40": an IPv4 prefix length is at most 32 (line ${lineOf(badCidr(stack.shipped, stack.target.url), '10.0.0.0/40')})`,
    );
    expect((await call(`${stack.gateway.url}/v1/partners/r`, { headers: from('192.0.2.10') })).status).toBe(403);

    await stack.reload(behindBalancer('192.0.2.0/24'));
    expect((await call(`${stack.gateway.url}/v1/partners/r`, { headers: from('192.0.2.10') })).status).toBe(200);
    expect((await call(`${stack.gateway.url}/v1/partners/r`, { headers: from('198.51.100.7') })).status).toBe(403);
    const after = await admin(stack.gateway.adminUrl, 'GET', '/services');
    expect(after.body.services.find((s: any) => s.name === 'partners').ipRules.allow).toEqual(['192.0.2.0/24']);
  });

  it('the global deny needs no Redis: with the store gone it still answers 403 at once', async () => {
    await stack.redis.stop();
    const reply = await call(`${stack.gateway.url}/v1/open/x`, { headers: from('203.0.113.77') });
    expect(reply.status).toBe(403);
    expect(reply.json.code).toBe('ip_not_allowed');
  });
});

describe('IP rules on a gateway listening on ::1 (the socket peer is the client)', () => {
  let stack: EdgeRulesStack;

  beforeAll(async () => {
    stack = await EdgeRulesStack.start((yaml, target) =>
      replacingServices(
        listeningOn(yaml, '::1'),
        `
services:
  - name: loopback
    paths: [/v1/loopback]
    targets: [${target}]
    ipRules: { allow: ["::1/128"] }
  - name: nov6
    paths: [/v1/nov6]
    targets: [${target}]
    ipRules: { deny: ["::/0"] }
`,
      ),
    );
  }, 120_000);
  afterAll(() => stack?.close());

  it('matches the IPv6 peer against service rules and key networks', async () => {
    expect(stack.gateway.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
    const { key } = await stack.key();
    expect((await call(`${stack.gateway.url}/v1/loopback/a`, { headers: bearer(key) })).status).toBe(200);
    expect((await call(`${stack.gateway.url}/v1/nov6/a`, { headers: bearer(key) })).status).toBe(403);
    // A forwarded address is ignored without trustProxyHops.
    expect((await call(`${stack.gateway.url}/v1/nov6/a`, { headers: { ...bearer(key), 'x-forwarded-for': '198.51.100.1' } })).status).toBe(
      403,
    );

    const here = await stack.key(['--plan', 'free', '--allow-cidr', '::1/128']);
    const elsewhere = await stack.key(['--plan', 'free', '--allow-cidr', '2001:db8::/32', '--allow-cidr', '127.0.0.0/8']);
    expect((await call(`${stack.gateway.url}/v1/x`, { headers: bearer(here.key) })).status).toBe(200);
    const refused = await call(`${stack.gateway.url}/v1/x`, { headers: bearer(elsewhere.key) });
    expect(refused.status).toBe(403);
    expect(refused.json.code).toBe('ip_not_allowed');
  });
});

describe('IP rules at load', () => {
  it('check-config refuses a bad CIDR naming the file and the field', async () => {
    const dir = configCopy({
      'gateway.yaml': (t) => `${withoutShippedIpRules(t)}\nipRules:\n  deny: [203.0.113.0/24, "2001:db8::zz/48"]\n`,
    });
    const result = await runCli(['check-config', dir], {});
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('gateway.yaml: ipRules.deny.1: "2001:db8::zz/48": must be an IPv4 or IPv6 address or CIDR');
  });
});
