import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { PinoPretty } from 'pino-pretty';

export type { Logger };

/** Longest a log line waits in the buffer before it is written. */
const FLUSH_INTERVAL_MS = 100;

/**
 * JSON logs on stdout. Credentials are redacted by path, so a header dump or an error carrying a
 * request can never print an API key.
 *
 * Lines are buffered and written in batches (at 8 KiB, every 100 ms, and on exit) rather than
 * one blocking write per request: with an access line per request, per-line writes were the
 * gateway's largest single cost under load.
 */
export function createLogger(level: string, name: string, format: LogFormat = 'json', destination?: DestinationStream): Logger {
  const options = loggerOptions(level, name);
  // A person at a terminal reads coloured lines; machines (and pipes, files, containers) get JSON.
  if (format === 'pretty' || (format === 'auto' && process.stdout.isTTY)) {
    return pino(options, PinoPretty({ colorize: true, singleLine: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,name,role', messageFormat: '{if role}{role}: {end}{msg}', sync: true }));
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

function bufferedStdout(): DestinationStream {
  const destination = pino.destination({ dest: 1, sync: false, minLength: 8 * 1024 });
  setInterval(() => destination.flush(), FLUSH_INTERVAL_MS).unref();
  return destination;
}

let lastMs = -1;
let lastTime = '';

/** pino's `isoTime` field, formatted once per millisecond: a busy gateway writes many lines in one. */
export function isoTimeOncePerMs(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastTime = `,"time":"${new Date(now).toISOString()}"`;
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
