/**
 * The quota store's own CPU per request, in one process, without HTTP: RedisQuotaStore.consume
 * in turns of --per-turn requests (one event-loop turn each, as the gateway's quota policy makes
 * them), each turn awaited before the next, against a redis-server of its own. `--keys many`: every
 * request another key, round robin over 2,000 (warm keys: one packed MULTI_QUOTA_SCRIPT call a
 * turn); `--keys one`: one key (one QUOTA_SCRIPT call a turn). The figure includes the socket
 * write and read of each turn's call, not Redis's own CPU. With --compare DIR (another build's
 * dist/, e.g. /tmp/tollgate-bench-builds/<commit>/dist that --compare leaves), the two are run in
 * alternate processes, --runs times each: differences of a µs are read from the medians of many
 * runs, since the machine is shared.
 *   node --import tsx bench/quota-store-cpu.ts --compare /tmp/tollgate-bench-builds/<commit>/dist
 */
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { RedisServer } from '../test/harness/redis-server.js';
import { cpuMsOf } from './cpu.js';

const { values } = parseArgs({
  options: {
    dist: { type: 'string', default: resolve(import.meta.dirname, '../dist') },
    compare: { type: 'string' },
    keys: { type: 'string', default: 'many,one' },
    'per-turn': { type: 'string', default: '13' },
    turns: { type: 'string', default: '2000' },
    runs: { type: 'string', default: '4' },
    child: { type: 'boolean', default: false },
  },
});
const perTurn = Number(values['per-turn']);
const turns = Number(values.turns);

if (values.child) await measure(values.dist, values.keys === 'one' ? 'one' : 'many');
else {
  const dists = [values.dist, ...(values.compare ? [values.compare] : [])];
  const results = new Map<string, number[]>();
  for (let run = 0; run < Number(values.runs); run++)
    for (const keys of values.keys.split(','))
      for (const dist of dists) {
        const out = execFileSync(
          process.execPath,
          [
            ...process.execArgv,
            import.meta.filename,
            '--child',
            '--dist',
            dist,
            '--keys',
            keys,
            '--per-turn',
            String(perTurn),
            '--turns',
            String(turns),
          ],
          {
            encoding: 'utf8',
          },
        );
        // One figure per line, `<what> <µs>`: the store's CPU, Redis's script time, Redis's whole CPU.
        for (const line of out.trim().split('\n')) {
          const [what, us] = line.split(' ');
          const name = `${dist} ${keys} ${what}`;
          results.set(name, [...(results.get(name) ?? []), Number(us)]);
        }
      }
  for (const [name, us] of results) {
    const sorted = [...us].sort((a, b) => a - b);
    console.log(
      `${name}: ${sorted[Math.floor(sorted.length / 2)]!.toFixed(2)} µs a request (median of ${us.length} runs: ${us.map((u) => u.toFixed(2)).join(', ')})`,
    );
  }
}

/**
 * One child: prints the medians of five measured stretches, µs per request: `store` (this
 * process's CPU), `script` (Redis's time in the quota scripts, INFO commandstats: evalsha and
 * eval) and `redis` (the redis-server process's CPU, the socket reads and writes included;
 * 10 ms ticks, so about ±0.4 µs at the default turns).
 */
async function measure(dist: string, keys: 'many' | 'one'): Promise<void> {
  const { RedisQuotaStore } = (await import(
    `${dist}/store/redis/redis-quota-store.js`
  )) as typeof import('../src/store/redis/redis-quota-store.js');
  const { connectRedis } = (await import(`${dist}/store/redis/connect.js`)) as typeof import('../src/store/redis/connect.js');
  const server = await RedisServer.start();
  // The gateway's connection (connect.ts): offline queue off, command timeout, auto-pipelining.
  const redis = connectRedis(server.url, 'gateway', 1000);
  await new Promise((ready) => redis.once('ready', ready));
  const store = new RedisQuotaStore(redis);
  const quota = { perMinute: 1e9, perDay: 1e12 };
  const ban = { afterRejections: 3, window: 60, duration: 120 };
  let n = 0;
  const run = async (count: number) => {
    for (let t = 0; t < count; t++) {
      const turn = [];
      for (let i = 0; i < perTurn; i++) turn.push(store.consume(keys === 'one' ? 'only' : `key${n++ % 2000}`, quota, ban));
      await Promise.all(turn);
    }
  };
  await run(turns);
  const stats = server.client();
  const scriptUs = async () => {
    const info = await stats.info('commandstats');
    let us = 0;
    for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=\d+,usec=(\d+)/gm)) us += Number(m[1]);
    return us;
  };
  const stretches = { store: [] as number[], script: [] as number[], redis: [] as number[] };
  const requests = turns * perTurn;
  for (let i = 0; i < 5; i++) {
    const before = process.cpuUsage();
    const [scriptBefore, redisBefore] = [await scriptUs(), cpuMsOf(server.pid)];
    await run(turns);
    const used = process.cpuUsage(before);
    stretches.store.push((used.user + used.system) / requests);
    stretches.redis.push(((cpuMsOf(server.pid) - redisBefore) * 1000) / requests);
    stretches.script.push(((await scriptUs()) - scriptBefore) / requests);
  }
  for (const [what, us] of Object.entries(stretches)) console.log(`${what} ${us.sort((a, b) => a - b)[2]}`);
  stats.disconnect();
  redis.disconnect();
  await server.stop();
}
