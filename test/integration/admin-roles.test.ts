import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, OPS_TOKEN, type AdminCall } from '../helpers/admin-client.js';
import { Contract } from '../helpers/contract.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';
import { configCopy, startGateway, type GatewayHandle } from '../helpers/stack.js';
import { REPO_ROOT } from '../harness/tollgate.js';

// The role table of the admin API, as a table: every operation of openapi-admin.yaml × every
// role (unscoped and limited to the owner `acme`) × a key of `acme` and a key of `globex`. Each
// call is allowed or refused with 403 insufficient_role as the table below says (written here
// on its own, not read from the product's), and a refused change leaves the key, the key list and
// the audit exactly as they were. One gateway on the embedded store: the decision is the admin
// API's, whatever the store.

const ROLE_TOKENS = {
  viewer: 'viewer-token-0123456789abcdefghijklmnopqr',
  operator: 'operator-token-0123456789abcdefghijklmnop',
  admin: OPS_TOKEN,
  'acme viewer': 'acme-viewer-token-0123456789abcdefghijklm',
  'acme operator': 'acme-operator-token-0123456789abcdefghijk',
  'acme admin': 'acme-admin-token-0123456789abcdefghijklmn',
} as const;
type Who = keyof typeof ROLE_TOKENS;
const TOKENS = [
  `viewer:viewer:${ROLE_TOKENS.viewer}`,
  `operator:operator:${ROLE_TOKENS.operator}`,
  `ops:${OPS_TOKEN}`,
  `acme-viewer:viewer:acme:${ROLE_TOKENS['acme viewer']}`,
  `acme-operator:operator:acme:${ROLE_TOKENS['acme operator']}`,
].join(',');
/** The acme admin comes from the file of hashed tokens, which joins the variable's. */
const TOKENS_FILE = `tokens:\n  - { label: acme-admin, role: admin, owner: acme, sha256: ${createHash('sha256').update(ROLE_TOKENS['acme admin']).digest('hex')} }\n`;

type Role = 'viewer' | 'operator' | 'admin';
const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };
/** Whose things an operation touches: one key's owner, every owner's (listings filter), all at once, or nobody's. */
type Touches = 'key' | 'listing' | 'everything' | 'nothing';

/** The expected table: each operation's weakest role and what it touches. */
const TABLE: Record<string, { role: Role; touches: Touches }> = {
  createKey: { role: 'operator', touches: 'key' },
  listKeys: { role: 'viewer', touches: 'listing' },
  getKey: { role: 'viewer', touches: 'key' },
  updateKey: { role: 'operator', touches: 'key' },
  revokeKey: { role: 'operator', touches: 'key' },
  rotateKey: { role: 'operator', touches: 'key' },
  unbanKey: { role: 'operator', touches: 'key' },
  getKeyUsage: { role: 'viewer', touches: 'key' },
  getKeyCredits: { role: 'viewer', touches: 'key' },
  changeKeyCredits: { role: 'operator', touches: 'key' },
  listPlans: { role: 'viewer', touches: 'nothing' },
  listServices: { role: 'viewer', touches: 'everything' },
  purgeServiceCache: { role: 'admin', touches: 'everything' },
  listAudit: { role: 'viewer', touches: 'listing' },
  getTraffic: { role: 'viewer', touches: 'everything' },
  listBans: { role: 'viewer', touches: 'listing' },
  exportUsage: { role: 'viewer', touches: 'listing' },
};

interface Operation {
  id: string;
  method: string;
  path: string;
}
const document = parseYaml(readFileSync(join(REPO_ROOT, 'openapi-admin.yaml'), 'utf8')) as {
  paths: Record<string, Record<string, { operationId: string; security?: unknown[] }>>;
};
const OPERATIONS: Operation[] = Object.entries(document.paths).flatMap(([path, item]) =>
  Object.entries(item)
    .filter(([method, op]) => method !== 'parameters' && op.security?.length !== 0)
    .map(([method, op]) => ({ id: op.operationId, method: method.toUpperCase(), path })),
);

let upstream: EchoUpstream;
let gateway: GatewayHandle;
let contract: Contract;

beforeAll(async () => {
  upstream = await new EchoUpstream().start();
  contract = await Contract.load('openapi-admin.yaml', '/admin/v1');
  const configDir = configCopy();
  writeFileSync(join(configDir, 'admin-tokens.yaml'), TOKENS_FILE);
  gateway = await startGateway({
    UPSTREAM_URL: upstream.url,
    TOLLGATE_CONFIG_DIR: configDir,
    TOLLGATE_ADMIN_TOKENS: TOKENS,
    TOLLGATE_ADMIN_TOKENS_FILE: join(configDir, 'admin-tokens.yaml'),
  });
});

afterAll(async () => {
  await gateway?.process.stop();
  await upstream?.stop();
});

async function call(who: Who, method: string, path: string, body?: unknown): Promise<AdminCall> {
  const answer = await admin(gateway.adminUrl, method, path, { token: ROLE_TOKENS[who], body });
  expect(contract.check(answer), `${who}: ${method} ${path} → ${answer.status} ${JSON.stringify(answer.body)}`).toEqual([]);
  return answer;
}

/** A fresh key of `owner`, made by the unscoped admin. */
async function keyOf(owner: string): Promise<string> {
  const created = await call('admin', 'POST', '/keys', { plan: 'free', owner, name: `${owner} key` });
  expect(created.status).toBe(201);
  return created.body.id;
}

/** The request that exercises `operation` on something of `owner`. */
async function requestFor(operation: Operation, owner: string): Promise<{ path: string; body?: unknown; keyId?: string }> {
  const touches = TABLE[operation.id]!.touches;
  if (operation.id === 'createKey') return { path: '/keys', body: { plan: 'free', owner, name: 'made in the table' } };
  if (operation.id === 'purgeServiceCache') return { path: '/services/default/cache' };
  if (operation.id === 'exportUsage') return { path: `/usage?from=2026-11-01&to=2026-12-01&format=jsonl&owner=${owner}` };
  if (touches === 'listing') return { path: `${operation.path}?owner=${owner}` };
  if (touches !== 'key') return { path: operation.path };
  const keyId = await keyOf(owner);
  const body =
    operation.id === 'updateKey'
      ? { name: 'renamed in the table' }
      : operation.id === 'rotateKey'
        ? { graceSeconds: 0 }
        : operation.id === 'changeKeyCredits'
          ? { add: 5, reason: 'made in the table' }
          : undefined;
  return { path: operation.path.replace('{id}', keyId), body, keyId };
}

/** What the unscoped admin sees of the state a refused call must not change. */
async function snapshot(keyId: string | undefined, owner: string) {
  const keys = await call('admin', 'GET', `/keys?owner=${owner}&limit=200`);
  const audit = await call('admin', 'GET', '/audit?limit=200');
  const key = keyId ? (await call('admin', 'GET', `/keys/${keyId}`)).body : null;
  return { keys: keys.body.keys, audit: audit.body.entries, key };
}

function expectedAllowed(who: Who, operation: Operation, owner: string): boolean {
  const { role, touches } = TABLE[operation.id]!;
  const [scope, ownRole] = who.includes(' ') ? (who.split(' ') as [string, Role]) : [undefined, who as Role];
  if (RANK[ownRole] < RANK[role]) return false;
  if (scope === undefined || touches === 'nothing') return true;
  return touches !== 'everything' && owner === scope;
}

describe('the admin API role table', () => {
  it('covers every operation of openapi-admin.yaml', () => {
    expect(OPERATIONS.map((o) => o.id).sort()).toEqual(Object.keys(TABLE).sort());
  });

  for (const who of Object.keys(ROLE_TOKENS) as Who[]) {
    for (const owner of ['acme', 'globex']) {
      it(`${who}, on ${owner}'s: each operation allowed or refused (403, nothing changed) as the table says`, async () => {
        for (const operation of OPERATIONS) {
          const request = await requestFor(operation, owner);
          const allowed = expectedAllowed(who, operation, owner);
          const before = allowed ? undefined : await snapshot(request.keyId, owner);
          const answer = await call(who, operation.method, request.path, request.body);
          const what = `${who} ${operation.id} on ${owner}'s → ${answer.status} ${JSON.stringify(answer.body)}`;
          if (!allowed) {
            expect(answer.status, what).toBe(403);
            expect(answer.body, what).toEqual({ code: 'insufficient_role', status: 403, message: expect.any(String) });
            expect(await snapshot(request.keyId, owner), what).toEqual(before);
            continue;
          }
          // The default service has no cache: the purge is allowed and finds nothing to purge.
          expect(answer.status === 404 && operation.id === 'purgeServiceCache' ? 200 : answer.status, what).toBeLessThan(300);
        }
      });
    }
  }

  it('filters listings to an owner-scoped caller’s owner when it names none', async () => {
    await keyOf('acme');
    await keyOf('globex');
    const keys = await call('acme viewer', 'GET', '/keys?limit=200');
    expect(keys.body.keys.length).toBeGreaterThan(0);
    expect(keys.body.keys.every((k: { owner?: string }) => k.owner === 'acme')).toBe(true);
    const audit = await call('acme viewer', 'GET', '/audit?limit=200');
    expect(audit.body.entries.length).toBeGreaterThan(0);
    expect(audit.body.entries.every((e: { owner?: string }) => e.owner === 'acme')).toBe(true);
    const all = await call('viewer', 'GET', '/keys?limit=200');
    expect(all.body.keys.some((k: { owner?: string }) => k.owner === 'globex')).toBe(true);
  });

  it('gives an owner-scoped caller’s new key its owner when the body names none', async () => {
    const created = await call('acme operator', 'POST', '/keys', { plan: 'free' });
    expect(created.status).toBe(201);
    expect(created.body.owner).toBe('acme');
  });

  it('records who made each change and under which role, and finds them by actor', async () => {
    const id = await keyOf('acme');
    await call('acme operator', 'PATCH', `/keys/${id}`, { name: 'by the partner' });
    const page = await call('viewer', 'GET', `/audit?actor=acme-operator&keyId=${id}`);
    expect(page.body.entries).toEqual([
      expect.objectContaining({ actor: 'acme-operator', role: 'operator', owner: 'acme', action: 'key.update', keyId: id }),
    ]);
  });
});
