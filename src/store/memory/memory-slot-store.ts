import type { SlotClaim, SlotStore } from '../quota-store.js';

/**
 * Concurrency slots of one process (the embedded store, and a replica's own share while Redis is
 * unreachable): per subject, each member with the end of its life. The same rules as the Redis
 * script: slots past their life are not counted, a slot is taken only while fewer than `max` live.
 */
export class MemorySlotStore implements SlotStore {
  private readonly held = new Map<string, Map<string, number>>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Synchronous, for the memory quota store's one step (quota-state.ts `decide`). */
  takeNow(subject: string, claim: SlotClaim): boolean {
    const nowMs = this.now();
    const slots = this.live(subject, nowMs);
    if (slots.size >= claim.max) return false;
    slots.set(claim.member, nowMs + claim.lifeMs);
    this.held.set(subject, slots);
    return true;
  }

  async take(subject: string, claim: SlotClaim): Promise<boolean> {
    return this.takeNow(subject, claim);
  }

  async release(subject: string, members: readonly string[]): Promise<void> {
    const slots = this.held.get(subject);
    if (!slots) return;
    for (const member of members) slots.delete(member);
    if (slots.size === 0) this.held.delete(subject);
  }

  async renew(held: ReadonlyMap<string, readonly string[]>, lifeMs: number): Promise<void> {
    const endMs = this.now() + lifeMs;
    for (const [subject, members] of held) {
      const slots = this.held.get(subject) ?? new Map<string, number>();
      for (const member of members) slots.set(member, endMs);
      this.held.set(subject, slots);
    }
  }

  async count(subject: string): Promise<number> {
    return this.live(subject, this.now()).size;
  }

  /** The subject's slots still alive at `nowMs` (the others dropped). */
  private live(subject: string, nowMs: number): Map<string, number> {
    const slots = this.held.get(subject) ?? new Map<string, number>();
    for (const [member, endMs] of slots) if (endMs <= nowMs) slots.delete(member);
    if (slots.size === 0) this.held.delete(subject);
    return slots;
  }
}
