import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import type { RedisClient } from './connect.js';
import { appliedKey } from './redis-keys.js';
import type { TurnCommands } from './turn-commands.js';

/** One turn's place in this process's writes: the connection it went out on, and its number there. */
export interface TurnMark {
  connection: number;
  seq: number;
}

/** How long a connection's marker is kept: longer than any outage after which it is read back. */
const MARKER_MS = 2 * 86_400_000;

/**
 * With quota.waitForReplica, each turn's calls (and each lease grant) are followed by one marker
 * on the same connection: the turn's number, in one key per process and connection. Redis runs one connection's commands in order and replicates them in the order it
 * ran them, and a replica holds a prefix of that stream, so whichever master answers after a
 * reconnection holds every write of a turn whose number is at most the marker it holds for that
 * connection (the old master, unchanged: all of them; a promoted replica: those it had been sent).
 * One key per connection, not per turn: nothing accumulates in Redis, and the numbers only grow.
 * The connection is told apart by ioredis's socket, read when the turn's calls are written: with
 * the offline queue off (connect.ts) they are written at once on the socket of that moment, or
 * fail, so no turn of one connection can carry a later connection's marker.
 * The replica acknowledgements (replica-acks.ts) read the marker too: a turn is acknowledged only
 * by a WAIT on a server that holds its marker.
 */
export class TurnMarks {
  readonly replicaId = randomUUID();
  private connection = 0;
  private seq = 0;
  private socket?: unknown;

  constructor(private readonly redis: RedisClient) {}

  /**
   * Queues the marker of a new turn on `commands`, behind its calls, just before they are written;
   * `written` resolves true once the master has it (so the calls before it too), false if it failed.
   * `mark` is final once `written` resolves (a call sent again moves it on).
   */
  queue(commands: TurnCommands): { mark: TurnMark; written: Promise<boolean> } {
    const mark = { connection: this.current(), seq: ++this.seq };
    // A call of the turn sent again (NOSCRIPT, turn-commands.ts) is written behind this marker, and
    // before the next turn's: the turn is that one's from then on, before `written` is told (its
    // answer comes after the NOSCRIPT one). On another connection by then, no marker of this one
    // covers it: the highest number, so that it is added again after a failover, never lost.
    const resent = () => {
      mark.seq = this.current() === mark.connection ? this.seq + 1 : Number.MAX_SAFE_INTEGER;
    };
    commands.resent = resent;
    const written = new Promise<boolean>((resolve) =>
      commands.command('set', [this.keyOf(mark.connection), mark.seq, 'PX', MARKER_MS], (err) => resolve(!err)),
    );
    return { mark, written };
  }

  /** The marker's key of `connection`. */
  keyOf(connection: number): string {
    return appliedKey(this.replicaId, connection);
  }

  /** The number of the connection in use now (a new one once ioredis has connected again). */
  current(): number {
    // (A Cluster has no one socket: waitForReplica is not done there, redis-quota-store.ts.)
    const socket: unknown = this.redis instanceof Cluster ? undefined : this.redis.stream;
    if (socket !== this.socket) {
      this.socket = socket;
      this.connection++;
    }
    return this.connection;
  }

  /** The last turn of `connection` whose writes the master answering now holds (0: none). */
  async applied(connection: number): Promise<number> {
    return Number(await this.redis.get(this.keyOf(connection))) || 0;
  }
}
