import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { checkNginxConfig, nginxBinary, nginxConfigFor } from '../helpers/nginx.js';
import { commandPath, describeNeeding } from '../helpers/needs-tool.js';
import { REPO_ROOT, runCli } from '../helpers/processes.js';

// The deploy files checked with what runs without a Docker engine: Debian's docker-compose
// validates and resolves docker-compose.yml (`config`), nginx lints the load balancer's config
// (`nginx -t`), and the Dockerfile's structure is checked against the repository.

const composeFile = join(REPO_ROOT, 'docker-compose.yml');
const composeMissing = commandPath('docker-compose') ? undefined : 'docker-compose is not installed (apt-get install docker-compose)';
const nginx = nginxBinary();

const SECRET = 'compose-check-secret-0123456789abcdefghijklmnop';

function compose(env: Record<string, string>, options: string[] = []) {
  // Global options (`--profile`) go before the command.
  const result = spawnSync('docker-compose', ['-f', composeFile, ...options, 'config'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  ports?: unknown[];
  volumes?: unknown[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  profiles?: string[];
}

/** Services started by a plain `up` (docker-compose 1.x `config` also lists those of every profile). */
const withoutProfiles = (services: Record<string, Service>) => Object.fromEntries(Object.entries(services).filter(([, s]) => !s.profiles));

describeNeeding(composeMissing, 'docker-compose.yml (docker-compose config)', () => {
  const resolved = () => {
    const result = compose({ TOLLGATE_ASSERTION_SECRET: SECRET });
    expect(result.code, result.stderr).toBe(0);
    return parseYaml(result.stdout) as { services: Record<string, Service>; volumes: Record<string, unknown> };
  };

  it('is valid and has Redis, the backend, three gateways and a load balancer', () => {
    const { services } = resolved();
    expect(Object.keys(withoutProfiles(services)).sort()).toEqual(['backend', 'gateway-1', 'gateway-2', 'gateway-3', 'lb', 'redis']);
  });

  it('refuses to start without TOLLGATE_ASSERTION_SECRET, naming it', () => {
    const result = compose({});
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('TOLLGATE_ASSERTION_SECRET');
  });

  it('runs Redis with AOF persistence (everysec) on a volume', () => {
    const { services, volumes } = resolved();
    const command = services.redis!.command!.join(' ');
    expect(command).toContain('--appendonly yes');
    expect(command).toContain('--appendfsync everysec');
    expect(JSON.stringify(services.redis!.volumes)).toContain('/data');
    expect(Object.keys(volumes)).toContain('redis-data');
  });

  it('publishes only the load balancer, with every gateway configured for three replicas behind it', () => {
    const { services } = resolved();
    for (const [name, service] of Object.entries(withoutProfiles(services))) {
      if (name !== 'lb') expect(service.ports, `${name} publishes nothing`).toBeUndefined();
    }
    expect(services.lb!.ports).toHaveLength(1);
    expect(JSON.stringify(services.lb!.volumes)).toContain('config/nginx.conf');
    for (const name of ['gateway-1', 'gateway-2', 'gateway-3']) {
      const gateway = services[name]!;
      expect(gateway.command).toEqual(['gateway']);
      expect(gateway.environment).toMatchObject({
        REDIS_URL: 'redis://redis:6379',
        UPSTREAM_URL: 'http://backend:8081',
        QUOTA_REPLICAS: '3',
        ADMIN_HOST: '0.0.0.0',
        TRUST_PROXY_HOPS: '1',
        TOLLGATE_ASSERTION_SECRET: SECRET,
      });
      expect(gateway.healthcheck!.test.join(' ')).toContain('/readyz');
      expect(gateway.depends_on).toMatchObject({ redis: { condition: 'service_healthy' }, backend: { condition: 'service_healthy' } });
      expect(services.lb!.depends_on![name]).toEqual({ condition: 'service_healthy' });
    }
    expect(services.backend!.environment).toMatchObject({ BACKEND_HOST: '0.0.0.0', TOLLGATE_ASSERTION_SECRET: SECRET });
    expect(services.backend!.healthcheck).toBeDefined();
  });

  describe('profile `services`: a gateway in front of two services of two instances each', () => {
    const withProfile = () => {
      const result = compose({ TOLLGATE_ASSERTION_SECRET: SECRET }, ['--profile', 'services']);
      expect(result.code, result.stderr).toBe(0);
      return (parseYaml(result.stdout) as { services: Record<string, Service> }).services;
    };
    /** The host directory mounted as the example gateway's config (docker-compose resolves it to an absolute path). */
    const configDir = (gateway: Service) => {
      const mount = (gateway.volumes as string[]).find((v) => typeof v === 'string' && v.split(':')[1] === '/app/config');
      expect(mount, JSON.stringify(gateway.volumes)).toBeDefined();
      return mount!.split(':')[0]!;
    };

    it('resolves, and its gateway is published on loopback only, trusts no forwarding hop and mounts its own config', () => {
      const services = withProfile();
      const gateway = services['gateway-services']!;
      expect(gateway.profiles).toEqual(['services']);
      expect(gateway.command).toEqual(['gateway']);
      expect(gateway.ports).toEqual([expect.stringMatching(/^127\.0\.0\.1:8090:8080/)]);
      expect(gateway.environment).toMatchObject({
        REDIS_URL: 'redis://redis:6379',
        UPSTREAM_URL: 'http://backend:8081',
        TRUST_PROXY_HOPS: '0',
      });
      expect(gateway.healthcheck!.test.join(' ')).toContain('/readyz');
      expect(configDir(gateway)).toBe(join(REPO_ROOT, 'examples/services'));
    });

    it('mounts a config that check-config accepts, whose services have two or more targets each, every one an instance of the profile', async () => {
      const services = withProfile();
      const dir = configDir(services['gateway-services']!);
      const checked = await runCli(['check-config', dir], {});
      expect(checked.code, checked.stderr).toBe(0);
      expect(checked.stdout).toContain('config OK');

      const file = parseYaml(readFileSync(join(dir, 'gateway.yaml'), 'utf8')) as {
        services: Array<{ name: string; targets: Array<string | { url: string }> }>;
      };
      expect(file.services.length).toBeGreaterThanOrEqual(2);
      for (const service of file.services) {
        expect(service.targets.length, service.name).toBeGreaterThanOrEqual(2);
        for (const target of service.targets) {
          const url = new URL(typeof target === 'string' ? target : target.url);
          const instance = services[url.hostname];
          expect(instance, `${service.name}: ${url.href} names a compose service`).toBeDefined();
          expect(instance!.profiles, url.hostname).toEqual(['services']);
          expect(instance!.command).toEqual(['backend']);
          expect(instance!.environment).toMatchObject({
            BACKEND_HOST: '0.0.0.0',
            BACKEND_PORT: url.port,
            TOLLGATE_ASSERTION_SECRET: SECRET,
          });
          expect(services['gateway-services']!.depends_on).toHaveProperty(url.hostname);
        }
      }
    });
  });
});

describe('Dockerfile', () => {
  const dockerfile = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');
  const ignored = readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));

  it('is multi-stage and runs as a non-root user with a liveness check on /healthz', () => {
    expect(dockerfile.match(/^FROM /gm)!.length).toBeGreaterThanOrEqual(2);
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(/^HEALTHCHECK [\s\S]*\/healthz/m);
    expect(runtime).toContain('--from=deps /app/node_modules');
    expect(runtime).toContain('--from=build /app/dist');
    expect(dockerfile).toContain('npm ci --omit=dev');
  });

  it('installs the production dependencies as a consumer gets them: no install script patches one', () => {
    const deps = dockerfile.slice(dockerfile.indexOf(' AS deps'), dockerfile.indexOf(' AS runtime'));
    expect(deps).toMatch(/npm ci --omit=dev --ignore-scripts/);
    expect(deps).not.toMatch(/patch-package|patches/);
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
      dependencies: Record<string, string>;
    };
    expect(pkg.dependencies['patch-package']).toBeUndefined();
    // prepare runs on installs from git and is flagged as an install script by npm: build in prepack.
    expect(Object.keys(pkg.scripts).filter((name) => /^((pre|post)?install|prepare)$/.test(name))).toEqual([]);
  });

  it('copies only paths that exist and that .dockerignore lets into the build context', () => {
    const sources = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]!.split(/\s+/));
    expect(sources.length).toBeGreaterThan(0);
    for (const source of sources) {
      expect(existsSync(join(REPO_ROOT, source)), `${source} exists`).toBe(true);
      expect(ignored, `${source} is not ignored`).not.toContain(source);
    }
  });
});

describeNeeding(nginx ? undefined : 'nginx is not installed (apt-get install nginx)', 'config/nginx.conf (nginx -t)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-nginx-check-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('passes nginx -t with the gateway hosts and paths rewritten for this machine', () => {
    const config = nginxConfigFor({ listenPort: 18080, gateways: ['127.0.0.1:18081', '127.0.0.1:18082', '127.0.0.1:18083'], dir });
    const result = checkNginxConfig(nginx!, config, dir);
    expect(result.output, result.output).toContain('test is successful');
    expect(result.code).toBe(0);
  });

  it('keeps connections to the gateways alive and forwards the client address', () => {
    const shipped = readFileSync(join(REPO_ROOT, 'config/nginx.conf'), 'utf8');
    expect(shipped).toMatch(/^\s*keepalive \d+;/m);
    expect(shipped).toMatch(/^\s*proxy_http_version 1\.1;/m);
    expect(shipped).toMatch(/^\s*proxy_set_header Connection "";/m);
    expect(shipped).toMatch(/^\s*proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;/m);
    for (const n of [1, 2, 3]) expect(shipped).toContain(`server gateway-${n}:8080`);
  });
});
