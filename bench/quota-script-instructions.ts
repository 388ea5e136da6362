/**
 * Redis's instructions per warm-key decision, counted by valgrind's callgrind in a redis-server of
 * its own: a figure that does not move with the machine's load, unlike Redis's CPU time (the
 * throughput phase, quota-store-cpu.ts). RedisQuotaStore.consume in turns of --per-turn requests,
 * each request another key of --keys (warm keys: one packed MULTI_QUOTA_SCRIPT call a turn), after
 * one unmeasured pass over every key; only the measured turns are counted (callgrind_control
 * zeroes, then dumps), everything the server did in them included (reading and parsing the calls,
 * the scripts, the replies). With --compare DIR (another build's dist/), that build is counted the
 * same way. Needs valgrind on the PATH. With --keep, each callgrind dump is kept and its path printed,
 * for `callgrind_annotate --inclusive=yes <dump>` (a redis-server built from source, not stripped, on
 * the PATH names Lua's own functions there too).
 *   node --import tsx bench/quota-script-instructions.ts --compare /tmp/tollgate-bench-builds/<commit>/dist
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
    keys: { type: 'string', default: '2000' },
    'per-turn': { type: 'string', default: '13' },
    turns: { type: 'string', default: '300' },
    algorithms: { type: 'string', default: 'fixed,gcra' },
    keep: { type: 'boolean', default: false },
  },
});
const keys = Number(values.keys);
const perTurn = Number(values['per-turn']);
const turns = Number(values.turns);

for (const algorithm of values.algorithms.split(','))
  for (const dist of [values.dist, ...(values.compare ? [values.compare] : [])]) {
    const perRequest = await count(dist, algorithm === 'gcra');
    console.log(`${dist} ${algorithm}: ${Math.round(perRequest)} Redis instructions a request`);
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
    { stdio: 'ignore', cwd: dir },
  );
  try {
    const url = `redis://127.0.0.1:${port}`;
    await waitForRedis(url);
    // Callgrind runs the server some 50 times slower: a command timeout to match.
    const redis = connectRedis(url, 'gateway', 60_000);
    await new Promise((ready) => redis.once('ready', ready));
    const store = new RedisQuotaStore(redis);
    const quota = gcra ? { perMinute: 1e9, perDay: 1e12, algorithm: 'gcra' as const } : { perMinute: 1e9, perDay: 1e12 };
    const ban = { afterRejections: 3, window: 60, duration: 120 };
    let n = 0;
    const run = async (count: number) => {
      for (let t = 0; t < count; t++) {
        const turn = [];
        for (let i = 0; i < perTurn; i++) turn.push(store.consume(`key${n++ % keys}`, quota, ban));
        await Promise.all(turn);
      }
    };
    // The warm pass and the count within one minute of Redis's clock (this machine's): a minute
    // that rolls between them turns every counted step into a new minute's (one more field written),
    // some 2 % more instructions, which two builds' counts must not differ by.
    // A count that still crossed a minute (a slow run) is refused rather than reported.
    const second = new Date().getSeconds();
    if (second >= 30) await new Promise((later) => setTimeout(later, (60 - second) * 1000 + 200));
    const minute = Math.floor(Date.now() / 60_000);
    await run(Math.ceil(keys / perTurn));
    execFileSync('callgrind_control', ['--zero', String(server.pid)], { stdio: 'ignore' });
    await run(turns);
    execFileSync('callgrind_control', ['--dump', String(server.pid)], { stdio: 'ignore' });
    if (Math.floor(Date.now() / 60_000) !== minute) throw new Error('the count crossed a minute: run it again (or with fewer --turns)');
    redis.disconnect();
    // The dump's file: out.<n> (the first); its `totals:` line counts the instructions since --zero.
    const dump = readdirSync(dir).find((name) => /^out\.\d+$/.test(name))!;
    const totals = /^(?:totals|summary): (\d+)/m.exec(readFileSync(join(dir, dump), 'utf8'))!;
    return Number(totals[1]) / (turns * perTurn);
  } finally {
    server.kill();
    await new Promise((exited) => server.once('exit', exited));
    if (values.keep) console.log(`callgrind dump kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}
