import { CLI } from '../../test/harness/tollgate.js';
import type { NodeProcess } from '../../test/harness/node-process.js';
import { editedConfig, replaceLine } from '../config-edit.js';
import { createKeyWithCli } from '../keys.js';
import { decisionCounts } from '../lease-share.js';
import type { Options } from '../options.js';
import { openLoop, rawGet } from '../raw-load.js';
import { readRedisStats, resetRedisStats } from '../redis-stats.js';
import { PATH, type Stack } from '../stack.js';
import { say } from './common.js';

/**
 * Exactness of quota leases across replicas (docs/quota-leases.md): three gateways with leases on,
 * sharing the run's redis-server, and one hot key with a per-minute limit of --exactness-limit,
 * sent --exactness-rate requests a second (four times its limit by default) round robin over the
 * three, open loop, from now through --exactness-minutes whole UTC minutes on Redis's clock. Each
 * answer is put in the minute window its `X-RateLimit-Reset` names (the end of the window that
 * decided, on Redis's clock), so a window's admitted count is exactly what the replicas admitted
 * against it: it must equal the limit in every full window and exceed it in none. The first
 * window (the phase starts mid-minute) and any answered after the last are partial: reported,
 * marked, judged only on never exceeding the limit. Redis's INFO commandstats is read at each
 * minute's end (to within the time one INFO takes), so each window also gets its commands per
 * request.
 *
 * Bans are off for the phase (ban.afterRejections 1000000): a key driven over its limit would
 * otherwise be banned after 20 refusals and admitted nothing more for 15 minutes.
 */
export const EXACTNESS_REPLICAS = 3;

export interface ExactnessWindow {
  /** The window's end, unix seconds (its X-RateLimit-Reset). */
  endSeconds: number;
  /** The load covered the whole window. */
  full: boolean;
  admitted: number;
  refused: number;
  /** Any other status. */
  other: number;
  /** Commands the gateways sent Redis during the window (INFO commandstats at its start and end). */
  redisCommands: number;
}

export interface ExactnessResults {
  replicas: number;
  limitPerMinute: number;
  ratePerSecond: number;
  /** Whole minutes driven, after the partial one the phase starts in. */
  minutes: number;
  windows: ExactnessWindow[];
  /** Requests the replicas admitted from a lease (tollgate_quota_decisions_total{source="lease"}). */
  leased: number;
  /** Connection errors, and answers without X-RateLimit-Reset (counted in no window). */
  errors: number;
  unplaced: number;
}

export async function exactnessPhase(stack: Stack, options: Options): Promise<ExactnessResults> {
  const limit = options.exactnessLimit;
  const rate = options.exactnessRate ?? Math.round((4 * limit) / 60);
  const config = editedConfig('exactness', {
    'gateway.yaml': (y) =>
      replaceLine(
        /^ {2}leases: \{ enabled: \w+ \}/m,
        '  leases: { enabled: true }',
      )(replaceLine(/^ {2}replicas: 1\b/m, `  replicas: ${EXACTNESS_REPLICAS}`)(y)),
    'plans.yaml': replaceLine(/^ {2}afterRejections: \d+/m, '  afterRejections: 1000000'),
  });
  const { key } = await createKeyWithCli(stack.redis.url, [
    '--plan',
    'enterprise',
    '--per-minute',
    String(limit),
    '--per-day',
    '1000000000',
  ]);
  const replicas: Array<{ process: NodeProcess; url: string; adminUrl?: string }> = [];
  for (let i = 1; i <= EXACTNESS_REPLICAS; i++) {
    const process = stack.startGateway(`gateway-exactness-${i}`, [], CLI, config, stack.backendUrl);
    replicas.push({ process, url: await process.listening('gateway'), adminUrl: await process.listening('admin').catch(() => undefined) });
  }
  try {
    const offsetMs = await redisClockOffsetMs(stack);
    const redisNow = () => Date.now() + offsetMs;
    const startMs = redisNow();
    const endMs = (Math.floor(startMs / 60_000) + 1 + options.exactnessMinutes) * 60_000;
    say(
      `\nexactness: ${EXACTNESS_REPLICAS} gateways with quota leases, one key of ${limit}/minute sent ${rate} req/s round robin (open loop), ` +
        `until ${new Date(endMs).toISOString().slice(11, 16)} UTC on Redis's clock (${((endMs - startMs) / 60_000).toFixed(1)} min)`,
    );
    const leasedBefore = await leasedDecisions(replicas);
    await resetRedisStats(stack.admin);
    // Commands the gateways sent so far, at each minute's end on Redis's clock.
    const snapshots = new Map<number, number>();
    const timers: NodeJS.Timeout[] = [];
    for (let edge = Math.ceil(startMs / 60_000) * 60_000; edge <= endMs; edge += 60_000) {
      const at = edge;
      timers.push(
        setTimeout(
          () =>
            void readRedisStats(stack.admin).then((s) => {
              snapshots.set(at, s.totalCommands);
              say(`  ${new Date(at).toISOString().slice(11, 16)} UTC: ${s.totalCommands} Redis commands so far`);
            }),
          at - redisNow(),
        ),
      );
    }
    const windows = new Map<number, { admitted: number; refused: number; other: number }>();
    let unplaced = 0;
    const onAnswer = (status: number, head: string) => {
      const reset = /\r\nx-ratelimit-reset:[ \t]*(\d+)/i.exec(head)?.[1];
      if (reset === undefined) return void unplaced++;
      const window = windows.get(Number(reset)) ?? { admitted: 0, refused: 0, other: 0 };
      if (status >= 200 && status < 300) window.admitted++;
      else if (status === 429) window.refused++;
      else window.other++;
      windows.set(Number(reset), window);
    };
    const runs = await Promise.all(
      replicas.map((replica) =>
        openLoop({
          url: replica.url,
          request: rawGet(replica.url + PATH, { authorization: `Bearer ${key}` }),
          ratePerSecond: rate / EXACTNESS_REPLICAS,
          durationMs: endMs - redisNow(),
          connections: Math.max(4, Math.ceil(options.connections / EXACTNESS_REPLICAS)),
          onAnswer,
        }),
      ),
    );
    for (const timer of timers) clearTimeout(timer);
    const finalCommands = (await readRedisStats(stack.admin)).totalCommands;
    const leased = (await leasedDecisions(replicas)) - leasedBefore;
    const placed = [...windows.entries()].sort((a, b) => a[0] - b[0]);
    const result: ExactnessResults = {
      replicas: EXACTNESS_REPLICAS,
      limitPerMinute: limit,
      ratePerSecond: rate,
      minutes: options.exactnessMinutes,
      windows: placed.map(([endSeconds, counts]) => {
        const windowEndMs = endSeconds * 1000;
        const windowStartMs = windowEndMs - 60_000;
        const commandsAtEnd = snapshots.get(windowEndMs) ?? finalCommands;
        return {
          endSeconds,
          full: windowStartMs >= startMs && windowEndMs <= endMs,
          ...counts,
          redisCommands: commandsAtEnd - (snapshots.get(windowStartMs) ?? 0),
        };
      }),
      leased,
      errors: runs.reduce((n, r) => n + r.errors, 0),
      unplaced,
    };
    for (const w of result.windows)
      say(
        `  window ending ${new Date(w.endSeconds * 1000).toISOString().slice(11, 16)} UTC${w.full ? '' : ' (partial)'}: ` +
          `admitted ${w.admitted}, refused ${w.refused}, other ${w.other}, Redis commands ${w.redisCommands}`,
      );
    return result;
  } finally {
    for (const replica of replicas) await stack.stop(replica.process);
  }
}

/** Redis's clock minus this process's, in ms, read with TIME (to within half a round trip). */
async function redisClockOffsetMs(stack: Stack): Promise<number> {
  const before = Date.now();
  const [seconds, micros] = await stack.admin.time();
  const after = Date.now();
  return Number(seconds) * 1000 + Number(micros) / 1000 - (before + after) / 2;
}

/** Requests the replicas admitted from a lease so far, from their /metrics. */
async function leasedDecisions(replicas: Array<{ adminUrl?: string }>): Promise<number> {
  return (await decisionCounts(replicas.map((r) => r.adminUrl))).leased;
}
