import { cpSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIG_DIR, REPO_ROOT, runCli as runInstalledCli, startGateway, type GatewayHandle } from '../harness/tollgate.js';
import { CountingTarget } from '../helpers/counting-targets.js';
import { call } from '../helpers/edge-rules-stack.js';
import { TEST_PROCESS_ENV } from '../helpers/processes.js';
import { TestRedis } from '../helpers/redis-server.js';
import { packInto, run, userEnv } from '../helpers/user-shell.js';
import { bearer, createKey } from '../helpers/stack.js';

// The example policy (examples/tenant-header-policy) as a user gets it: packed into its own
// tarball, installed with tollgate's tarball in an empty folder, type-checked against the
// installed package's declarations, configured by package name in gateway.yaml, and exercised
// through two gateway replicas of the installed package on one Redis (its KV pin seen by both).

const EXAMPLE = join(REPO_ROOT, 'examples', 'tenant-header-policy');

let scratch: string;
let app: string;
let configDir: string;
let redis: TestRedis;
let target: CountingTarget;
let replicas: GatewayHandle[] = [];

beforeAll(async () => {
  scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tollgate-example-')));
  const [tollgate, example] = [await packInto(REPO_ROOT, scratch), await packInto(EXAMPLE, scratch)];
  app = join(scratch, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), '{ "name": "tollgate-user", "version": "1.0.0", "private": true }\n');
  await run('npm', ['install', tollgate, example, '--prefer-offline', '--no-audit', '--no-fund'], {
    cwd: app,
    env: userEnv(),
    maxBuffer: 16 * 1024 * 1024,
  });

  configDir = join(app, 'config');
  cpSync(CONFIG_DIR, configDir, { recursive: true });
  const gatewayYaml = join(configDir, 'gateway.yaml');
  writeFileSync(
    gatewayYaml,
    readFileSync(gatewayYaml, 'utf8').replace(
      /^policies: \[\][^\n]*\n/m,
      'policies:\n  - use: tollgate-tenant-header\n    options: { pinSeconds: 600, tenants: { acme: [acme-eu, acme-us] } }\n',
    ),
  );
  target = await new CountingTarget('tenant').start();
  target.behaviour = (req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ tenant: req.headers['x-tenant-verified'] }));
  };
  redis = await TestRedis.start();
  const installedCli = join(app, 'node_modules', 'tollgate', 'dist', 'cli', 'main.js');
  const env = { ...TEST_PROCESS_ENV, REDIS_URL: redis.url, UPSTREAM_URL: target.url, TOLLGATE_CONFIG_DIR: configDir };
  replicas = await Promise.all([startGateway(env, { cli: installedCli }), startGateway(env, { cli: installedCli })]);
}, 600_000);

afterAll(async () => {
  await Promise.all(replicas.map((replica) => replica.process.stop()));
  await redis?.stop();
  await target?.kill();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
}, 60_000);

describe('the example policy, packed and installed', () => {
  it("type-checks against the installed package's declarations", async () => {
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          allowJs: true,
          checkJs: true,
          noEmit: true,
          strict: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          types: [],
        },
        files: ['node_modules/tollgate-tenant-header/index.js'],
      }),
    );
    const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const checked = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: app }).catch((err: { stdout: string }) => err);
    expect('stdout' in checked ? checked.stdout : '').toBe('');
  });

  it('is loaded by name and its options checked by check-config of the installed package', async () => {
    const checked = await runInstalledCli(
      ['check-config', configDir],
      { ...TEST_PROCESS_ENV },
      join(app, 'node_modules', 'tollgate', 'dist', 'cli', 'main.js'),
    );
    expect(checked.code, checked.stderr).toBe(0);
  });

  it('refuses a request that names no tenant with its own Error body', async () => {
    const key = await createKey(redis, ['--plan', 'pro'], configDir);
    const reply = await call(`${replicas[0]!.url}/v1/categories`, { headers: bearer(key.key) });
    expect(reply.status).toBe(400);
    expect(reply.json).toEqual({ code: 'tenant_missing', message: 'Name the tenant in the X-Tenant header.', status: 400 });
  });

  it('pins a key to its first tenant in the KV, seen by the other replica', async () => {
    const key = await createKey(redis, ['--plan', 'pro'], configDir);
    const [a, b] = replicas as [GatewayHandle, GatewayHandle];
    const first = await call(`${a.url}/v1/categories`, { headers: { ...bearer(key.key), 'x-tenant': 'blue' } });
    expect(first.status).toBe(200);
    expect(first.json).toEqual({ tenant: 'blue' });
    const other = await call(`${b.url}/v1/categories`, { headers: { ...bearer(key.key), 'x-tenant': 'green' } });
    expect(other.status).toBe(403);
    expect(other.json.code).toBe('tenant_not_allowed');
    const same = await call(`${b.url}/v1/categories`, { headers: { ...bearer(key.key), 'x-tenant': 'blue' } });
    expect(same.status).toBe(200);
    // The pin is the policy's own key in Redis, under its namespace.
    const client = redis.client();
    try {
      expect(await client.get(`tg:kv:tenant-header:{pin:${key.id}}`)).toBe('blue');
    } finally {
      client.disconnect();
    }
  });

  it("lets a listed owner's keys act for its tenants only", async () => {
    const key = await createKey(redis, ['--plan', 'pro', '--owner', 'acme'], configDir);
    for (const [tenant, status] of [
      ['acme-eu', 200],
      ['acme-us', 200],
      ['blue', 403],
    ] as const) {
      const reply = await call(`${replicas[1]!.url}/v1/categories`, { headers: { ...bearer(key.key), 'x-tenant': tenant } });
      expect(reply.status, tenant).toBe(status);
    }
  });
});
