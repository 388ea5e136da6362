import type { Redis } from 'ioredis';
import { LEASE_SCRIPT, QUOTA_SCRIPT } from '../src/store/redis/quota-script.js';

/** Commands the benchmark itself sends while measuring; left out of the per-request counts. */
const OWN_COMMANDS = new Set(['info', 'config', 'client', 'hello', 'ping', 'select']);

/**
 * Redis counts the commands a Lua script runs in INFO commandstats (and total_commands_processed)
 * as if they had been sent. The gateway sends none of the quota and lease scripts' commands itself
 * (it sends EVALSHA, and HGETALL for key records), so these are told apart by name. PUBLISH is one of
 * them (lease notices, by pcall): the gateway's own PUBLISHes (key changes, cache invalidations)
 * do not happen during a round.
 */
const SCRIPT_COMMANDS = new Set(
  [...`${QUOTA_SCRIPT}${LEASE_SCRIPT}`.matchAll(/redis\.p?call\('([A-Z]+)'/g)]
    .map((m) => m[1]!.toLowerCase())
    // The lease script's HGETALL (of a key's lease holders, when a lease ends) shares its name with
    // the key-record reads the gateway sends; those are by far the more, so HGETALL counts as sent.
    .filter((name) => name !== 'hgetall'),
);

export interface RedisCounts {
  /** Calls per command the gateway sent (lower case); the benchmark's own commands left out. */
  commands: Record<string, number>;
  totalCommands: number;
  /** Commands run inside the quota script (no network round trip of their own). */
  scripted: Record<string, number>;
  /** Socket reads Redis processed (`total_reads_processed`): one per batch a client wrote. */
  reads: number;
}

/** Redis's own CPU so far (INFO cpu: used_cpu_sys + used_cpu_user), in ms. */
export async function readRedisCpuMs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return 1000 * (field('used_cpu_sys') + field('used_cpu_user'));
}

/** Zeroes Redis's counters (CONFIG RESETSTAT). */
export async function resetRedisStats(redis: Redis): Promise<void> {
  await redis.config('RESETSTAT');
}

export async function readRedisStats(redis: Redis): Promise<RedisCounts> {
  const commandStats = await redis.info('commandstats');
  const stats = await redis.info('stats');
  const commands: Record<string, number> = {};
  const scripted: Record<string, number> = {};
  let totalCommands = 0;
  for (const match of commandStats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const name = match[1]!.toLowerCase();
    const calls = Number(match[2]);
    if (OWN_COMMANDS.has(name.split('|')[0]!)) continue;
    if (SCRIPT_COMMANDS.has(name)) {
      scripted[name] = calls;
      continue;
    }
    commands[name] = calls;
    totalCommands += calls;
  }
  // The benchmark's own RESETSTAT and INFO are 2 reads; left out.
  const reads = Math.max(0, Number(/^total_reads_processed:(\d+)/m.exec(stats)?.[1] ?? NaN) - 2);
  return { commands, totalCommands, scripted, reads };
}

function add(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const sum = { ...a };
  for (const [name, calls] of Object.entries(b)) sum[name] = (sum[name] ?? 0) + calls;
  return sum;
}

export function addCounts(a: RedisCounts, b: RedisCounts): RedisCounts {
  return {
    commands: add(a.commands, b.commands),
    totalCommands: a.totalCommands + b.totalCommands,
    scripted: add(a.scripted, b.scripted),
    reads: a.reads + b.reads,
  };
}

export const NO_COUNTS: RedisCounts = { commands: {}, totalCommands: 0, scripted: {}, reads: 0 };
