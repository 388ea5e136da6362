/**
 * Redis's instructions per LEASE_SCRIPT step (callgrind, as quota-script-instructions.ts): per
 * key, three holders each take a block, renew it, and end it (ask, ask, ending give-back), on
 * fixed windows or gcra. With --compare DIR (another build's dist/), that build is counted too.
 *   node --import tsx bench/lease-script-instructions.ts --compare /tmp/<build>/dist
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort } from '../test/harness/free-port.js';
import { waitForRedis } from '../test/harness/wait-for-redis.js';

const { values } = parseArgs({
  options: {
    dist: { type: 'string', default: resolve(import.meta.dirname, '../dist') },
    compare: { type: 'string' },
    keys: { type: 'string', default: '300' },
    algorithms: { type: 'string', default: 'fixed,gcra' },
  },
});
const keys = Number(values.keys);

for (const algorithm of values.algorithms.split(','))
  for (const dist of [values.dist, ...(values.compare ? [values.compare] : [])]) {
    const perStep = await count(dist, algorithm === 'gcra');
    console.log(`${dist} ${algorithm}: ${Math.round(perStep)} Redis instructions a lease step`);
  }

async function count(dist: string, gcra: boolean): Promise<number> {
  const { RedisQuotaStore } = (await import(
    `${dist}/store/redis/redis-quota-store.js`
  )) as typeof import('../src/store/redis/redis-quota-store.js');
  const { connectRedis } = (await import(`${dist}/store/redis/connect.js`)) as typeof import('../src/store/redis/connect.js');
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-callgrind-'));
  const port = await freePort();
  const server = spawn(
    'valgrind',
    ['--tool=callgrind', `--callgrind-out-file=${dir}/out`, 'redis-server', '--port', String(port), '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
      cwd: dir,
    },
  );
  try {
    const url = `redis://127.0.0.1:${port}`;
    await waitForRedis(url);
    const redis = connectRedis(url, 'gateway', 60_000);
    await new Promise((ready) => redis.once('ready', ready));
    const store = new RedisQuotaStore(redis);
    const quota = gcra ? { perMinute: 1e9, perDay: 1e12, algorithm: 'gcra' as const, burst: 1e8 } : { perMinute: 1e9, perDay: 1e12 };
    const ban = { afterRejections: 3, window: 60, duration: 120 };
    let no = 0;
    let steps = 0;
    const cycle = async (prefix: string) => {
      const holders = ['a', 'b', 'c'];
      await Promise.all(
        Array.from({ length: keys }, async (_, k) => {
          const id = `${prefix}${k}`;
          for (const holder of holders) {
            const base = {
              divisor: 1,
              minBlock: 1,
              leaseMs: 1000,
              giveBack: 0,
              giveBackMinuteStartMs: 0,
              giveBackDayStartMs: 0,
              holder,
              ends: false,
              heldUntilMs: 0,
            };
            const b1 = ++no;
            await store.reserve(id, quota, ban, { ...base, want: 100, block: b1 });
            const b2 = ++no;
            const g = await store.reserve(id, quota, ban, { ...base, want: 100, block: b2 });
            await store.reserve(id, quota, ban, {
              ...base,
              want: 0,
              giveBack: 50,
              giveBackMinuteStartMs: g.minuteStartMs,
              giveBackDayStartMs: g.dayStartMs,
              giveBackBlock: gcra ? b2 : 0,
              giveBackNo: no,
              giveBackHashEpoch: g.hashEpoch ?? 0,
              ends: true,
              heldUntilMs: g.nowMs + 1000,
            });
            steps += 3;
          }
        }),
      );
    };
    await cycle('key');
    steps = 0;
    execFileSync('callgrind_control', ['--zero', String(server.pid)], { stdio: 'ignore' });
    await cycle('key');
    execFileSync('callgrind_control', ['--dump', String(server.pid)], { stdio: 'ignore' });
    redis.disconnect();
    const dump = readdirSync(dir).find((name) => /^out\.\d+$/.test(name))!;
    const totals = /^(?:totals|summary): (\d+)/m.exec(readFileSync(join(dir, dump), 'utf8'))!;
    return Number(totals[1]) / steps;
  } finally {
    server.kill();
    await new Promise((exited) => server.once('exit', exited));
    rmSync(dir, { recursive: true, force: true });
  }
}
