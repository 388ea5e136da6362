import { randomUUID } from 'node:crypto';
import { Cluster, type ChainableCommander } from 'ioredis';
import type { RedisClient } from './connect.js';
import { appliedKey } from './redis-keys.js';

/** One turn's place in this process's writes: the connection it went out on, and its number there. */
export interface TurnMark {
  connection: number;
  seq: number;
}

/** How long a connection's marker is kept: longer than any outage after which it is read back. */
const MARKER_MS = 2 * 86_400_000;

/**
 * With quota.waitForReplica, each turn's pipeline (and each lease grant's) writes one marker
 * behind its scripts and before its WAIT: the turn's number, in one key per process and
 * connection. Redis runs one connection's commands in order and replicates them in the order it
 * ran them, and a replica holds a prefix of that stream, so whichever master answers after a
 * reconnection holds every write of a turn whose number is at most the marker it holds for that
 * connection (the old master, unchanged: all of them; a promoted replica: those it had been sent).
 * One key per connection, not per turn: nothing accumulates in Redis, and the numbers only grow.
 * The connection is told apart by ioredis's socket, read when the pipeline is sent: with the
 * offline queue off (connect.ts) a pipeline is written at once on the socket of that moment, or
 * fails, so no turn of one connection can carry a later connection's marker.
 */
export class TurnMarks {
  readonly replicaId = randomUUID();
  private connection = 0;
  private seq = 0;
  private socket?: unknown;

  constructor(private readonly redis: RedisClient) {}

  /** Queues the marker of a new turn on `pipeline` (behind its scripts, before its WAIT). */
  queue(pipeline: ChainableCommander): TurnMark {
    const mark = { connection: this.current(), seq: ++this.seq };
    pipeline.set(appliedKey(this.replicaId, mark.connection), mark.seq, 'PX', MARKER_MS);
    return mark;
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
    return Number(await this.redis.get(appliedKey(this.replicaId, connection))) || 0;
  }
}
