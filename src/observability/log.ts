import { createRequire } from 'node:module';
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import type { PinoPretty } from 'pino-pretty';

export type { Logger };

/** Longest a log line waits in the buffer before it is written. */
const FLUSH_INTERVAL_MS = 100;

/**
 * JSON logs on stdout. Credentials are redacted by path, so a header dump or an error carrying a
 * request can never print an API key.
 *
 * Lines are buffered and written in batches (at 64 KiB, every 100 ms, and on exit: LineBatch) rather
 * than one blocking write per request: with an access line per request, per-line writes were the
 * gateway's largest single cost under load.
 */
export function createLogger(level: string, name: string, format: LogFormat = 'json', destination?: DestinationStream): Logger {
  const options = loggerOptions(level, name);
  // A person at a terminal reads coloured lines; machines (and pipes, files, containers) get JSON.
  if (format === 'pretty' || (format === 'auto' && process.stdout.isTTY)) {
    // Loaded only here: every process logging JSON (a server's usual case) spares its load at start.
    const pretty = (createRequire(import.meta.url)('pino-pretty') as { PinoPretty: typeof PinoPretty }).PinoPretty;
    return pino(
      options,
      pretty({
        colorize: true,
        singleLine: true,
        translateTime: 'SYS:HH:MM:ss.l',
        ignore: 'pid,hostname,name,role',
        messageFormat: '{if role}{role}: {end}{msg}',
        sync: true,
      }),
    );
  }
  return pino(options, destination ?? bufferedStdout());
}

/** `auto`: pretty when stdout is a terminal, else JSON. */
export type LogFormat = 'auto' | 'json' | 'pretty';

function loggerOptions(level: string, name: string): LoggerOptions {
  return {
    level,
    name,
    base: { pid: process.pid },
    timestamp: isoTimeOncePerMs,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["proxy-authorization"]',
        'req.headers.cookie',
        'headers.authorization',
        'authorization',
        'apiKey',
        'key',
      ],
      censor: '[redacted]',
    },
  };
}

/**
 * A batch of lines is handed to the stdout writer once it holds this many characters. Each batch
 * is one asynchronous write, and its fixed cost (the thread-pool round trip) dwarfs the bytes:
 * 8 KiB batches cost about 1.5 µs of CPU per access line, 64 KiB ones about 0.2 (measured: issue
 * 22). Lines wait no longer for it: FLUSH_INTERVAL_MS still writes whatever is held.
 */
const BATCH_CHARS = 64 * 1024;

function bufferedStdout(): DestinationStream {
  // minLength 0: sonic-boom writes whatever it is given at once; the batching is LineBatch's.
  // maxWrite: batches that pile up behind a write in flight go out as one write, up to this
  // (sonic-boom's default merges only up to 16 KiB).
  const batch = new LineBatch(pino.destination({ dest: 1, sync: false, minLength: 0, maxWrite: BATCH_CHARS * 4 }));
  setInterval(() => batch.flush(), FLUSH_INTERVAL_MS).unref();
  // Before pino's own exit hooks (registered when the destination was made) flush sonic-boom:
  // a line still in the batch is handed over first, so it is written too.
  process.prependListener('beforeExit', () => batch.handOver());
  process.prependListener('exit', () => batch.handOver());
  return batch;
}

/**
 * Collects log lines in an array and hands them to sonic-boom joined, one write per batch.
 * sonic-boom appends each write to its pending string and then measures that whole string's byte
 * length, which flattens it: a copy of up to 16 KiB (and as much garbage) per log line, with an
 * access line per request (measured: issue 14). Lines keep their order; every line goes through
 * here, so access lines and other log lines never overtake each other.
 */
export class LineBatch {
  private lines: string[] = [];
  private chars = 0;

  constructor(
    private readonly out: Pick<ReturnType<typeof pino.destination>, 'write' | 'flush' | 'flushSync'>,
    private readonly batchChars = BATCH_CHARS,
  ) {}

  write(line: string): boolean {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= this.batchChars) this.handOver();
    return true;
  }

  /** What pino's `logger.flush()` calls. */
  flush(cb?: (err?: Error) => void): void {
    this.handOver();
    this.out.flush(cb);
  }

  flushSync(): void {
    this.handOver();
    this.out.flushSync();
  }

  handOver(): void {
    // Once sonic-boom is ended (pino ends it at beforeExit), a write would throw: lines go nowhere, as before.
    if (this.lines.length === 0 || (this.out as unknown as { destroyed: boolean }).destroyed) return;
    const data = this.lines.length === 1 ? this.lines[0]! : this.lines.join('');
    this.lines = [];
    this.chars = 0;
    this.out.write(data);
  }
}

let lastMs = -1;
let lastTime = '';
let lastSecondMs = -1;
/** `,"time":"2026-11-26T00:40:00.` of the second in lastSecondMs. */
let secondPrefix = '';

/**
 * pino's `isoTime` field, formatted once per millisecond (a busy gateway writes many lines in
 * one), and the date and time of day once per second: toISOString costs about 1 µs (measured),
 * and under load a new millisecond comes every few lines.
 */
export function isoTimeOncePerMs(): string {
  return isoTimeAt(Date.now());
}

/** isoTimeOncePerMs at a given time (tests: the same bytes as toISOString at any millisecond). */
export function isoTimeAt(nowMs: number): string {
  if (nowMs !== lastMs) {
    lastMs = nowMs;
    const ms = nowMs % 1000;
    const secondMs = nowMs - ms;
    if (secondMs !== lastSecondMs) {
      lastSecondMs = secondMs;
      const iso = new Date(secondMs).toISOString();
      secondPrefix = `,"time":"${iso.slice(0, -4)}`;
    }
    lastTime = `${secondPrefix}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`;
  }
  return lastTime;
}

/**
 * A writer of info lines whose fields the caller has serialised already (`,"a":1,"b":"x"`): the
 * bytes pino would write (level, time, the logger's bindings, the fields, msg) go to the logger's
 * own buffered destination, without pino's walk over an object per line. For the access line,
 * written once per request. The caller checks the level, and never passes credentials: nothing
 * is redacted here.
 */
export function infoLineWriter(logger: Logger, msg: string): (fields: string) => void {
  const internals = logger as unknown as Record<symbol, unknown>;
  const stream = internals[pino.symbols.streamSym] as DestinationStream;
  const bindings = internals[pino.symbols.chindingsSym] as string;
  const end = `,"msg":${JSON.stringify(msg)}}\n`;
  return (fields) => stream.write(`{"level":30${isoTimeOncePerMs()}${bindings}${fields}${end}`);
}
