import type { Redis } from 'ioredis';

type Reply = (err?: Error | null, reply?: unknown) => void;

/** ioredis's defined script (Commander.defineCommand): EVALSHA, EVAL once if the server lacks it. */
interface DefinedScript {
  execute(container: Redis, args: unknown[], options: { replyEncoding: 'utf8' }, callback: Reply): unknown;
}

/**
 * A turn's script calls (redis-quota-store.ts, `pipelined`) written straight to the connection at
 * the turn's end, without an ioredis Pipeline: a Pipeline copies every defined script onto itself
 * when it is made, and adds a promise per command and a result array, once per turn, which the
 * turn's one or two calls do not need. Each call is the defined script's own command, as a
 * Pipeline sends it (EVAL the first time on a connection, EVALSHA after, EVAL again on NOSCRIPT;
 * the command timeout); several calls of one turn are corked into one write. Replies are decoded
 * as a Pipeline's (a string in a reply stays a string, never a Buffer that reads as NaN).
 * With the offline queue off (connect.ts), a call is written at once on the connection of that
 * moment or fails, as a Pipeline's.
 * (Writing a call's protocol text here instead of through ioredis's Command saved its argument
 * handling but cost more in garbage collection than it saved, measured: not done.)
 */
export class TurnCommands {
  private readonly calls: Array<{ script: DefinedScript; args: unknown[]; done: Reply }> = [];

  constructor(private readonly redis: Redis) {}

  /** Queues the defined script `name` with `args`, the last of them its callback, as on a Pipeline. */
  queue(name: string, args: unknown[]): void {
    const script = (this.redis.scriptsSet as Record<string, DefinedScript | undefined>)[name];
    if (!script) throw new Error(`no script ${name} is defined`);
    // A Pipeline's callback is optional; here a missing one would send the last argument as the
    // callback and the script one argument short: refused instead.
    if (typeof args[args.length - 1] !== 'function') throw new Error(`${name} queued without its callback`);
    const done = args.pop() as Reply;
    this.calls.push({ script, args, done });
  }

  /** Writes the queued calls, in their order: one write for all of them. */
  send(): void {
    const socket = this.redis.stream as { writable?: boolean; cork(): void; uncork(): void } | undefined;
    const corked = this.calls.length > 1 && socket?.writable === true;
    if (corked) socket.cork();
    try {
      // Options of its own per call: execute writes a key prefix or read-only flag into them.
      for (const { script, args, done } of this.calls) script.execute(this.redis, args, { replyEncoding: 'utf8' }, done);
    } finally {
      if (corked) socket.uncork();
    }
  }
}
