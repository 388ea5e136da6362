import { Cluster } from 'ioredis';
import type { RedisClient } from './connect.js';
import type { SlotClaim, SlotStore } from '../quota-store.js';
import { slotsKey } from './redis-keys.js';
import { COUNT_SLOTS_SCRIPT, RENEW_SLOTS_SCRIPT, TAKE_SLOT_SCRIPT } from './slot-scripts.js';

interface SlotCommands {
  tgTakeSlot(key: string, nowMs: string | number, max: number, lifeMs: number, member: string): Promise<number>;
  tgRenewSlots(key: string, nowMs: string | number, lifeMs: number, ...members: string[]): Promise<number>;
  tgCountSlots(key: string, nowMs: string | number): Promise<number>;
}

/**
 * Concurrency slots in Redis (slot-scripts.ts): shared by every replica, each slot alive only
 * while its replica renews it. A renewal of every subject this replica holds is one pipeline on a
 * single server (a Cluster's auto-pipelining groups the calls by node).
 */
export class RedisSlotStore implements SlotStore {
  private readonly commands: SlotCommands;

  constructor(
    private readonly redis: RedisClient,
    private readonly nowArg: () => string | number,
  ) {
    redis.defineCommand('tgTakeSlot', { numberOfKeys: 1, lua: TAKE_SLOT_SCRIPT });
    redis.defineCommand('tgRenewSlots', { numberOfKeys: 1, lua: RENEW_SLOTS_SCRIPT });
    redis.defineCommand('tgCountSlots', { numberOfKeys: 1, lua: COUNT_SLOTS_SCRIPT });
    this.commands = redis as unknown as SlotCommands;
  }

  async take(subject: string, claim: SlotClaim): Promise<boolean> {
    return (await this.commands.tgTakeSlot(slotsKey(subject), this.nowArg(), claim.max, claim.lifeMs, claim.member)) === 1;
  }

  async release(subject: string, members: readonly string[]): Promise<void> {
    if (members.length > 0) await this.redis.zrem(slotsKey(subject), ...members);
  }

  async renew(held: ReadonlyMap<string, readonly string[]>, lifeMs: number): Promise<void> {
    if (held.size === 0) return;
    const nowArg = this.nowArg();
    if (this.redis instanceof Cluster) {
      await Promise.all([...held].map(([subject, members]) => this.commands.tgRenewSlots(slotsKey(subject), nowArg, lifeMs, ...members)));
      return;
    }
    const pipeline = this.redis.pipeline() as unknown as SlotCommands & { exec(): Promise<Array<[Error | null, unknown]> | null> };
    for (const [subject, members] of held) void pipeline.tgRenewSlots(slotsKey(subject), nowArg, lifeMs, ...members);
    const results = (await pipeline.exec()) ?? [];
    const failed = results.find(([err]) => err);
    if (failed) throw failed[0];
  }

  async count(subject: string): Promise<number> {
    return Number(await this.commands.tgCountSlots(slotsKey(subject), this.nowArg()));
  }
}
