import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../harness/free-port.js';
import { REPO_ROOT } from '../harness/tollgate.js';
import { packInto, run, userEnv } from '../helpers/user-shell.js';

// What a user does with the published package: `npm pack`, then a plain `npm install` of the
// tarball in an empty folder (no flags that skip scripts), then `npx tollgate up` there with no
// config/ in the folder: the shipped config is the fallback, demo keys are printed and a request
// with one of them is served by the bundled backend through the gateway.

let scratch: string;
let app: string;
let up: ChildProcess | undefined;
let output = '';

/** Resolves once the output of `up` matches, or rejects when it exits or the time is up. */
function waitForOutput(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const match = output.match(pattern);
      if (match) {
        done();
        resolve(match);
      }
    };
    const exited = (code: number | null) => {
      done();
      reject(new Error(`tollgate up exited (${code}) before printing ${pattern}:\n${output}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no ${pattern} within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      up!.stdout!.off('data', check);
      up!.stderr!.off('data', check);
      up!.off('exit', exited);
    };
    up!.stdout!.on('data', check);
    up!.stderr!.on('data', check);
    up!.once('exit', exited);
    check();
  });
}

beforeAll(async () => {
  scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tollgate-package-')));
  const tarball = await packInto(REPO_ROOT, scratch);

  app = join(scratch, 'app');
  mkdirSync(app);
  // A package.json of its own, so npm installs here whatever folders above hold one.
  writeFileSync(join(app, 'package.json'), '{ "name": "tollgate-user", "version": "1.0.0", "private": true }\n');
  // A plain install: the user's flags are none. The offline ones only spare the registry when the
  // npm cache already has the dependencies; nothing here skips an install script.
  await run('npm', ['install', tarball, '--prefer-offline', '--no-audit', '--no-fund'], {
    cwd: app,
    env: userEnv(),
    maxBuffer: 16 * 1024 * 1024,
  });

  const [gatewayPort, adminPort, backendPort] = [await freePort(), await freePort(), await freePort()];
  up = spawn(join(app, 'node_modules', '.bin', 'tollgate'), ['up'], {
    cwd: app,
    env: userEnv({
      GATEWAY_PORT: String(gatewayPort),
      ADMIN_PORT: String(adminPort),
      BACKEND_PORT: String(backendPort),
      LOG_LEVEL: 'warn',
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  for (const stream of [up.stdout!, up.stderr!]) stream.on('data', (chunk: Buffer) => (output += chunk.toString()));
}, 600_000);

afterAll(async () => {
  if (up && up.exitCode === null && up.signalCode === null) {
    const exited = new Promise((resolve) => up!.once('exit', resolve));
    up.kill('SIGTERM');
    await exited;
  }
  if (scratch) rmSync(scratch, { recursive: true, force: true });
}, 60_000);

describe('the packed tarball installed in an empty folder', () => {
  it('installs with no install script of its own and no patched dependency', () => {
    const installed = JSON.parse(readFileSync(join(app, 'node_modules', 'tollgate', 'package.json'), 'utf8')) as {
      scripts?: Record<string, string>;
    };
    expect(Object.keys(installed.scripts ?? {}).filter((name) => /^((pre|post)?install|prepare)$/.test(name))).toEqual([]);
  });

  it('`tollgate up` runs on the shipped config, prints demo keys and serves a request with one', async () => {
    const [, gatewayUrl] = await waitForOutput(/tollgate is up: gateway (http:\/\/\S+)\/v1/, 120_000);
    const [, key] = await waitForOutput(/^ {2}free\s+(tg_\S+)$/m, 30_000);
    expect(output).toContain(`Config: ${join(app, 'node_modules', 'tollgate', 'config')}`);

    const answer = await fetch(`${gatewayUrl}/v1/categories`, { headers: { authorization: `Bearer ${key}` } });
    expect(answer.status).toBe(200);
    expect(Array.isArray(await answer.json())).toBe(true);
    expect(answer.headers.get('x-ratelimit-limit')).toBe('60');

    // The OpenAPI document is found inside the package too.
    const openapi = await fetch(`${gatewayUrl}/v1/openapi.json`);
    expect(openapi.status).toBe(200);
  }, 180_000);

  it('`tollgate check-config` there names the shipped files it read', async () => {
    const checked = await run(join(app, 'node_modules', '.bin', 'tollgate'), ['check-config'], { cwd: app, env: userEnv() });
    const shipped = join(app, 'node_modules', 'tollgate');
    expect(checked.stdout).toContain(`read ${join(shipped, 'config', 'gateway.yaml')}\n`);
    expect(checked.stdout).toContain(`read ${join(shipped, 'config', 'plans.yaml')}\n`);
    expect(checked.stdout).toContain(`read ${join(shipped, 'openapi.yaml')}\n`);
    expect(checked.stdout).toMatch(/config OK: /);
  }, 60_000);
});
