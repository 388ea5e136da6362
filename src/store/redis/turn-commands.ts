import { Command, type Redis } from 'ioredis';

type Reply = (err?: Error | null, reply?: unknown) => void;

/** ioredis's defined script (Commander.defineCommand), the parts its own `execute` uses. */
interface DefinedScript {
  readonly sha: string;
  readonly numberOfKeys: number | null;
  readonly keyPrefix: string;
  readonly readOnly: boolean;
  /** Its command: EVAL on a connection that has not run it yet, EVALSHA after. */
  readonly Command: new (name: string, args: unknown[], options: ConstructorParameters<typeof Command>[2]) => Command;
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
 * A call Redis answers NOSCRIPT (its scripts lost: SCRIPT FLUSH, or a Redis 7.4 evicting scripts
 * loaded by EVAL) is sent again as EVAL, as ioredis's own `execute` does, but here `resent` is told
 * first: the call now goes behind whatever was written after it, the turn's marker included.
 * (Writing a call's protocol text here instead of through ioredis's Command saved its argument
 * handling but cost more in garbage collection than it saved, measured: not done.)
 */
export class TurnCommands {
  /** The queued calls; one without a script is a plain command, `name` (`command`). */
  private readonly calls: Array<{ script?: DefinedScript; name: string; args: unknown[]; done: Reply }> = [];

  /**
   * Called, when a call is sent again, just before it is written (turn-marks.ts: the turn is then
   * covered only by a later marker). Its answer comes after those of every command written before.
   */
  resent?: () => void;

  constructor(private readonly redis: Redis) {}

  /** Queues the defined script `name` with `args`, the last of them its callback, as on a Pipeline. */
  queue(name: string, args: unknown[]): void {
    const script = (this.redis.scriptsSet as Record<string, DefinedScript | undefined>)[name];
    if (!script) throw new Error(`no script ${name} is defined`);
    // A Pipeline's callback is optional; here a missing one would send the last argument as the
    // callback and the script one argument short: refused instead.
    if (typeof args[args.length - 1] !== 'function') throw new Error(`${name} queued without its callback`);
    const done = args.pop() as Reply;
    this.calls.push({ script, name, args, done });
  }

  /**
   * Queues a plain command (a turn's marker, turn-marks.ts), written behind the calls queued before
   * it. Not through ioredis's command methods: those auto-pipeline (connect.ts), which would write
   * it a loop turn later, maybe on another connection than the calls before it.
   */
  command(name: string, args: Array<string | number>, done: Reply): void {
    this.calls.push({ name, args, done });
  }

  /**
   * One script call, as ioredis's Script `execute` (EVALSHA, made EVAL on a connection that has not
   * run the script; sent again on NOSCRIPT), answered through `done` in the order of the replies:
   * a NOSCRIPT answer is handled (and `resent` told) before any reply that came after it.
   */
  private run(script: DefinedScript, args: unknown[], done: Reply): void {
    const full = typeof script.numberOfKeys === 'number' ? [script.sha, script.numberOfKeys, ...args] : [script.sha, ...args];
    const options = () => ({
      replyEncoding: 'utf8' as const,
      ...(script.keyPrefix ? { keyPrefix: script.keyPrefix } : {}),
      ...(script.readOnly ? { readOnly: true } : {}),
    });
    const first = new script.Command('evalsha', full, options());
    first.promise.then(
      (reply: unknown) => done(null, reply),
      (err: Error) => {
        if (!err.message.includes('NOSCRIPT')) return done(err);
        this.resent?.();
        const again = new script.Command('evalsha', full, options());
        again.promise.then(
          (reply: unknown) => done(null, reply),
          (e: Error) => done(e),
        );
        void this.redis.sendCommand(again);
      },
    );
    void this.redis.sendCommand(first);
  }

  /** Writes the queued calls, in their order: one write for all of them. */
  send(): void {
    const socket = this.redis.stream as { writable?: boolean; cork(): void; uncork(): void } | undefined;
    const corked = this.calls.length > 1 && socket?.writable === true;
    if (corked) socket.cork();
    try {
      // Options of its own per call (`run`): a key prefix or read-only flag is written into them.
      for (const { script, name, args, done } of this.calls) {
        if (script) this.run(script, args, done);
        else void this.redis.sendCommand(new Command(name, args as Array<string | number>, { replyEncoding: 'utf8' }, done));
      }
    } finally {
      if (corked) socket.uncork();
    }
  }
}
