import type { RedisClient } from './connect.js';
import type { BanPolicy, Quota } from '../../config/plans-schema.js';
import type { QuotaOutcome, Verdict } from '../../quota/quota-state.js';
import type { QuotaStore } from '../quota-store.js';
import { QUOTA_SCRIPT, UNBAN_SCRIPT, USAGE_SCRIPT } from './quota-script.js';
import { quotaKey } from './redis-keys.js';
import { gcraWindows } from '../../quota/gcra.js';

const VERDICTS: Verdict[] = ['allowed', 'limited', 'banned'];

interface QuotaCommands {
  tgQuota(key: string, ...args: Array<string | number>): Promise<number[]>;
  tgQuotaUsage(key: string, nowMs: string | number): Promise<number[]>;
  tgUnban(key: string, nowMs: string | number): Promise<number>;
}

/**
 * Shared counters: one EVALSHA per request (ioredis falls back to EVAL once if the script cache
 * was flushed), so quotas are exact however many replicas share the Redis.
 */
export class RedisQuotaStore implements QuotaStore {
  private readonly commands: QuotaCommands;

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

  async consume(keyId: string, quota: Quota, ban: BanPolicy, cost = 1): Promise<QuotaOutcome> {
    const reply = await this.commands.tgQuota(
      quotaKey(keyId),
      quota.perMinute,
      quota.perDay,
      ban.afterRejections,
      ban.window * 1000,
      ban.duration * 1000,
      cost,
      quota.shadow ? 1 : 0,
      ...this.gcraArgs(quota),
      this.nowArg(),
    );
    return toOutcome(reply);
  }

  async usage(keyId: string): Promise<QuotaOutcome> {
    return toOutcome(await this.commands.tgQuotaUsage(quotaKey(keyId), this.nowArg()));
  }

  async unban(keyId: string): Promise<boolean> {
    return (await this.commands.tgUnban(quotaKey(keyId), this.nowArg())) === 1;
  }

  /** gcra flag and both windows' interval and burst, from the one definition (gcra.ts). */
  private gcraArgs(quota: Quota): number[] {
    if (quota.algorithm !== 'gcra') return [0, 0, 0, 0, 0];
    const { minute, day } = gcraWindows(quota);
    return [1, minute.intervalUs, minute.burst, day.intervalUs, day.burst];
  }

  private nowArg(): string | number {
    return this.testClock ? this.testClock() : '';
  }
}

function toOutcome(reply: number[]): QuotaOutcome {
  const [
    verdict = 1,
    minuteCount = 0,
    dayCount = 0,
    rejections = 0,
    nowMs = 0,
    bannedUntilMs = 0,
    cost = 1,
    minuteTatUs = 0,
    dayTatUs = 0,
  ] = reply.map(Number);
  return { verdict: VERDICTS[verdict] ?? 'limited', minuteCount, dayCount, rejections, nowMs, bannedUntilMs, cost, minuteTatUs, dayTatUs };
}
