import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import type { SlotClaim, SlotStore } from '../store/quota-store.js';

/** How long a slot lives unless renewed: a replica killed with its slots gives them back by then. */
export const SLOT_LIFE_MS = 7000;
/** How often the held slots are renewed, all in one batched call: three chances within a life. */
export const SLOT_RENEW_MS = 2000;

/** A held slot: given back once, whatever ends the request first. */
export type ReleaseSlot = () => void;

/**
 * Gives a held slot back when the answer to `res` ends or its client goes ('close'), or at once
 * if that has happened already. HTTP/2's compatibility response has no `closed`: its stream's tells.
 */
export function releaseWhenAnswerEnds(res: ServerResponse, release: ReleaseSlot): void {
  const h2 = res as unknown as { stream?: { closed: boolean } };
  if (res.closed || h2.stream?.closed) release();
  else res.once('close', release);
}

interface Held {
  store: SlotStore;
  subject: string;
  plan: string;
}

/**
 * This replica's concurrency slots (maxConcurrent): names them (`<replicaId>:<n>`), keeps each
 * one alive while its request or tunnel is in flight (one renewal call per store every
 * SLOT_RENEW_MS, not one per request), and gives it back exactly once. The quota step takes a
 * consumer's slot with its windows (enforce-quota.ts); `take` takes one for any other subject
 * (a limit rule's), alone.
 */
export class ConcurrencySlots {
  private readonly replicaId = randomBytes(6).toString('hex');
  private sequence = 0;
  private readonly held = new Map<string, Held>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly metrics: Metrics,
    private readonly logger: Logger,
  ) {
    this.timer = setInterval(() => void this.renew(), SLOT_RENEW_MS);
    this.timer.unref();
  }

  /** A new slot's claim, for a subject allowed `max` at once. */
  claim(max: number): SlotClaim {
    return { member: `${this.replicaId}:${++this.sequence}`, max, lifeMs: SLOT_LIFE_MS };
  }

  /** The claim was granted (by `store`): held, renewed and counted until the returned release runs. */
  hold(store: SlotStore, subject: string, claim: SlotClaim, plan: string): ReleaseSlot {
    this.held.set(claim.member, { store, subject, plan });
    this.metrics.slotsInFlight.inc({ plan });
    return () => {
      const slot = this.held.get(claim.member);
      if (!slot) return;
      this.held.delete(claim.member);
      this.metrics.slotsInFlight.dec({ plan });
      // Unreachable store: the slot ends with its life (SLOT_LIFE_MS), as a dead replica's.
      store.release(subject, [claim.member]).catch((err: unknown) => this.logger.warn({ err }, 'could not give a concurrency slot back'));
    };
  }

  /**
   * A slot for any subject (a limit rule's key, say), taken alone: the release, or undefined when
   * `max` are held already. `plan` labels the in-flight gauge (never a per-consumer value).
   */
  async take(store: SlotStore, subject: string, max: number, plan: string): Promise<ReleaseSlot | undefined> {
    const claim = this.claim(max);
    return (await store.take(subject, claim)) ? this.hold(store, subject, claim, plan) : undefined;
  }

  /** Slots held now, by this replica. */
  get size(): number {
    return this.held.size;
  }

  /** Every held slot lives SLOT_LIFE_MS more: one call per store (Redis: one pipeline). */
  private async renew(): Promise<void> {
    const byStore = new Map<SlotStore, Map<string, string[]>>();
    for (const [member, { store, subject }] of this.held) {
      let subjects = byStore.get(store);
      if (!subjects) byStore.set(store, (subjects = new Map()));
      const members = subjects.get(subject);
      if (members) members.push(member);
      else subjects.set(subject, [member]);
    }
    await Promise.all(
      [...byStore].map(([store, subjects]) =>
        store.renew(subjects, SLOT_LIFE_MS).catch((err: unknown) => this.logger.warn({ err }, 'could not renew concurrency slots')),
      ),
    );
  }

  /** Stops renewing (the process is ending: its slots end with their life). */
  close(): void {
    clearInterval(this.timer);
  }
}
