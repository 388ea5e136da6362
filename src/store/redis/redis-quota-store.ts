import type { RedisClient } from './connect.js';
import type { BanPolicy, Quota } from '../../config/plans-schema.js';
import type { QuotaOutcome, Verdict } from '../../quota/quota-state.js';
import type { QuotaStore } from '../quota-store.js';
import { QUOTA_REPLY_LENGTH, QUOTA_SCRIPT, UNBAN_SCRIPT, USAGE_SCRIPT } from './quota-script.js';
import { quotaKey } from './redis-keys.js';
import { TurnBatches } from './turn-batches.js';
import { gcraWindows } from '../../quota/gcra.js';

const VERDICTS: Verdict[] = ['allowed', 'limited', 'banned'];

interface QuotaCommands {
  tgQuota(key: string, ...args: Array<string | number>): Promise<number[]>;
  tgQuotaUsage(key: string, nowMs: string | number): Promise<number[]>;
  tgUnban(key: string, nowMs: string | number): Promise<number>;
}

/** Requests of one key decided in one script call at most: bounds the time one call holds Redis. */
const MAX_BATCH = 128;

interface Request {
  redisKey: string;
  /** The script's arguments before the costs (quota, ban, gcra), shared by the batch. */
  limits: Limits;
  cost: number;
}

interface Limits {
  args: Array<string | number>;
  /** The args joined: requests of one key batch together only under the same limits. */
  signature: string;
}

/**
 * Shared counters, exact however many replicas share the Redis: one EVALSHA decides the requests
 * of one key that arrived in one event-loop turn, in their order (turn-batches.ts), so a hot key
 * costs one command per turn, not one per request; a lone request is sent after its turn's I/O,
 * as before. ioredis falls back to EVAL once if the script cache was flushed.
 */
export class RedisQuotaStore implements QuotaStore {
  private readonly commands: QuotaCommands;
  private readonly batches = new TurnBatches<Request, QuotaOutcome>((requests) => this.decide(requests), MAX_BATCH);
  /** Per plans object: plans.yaml reloads make new ones, and the old entries go with them. */
  private readonly limitsOf = new WeakMap<Quota, { ban: BanPolicy; limits: Limits }>();

  /**
   * `testClock` replaces Redis TIME, for tests that run this store and the memory store on one
   * injected clock. Production leaves it out: replicas must share Redis's clock.
   */
  constructor(
    redis: RedisClient,
    private readonly testClock?: () => number,
  ) {
    redis.defineCommand('tgQuota', { numberOfKeys: 1, lua: QUOTA_SCRIPT });
    redis.defineCommand('tgQuotaUsage', { numberOfKeys: 1, lua: USAGE_SCRIPT });
    redis.defineCommand('tgUnban', { numberOfKeys: 1, lua: UNBAN_SCRIPT });
    this.commands = redis as unknown as QuotaCommands;
  }

  consume(keyId: string, quota: Quota, ban: BanPolicy, cost = 1): Promise<QuotaOutcome> {
    const redisKey = quotaKey(keyId);
    const limits = this.limits(quota, ban);
    return this.batches.add(`${redisKey} ${limits.signature}`, { redisKey, limits, cost });
  }

  private async decide(requests: Request[]): Promise<QuotaOutcome[]> {
    const { redisKey, limits } = requests[0]!;
    const costs = requests.map((request) => request.cost);
    const reply = await this.commands.tgQuota(redisKey, ...limits.args, this.nowArg(), ...costs);
    return costs.map((_, i) => toOutcome(reply, i * QUOTA_REPLY_LENGTH));
  }

  private limits(quota: Quota, ban: BanPolicy): Limits {
    const known = this.limitsOf.get(quota);
    if (known?.ban === ban) return known.limits;
    const args = [
      quota.perMinute,
      quota.perDay,
      ban.afterRejections,
      ban.window * 1000,
      ban.duration * 1000,
      quota.shadow ? 1 : 0,
      ...gcraArgs(quota),
    ];
    const limits = { args, signature: args.join(',') };
    this.limitsOf.set(quota, { ban, limits });
    return limits;
  }

  async usage(keyId: string): Promise<QuotaOutcome> {
    return toOutcome(await this.commands.tgQuotaUsage(quotaKey(keyId), this.nowArg()));
  }

  async unban(keyId: string): Promise<boolean> {
    return (await this.commands.tgUnban(quotaKey(keyId), this.nowArg())) === 1;
  }

  private nowArg(): string | number {
    return this.testClock ? this.testClock() : '';
  }
}

/** gcra flag and both windows' interval and burst, from the one definition (gcra.ts). */
function gcraArgs(quota: Quota): number[] {
  if (quota.algorithm !== 'gcra') return [0, 0, 0, 0, 0];
  const { minute, day } = gcraWindows(quota);
  return [1, minute.intervalUs, minute.burst, day.intervalUs, day.burst];
}

/** The outcome of one request: the script's reply from `at` on (QUOTA_REPLY_LENGTH numbers). */
function toOutcome(reply: number[], at = 0): QuotaOutcome {
  const field = (i: number, missing: number) => Number(reply[at + i] ?? missing);
  return {
    verdict: VERDICTS[field(0, 1)] ?? 'limited',
    minuteCount: field(1, 0),
    dayCount: field(2, 0),
    rejections: field(3, 0),
    nowMs: field(4, 0),
    bannedUntilMs: field(5, 0),
    cost: field(6, 1),
    minuteTatUs: field(7, 0),
    dayTatUs: field(8, 0),
  };
}
