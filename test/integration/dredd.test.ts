import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/processes.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, createKey, startBackend, startGateway, type GatewayHandle } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// openapi.yaml run through Dredd, a third-party contract tester, against the bundled stack: a real
// redis-server, backend and gateway. Dredd makes one request per documented response;
// dredd/hooks.cjs shapes each into the request that gets that response, or skips those only a
// fault produces (contract.test.ts injects those faults). Dredd 14.1.0 is the last release
// (2021) and installs and runs on Node 20; Prism, the maintained alternative, needs Node >= 24.

let redis: TestRedis;
let backend: Awaited<ReturnType<typeof startBackend>>;
let gateway: GatewayHandle;
const env: Record<string, string> = {};

beforeAll(async () => {
  // The used-up key below has one request a day: midnight must not fall inside this file.
  await awayFromDayEdge(20);
  redis = await TestRedis.start();
  backend = await startBackend({ REDIS_URL: redis.url });
  gateway = await startGateway({ REDIS_URL: redis.url, UPSTREAM_URL: backend.url });
  env.DREDD_KEY = (await createKey(redis, ['--plan', 'business'])).key;
  // One request a day: once used, every answer is a 429 whatever the minute.
  const usedUp = (await createKey(redis, ['--plan', 'free', '--per-minute', '1', '--per-day', '1'])).key;
  expect((await fetch(`${gateway.url}/v1/store/orders`, { headers: bearer(usedUp) })).status).toBe(200);
  env.DREDD_USED_UP_KEY = usedUp;
});

afterAll(async () => {
  await gateway?.process.stop();
  await backend?.process.stop();
  await redis?.stop();
});

interface DreddRun {
  code: number;
  output: string;
  counts: { passing: number; failing: number; errors: number; skipped: number };
}

function dredd(document: string): Promise<DreddRun> {
  const bin = join(REPO_ROOT, 'node_modules/.bin/dredd');
  const args = [document, `${gateway.url}/v1`, '--hookfiles', join(REPO_ROOT, 'test/integration/dredd/hooks.cjs')];
  return new Promise((resolve) => {
    execFile(
      bin,
      args,
      { cwd: REPO_ROOT, env: { ...process.env, ...env, DREDD_DOCUMENT: document }, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        // Dredd colours its output whatever the terminal: plain text for matching.
        const output = (stdout + stderr).replace(/\u001b\[[0-9;]*m/g, '');
        const match = /complete: (\d+) passing, (\d+) failing, (\d+) errors, (\d+) skipped/.exec(output);
        const [passing, failing, errors, skipped] = (match?.slice(1) ?? ['0', '0', '0', '0']).map(Number) as [
          number,
          number,
          number,
          number,
        ];
        resolve({ code: err ? Number(err.code ?? 1) : 0, output, counts: { passing, failing, errors, skipped } });
      },
    );
  });
}

describe('Dredd against the bundled stack', () => {
  it('loads openapi.yaml and finds every response it can provoke as documented', async () => {
    const run = await dredd(join(REPO_ROOT, 'openapi.yaml'));
    expect(run.counts, run.output.slice(-4000)).toMatchObject({ failing: 0, errors: 0 });
    // Every operation's 2xx, 400, 401, 405, 413, 415 and 429 ran; only fault statuses were skipped.
    expect(run.counts.passing).toBeGreaterThanOrEqual(40);
    // The conditional GET: If-None-Match answered 304, without a body, with its validators.
    expect(run.output).toMatch(/pass: GET \(304\) \/categories/);
    expect(run.code).toBe(0);
  });

  it('fails a document that departs from the real answers (so a pass means something)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-dredd-'));
    const broken = join(dir, 'openapi.yaml');
    const text = readFileSync(join(REPO_ROOT, 'openapi.yaml'), 'utf8');
    // X-Tollgate-Degraded documented as always present (it is only sent in degraded mode), and
    // createCategory documented as answering 200 where it answers 201.
    const departing = text
      .replace(/( {4}X-Tollgate-Degraded:\n {6}description: [^\n]*\n)/, '$1      required: true\n')
      .replace(
        "        '201':\n          description: The created category",
        "        '200':\n          description: The created category",
      );
    expect(departing).not.toBe(text);
    writeFileSync(broken, departing);
    const run = await dredd(broken);
    expect(run.output).toMatch(/fail: GET \(200\) \/categories[\s\S]*x-tollgate-degraded/i);
    expect(run.output).toMatch(/fail: POST \(200\) \/categories/);
    expect(run.code).not.toBe(0);
  });
});
