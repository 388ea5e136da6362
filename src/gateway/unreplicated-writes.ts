import type { Quota } from '../config/plans-schema.js';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import type { QuotaOutcome } from '../quota/quota-state.js';
import type { QuotaStore } from '../store/quota-store.js';
import type { RedisClient } from '../store/redis/connect.js';
import type { ReplicaWaitListener } from '../store/redis/replica-wait.js';
import { TurnMarks, type TurnMark } from '../store/redis/turn-marks.js';
import { DegradedLedger } from './degraded-ledger.js';
import { ADDED_MESSAGE, FoldedTurns, recordKept, type KeptTurn } from './kept-turns.js';

/** A failed look-up of the markers (a second outage) is tried again this often. */
const RETRY_MS = 1000;

/** Kept turns and writes past which they are folded per connection (kept-turns.ts): some megabytes. */
const MAX_KEPT = 50_000;

/**
 * quota.waitForReplica's answer to a WAIT that timed out: the request gets what the master
 * decided (admitted or refused), it is counted in tollgate_quota_unreplicated_total, and the
 * writes of its turn are kept here until their fate is known:
 * - a later turn of the same connection is acknowledged: the replicas have them (the replication
 *   stream is ordered, replica-acks.ts), they are forgotten;
 * - the connection to the master is lost first: once connected again (to a new master after a
 *   failover: ioredis follows Sentinel), the marker of the lost connection (turn-marks.ts) says
 *   which turns the master answering now holds. Those it holds are forgotten (the same master
 *   after a mere reconnection holds them all); the others died with the old master and are added
 *   to this one, once (degraded-ledger.ts): windows, usage, bans and prepaid credits.
 * While no replica acknowledges for long, what is kept is bounded: past MAX_KEPT turns and writes,
 * the kept turns are folded into sums per connection (kept-turns.ts).
 *
 * Why not refuse or shed instead: the write is in the master's memory, so the decision is as
 * exact as any other unless a failover follows before it is sent; and a WAIT times out whenever a
 * replica is slow, down or resyncing, which would make a replica's outage a gateway outage.
 */
export class UnreplicatedWrites implements ReplicaWaitListener {
  readonly marks: TurnMarks;
  private readonly ledger: DegradedLedger;
  /** The turns whose WAIT failed, in the order their answers came. */
  private kept: KeptTurn[] = [];
  /** How many turns and writes `kept` holds. */
  private keptSize = 0;
  /** The turns folded once `kept` grew past `maxKept`, per connection. */
  private readonly folded = new Map<number, FoldedTurns>();
  /** Folded turns being added to a master that lacked them (each retries on its own until it has). */
  private readonly adding = new Set<DegradedLedger>();
  private checking?: Promise<void>;
  private retry?: NodeJS.Timeout;

  constructor(
    private readonly store: QuotaStore,
    redis: RedisClient,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
    private readonly maxKept = MAX_KEPT,
  ) {
    this.marks = new TurnMarks(redis);
    this.ledger = new DegradedLedger(store, logger, ADDED_MESSAGE, true);
    // Connected again (after a loss, the writes of the turns cut by it are kept by then).
    redis.on('ready', () => void this.check());
  }

  unreplicated(
    subject: string,
    admitted: Pick<QuotaOutcome, 'verdict' | 'nowMs' | 'cost' | 'bannedUntilMs'>,
    quota: Quota,
    mark: TurnMark,
    requests = 1,
  ): void {
    this.metrics.quotaUnreplicated.inc();
    this.turnOf(mark).writes.push({ subject, admitted, quota, requests });
    if (++this.keptSize > this.maxKept) this.fold();
  }

  unreplicatedGiveBack(_subject: string, units: number, mark: TurnMark): void {
    this.turnOf(mark).givenBack += units;
  }

  /** The kept turn `mark`, kept from now on if it was not yet. */
  private turnOf(mark: TurnMark): KeptTurn {
    const last = this.kept.at(-1);
    if (last?.mark.connection === mark.connection && last.mark.seq === mark.seq) return last;
    const turn: KeptTurn = { mark, writes: [], givenBack: 0 };
    this.kept.push(turn);
    this.keptSize++;
    // Its WAIT (on a connection of its own: replica-acks.ts) may have ended after the connection
    // the turn went out on was lost and its successor's markers checked: checked now, once its
    // writes are told (after this call).
    if (mark.connection < this.marks.current()) queueMicrotask(() => void this.check());
    return turn;
  }

  replicated(mark: TurnMark): void {
    const folded = this.folded.get(mark.connection);
    if (folded && folded.toSeq <= mark.seq) {
      this.folded.delete(mark.connection);
      folded.ledger.close();
    }
    if (this.kept.length === 0) return;
    this.keep(this.kept.filter((turn) => turn.mark.connection !== mark.connection || turn.mark.seq > mark.seq));
  }

  private keep(turns: KeptTurn[]): void {
    this.kept = turns;
    this.keptSize = turns.reduce((size, turn) => size + 1 + turn.writes.length, 0);
  }

  /** Folds every kept turn into its connection's sums (kept-turns.ts). */
  private fold(): void {
    for (const turn of this.kept) {
      let folded = this.folded.get(turn.mark.connection);
      if (!folded) {
        this.folded.set(turn.mark.connection, (folded = new FoldedTurns(turn.mark.connection, this.store, this.logger)));
        this.logger.warn({ turns: this.kept.length }, 'unreplicated quota writes folded: no replica acknowledged for long');
      }
      folded.add(turn);
    }
    this.keep([]);
  }

  settled(): Promise<void> {
    const now = this.marks.current();
    const lost = this.kept.some((turn) => turn.mark.connection < now) || [...this.folded.values()].some((f) => f.connection < now);
    return lost || this.checking ? this.check() : Promise.resolve();
  }

  /** Settles the kept turns of connections lost since (one look-up at a time). */
  private check(): Promise<void> {
    this.checking ??= this.checkLost().finally(() => (this.checking = undefined));
    return this.checking;
  }

  private async checkLost(): Promise<void> {
    for (;;) {
      const now = this.marks.current();
      let lost = this.kept.filter((turn) => turn.mark.connection < now);
      const lostFolded = [...this.folded.values()].filter((folded) => folded.connection < now);
      if (lost.length === 0 && lostFolded.length === 0) return;
      const connections = [...new Set([...lost.map((turn) => turn.mark.connection), ...lostFolded.map((f) => f.connection)])];
      let applied: Map<number, number>;
      try {
        applied = new Map(await Promise.all(connections.map(async (c) => [c, await this.marks.applied(c)] as const)));
      } catch {
        // Lost again before the answer: tried again (and at the next reconnection).
        clearTimeout(this.retry);
        this.retry = setTimeout(() => void this.check(), RETRY_MS);
        this.retry.unref();
        return;
      }
      // Those folded meanwhile (more writes kept than the bound while the markers were asked for)
      // are settled with their connection's folded turns, at the next pass: not here too.
      const stillKept = new Set(this.kept);
      lost = lost.filter((turn) => stillKept.has(turn));
      this.keep(this.kept.filter((turn) => !lost.includes(turn)));
      for (const folded of lostFolded) this.folded.delete(folded.connection);
      const missing = lost.filter((turn) => turn.mark.seq > applied.get(turn.mark.connection)!);
      for (const { writes } of missing) for (const write of writes) recordKept(this.ledger, write);
      const missingFolded = lostFolded.filter((folded) => folded.toSeq > applied.get(folded.connection)!);
      // Some of them held, all added again (kept-turns.ts): counted twice, never admitted twice.
      const partly = missingFolded.filter((folded) => folded.fromSeq <= applied.get(folded.connection)!);
      if (partly.length > 0)
        this.logger.warn({ turns: partly.reduce((n, f) => n + f.turns, 0) }, 'folded unreplicated quota writes partly held: all added');
      const turns = lost.length + lostFolded.reduce((n, f) => n + f.turns, 0);
      const held = turns - missing.length - missingFolded.reduce((n, f) => n + f.turns, 0);
      this.logger.info({ turns, held }, 'unreplicated quota writes checked on redis');
      // Not sent again: a give-back is applied once by its number, and a later one of the same
      // holder may have reached this master first. Its units stay counted here, never admitted.
      const givenBack = [...missing, ...missingFolded].reduce((sum, turn) => sum + turn.givenBack, 0);
      if (givenBack > 0) this.logger.warn({ units: givenBack }, 'unreplicated lease give-backs lost with the old master');
      for (const folded of lostFolded) if (!missingFolded.includes(folded)) folded.ledger.close();
      // Retried by each ledger until Redis has them, each batch once.
      for (const { ledger } of missingFolded) this.adding.add(ledger);
      const added = missingFolded.map(({ ledger }) => ledger.flush().then((done) => done && this.added(ledger)));
      await Promise.all([missing.length > 0 && this.ledger.flush(), ...added]);
    }
  }

  private added(ledger: DegradedLedger): void {
    ledger.close();
    this.adding.delete(ledger);
  }

  close(): void {
    clearTimeout(this.retry);
    this.ledger.close();
    for (const { ledger } of this.folded.values()) ledger.close();
    for (const ledger of this.adding) ledger.close();
  }
}
