import type { Redis } from 'ioredis';
import { reconnectIfStalled } from './connect.js';
import { ackedKey } from './redis-keys.js';
import type { ReplicaWait } from './replica-wait.js';
import type { TurnMark, TurnMarks } from './turn-marks.js';

/** How long the acknowledgements' own key is kept: it is only a write to WAIT behind. */
const ACKED_MS = 60_000;

/** ioredis's error for a command not answered within the command timeout. */
const TIMED_OUT = 'Command timed out';

/**
 * KEYS: the markers (turn-marks.ts) of the main connection's connections the turns went out on,
 * then the acknowledgements' own key. ARGV: the turn each marker must have reached, then the round's
 * number and the own key's life. 1 and a write of the own key if this server holds them all; 0 and
 * no write if it lacks one (it is not the master the turns were written to, nor one promoted with them).
 */
const ACKED_SCRIPT = `
local n = #KEYS - 1
for i = 1, n do
  if (tonumber(redis.call('GET', KEYS[i])) or 0) < tonumber(ARGV[i]) then return 0 end
end
redis.call('SET', KEYS[n + 1], ARGV[n + 1], 'PX', ARGV[n + 2])
return 1
`;

/**
 * quota.waitForReplica's WAITs, on a connection of their own. Redis runs nothing more of a client
 * while its WAIT blocks, so on the connection the decisions use, a replica that is down (or slow,
 * or resyncing) made every turn's calls queue behind every earlier turn's WAIT: turn N waited
 * N × timeoutMs, and past redis.commandTimeoutMs its requests were shed as 503.
 *
 * WAIT covers the calling client's own last write (its offset in the one ordered replication
 * stream). So this connection writes its own small key once a turn's writes have been answered
 * on the main connection, which puts it behind them in the stream, then WAITs: an acknowledgement
 * covers the turn. Before writing, one script checks that the server it reached holds the turn's
 * marker: after a Sentinel failover the two connections may reach different servers, and a WAIT
 * on a promoted replica that lacks the turn's writes would acknowledge nothing of them.
 *
 * At most one WAIT in flight (a second would only queue behind the first on this connection):
 * turns answered meanwhile join the next one, whose WAIT is given what is left of the earliest
 * one's timeoutMs. A turn's answer waits about one round trip and the replica's acknowledgement
 * while it is healthy, about timeoutMs and a round trip while it is not.
 *
 * Redis checks a blocked client's timeout only when its event loop wakes, which an idle server
 * does every 1000/hz ms (100 with the default hz 10): a WAIT of 50 ms then takes 100. So a PING
 * goes out on this connection when the WAIT's time is up; reading it wakes Redis, which then ends
 * the WAIT (and answers the PING after it).
 */
export class ReplicaAcks {
  private readonly side: Redis;
  /** The turns waiting for the next round: the highest turn of each main connection. */
  private waiting = new Map<number, number>();
  private waiters: Array<(acknowledged: boolean) => void> = [];
  /** When the earliest of `waiters` joined (performance.now()). */
  private since = 0;
  private busy = false;
  private round = 0;

  constructor(
    main: Redis,
    private readonly wait: ReplicaWait,
    private readonly marks: TurnMarks,
  ) {
    // Written at once, never auto-pipelined a loop turn later: one round at a time anyway.
    this.side = main.duplicate({ connectionName: 'tollgate-replica-wait', enableAutoPipelining: false });
    // Its failures are turns kept as unreplicated; Redis being away is logged for the main connection.
    this.side.on('error', () => {});
    // It lives as long as the connection it serves.
    main.once('end', () => this.close());
  }

  /**
   * Resolves true once `wait.replicas` replicas acknowledged the turn `mark` (its calls and marker
   * answered on the main connection), false if they did not in time, or if this connection failed
   * or reached a server without the turn's marker.
   */
  acknowledged(mark: TurnMark): Promise<boolean> {
    if (this.waiters.length === 0) this.since = performance.now();
    this.waiting.set(mark.connection, Math.max(this.waiting.get(mark.connection) ?? 0, mark.seq));
    const acknowledged = new Promise<boolean>((resolve) => this.waiters.push(resolve));
    // The turns answered in the same read from the main connection join one round.
    if (!this.busy) {
      this.busy = true;
      queueMicrotask(() => this.send());
    }
    return acknowledged;
  }

  private send(): void {
    const [waiting, waiters] = [this.waiting, this.waiters];
    this.waiting = new Map();
    this.waiters = [];
    const keys = [...waiting.keys()].map((connection) => this.marks.keyOf(connection));
    // EVAL with the script's text, never EVALSHA: one Redis lost (SCRIPT FLUSH, evicted) would be
    // answered NOSCRIPT and sent again behind the WAIT, which would then count the replicas that
    // have this connection's previous write, not this one. (A few hundred bytes a round.)
    const checked = this.side.eval(
      ACKED_SCRIPT,
      keys.length + 1,
      ...keys,
      ackedKey(this.marks.replicaId),
      ...waiting.values(),
      ++this.round,
      ACKED_MS,
    );
    // (WAIT 0 would wait for ever.)
    const timeoutMs = Math.max(1, Math.ceil(this.since + this.wait.timeoutMs - performance.now()));
    const acked = this.side.call('WAIT', this.wait.replicas, timeoutMs);
    const wake = setTimeout(() => void this.side.ping().catch(() => {}), timeoutMs + 1);
    // Both answered (or failed) before the next round: it would only queue behind this WAIT.
    void Promise.allSettled([checked, acked]).then(([held, count]) => {
      clearTimeout(wake);
      // The script is answered within a round trip (the WAIT before it ended within timeoutMs):
      // not answered within the command timeout, the connection stopped answering (a half-open
      // one, one a middlebox forgot), which nothing else would replace for as long as TCP takes to
      // give up (minutes), every round until then costing its turns the command timeout. Reset, it
      // is opened again. (Not for the WAIT: one given nearly the command timeout may just run over.)
      if (held.status === 'rejected' && (held.reason as Error).message === TIMED_OUT) reconnectIfStalled(this.side);
      this.done(
        waiters,
        held.status === 'fulfilled' && held.value === 1 && count.status === 'fulfilled' && Number(count.value) >= this.wait.replicas,
      );
    });
  }

  private done(waiters: Array<(acknowledged: boolean) => void>, acknowledged: boolean): void {
    for (const resolve of waiters) resolve(acknowledged);
    if (this.waiters.length > 0) this.send();
    else this.busy = false;
  }

  close(): void {
    this.side.disconnect();
  }
}
