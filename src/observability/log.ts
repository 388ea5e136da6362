import { pino, type Logger, type LoggerOptions } from 'pino';
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
export function createLogger(level: string, name: string, format: LogFormat = 'json'): Logger {
  const options = loggerOptions(level, name);
  // A person at a terminal reads coloured lines; machines (and pipes, files, containers) get JSON.
  if (format === 'pretty' || (format === 'auto' && process.stdout.isTTY)) {
    return pino(options, PinoPretty({ colorize: true, singleLine: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,name,role', messageFormat: '{if role}{role}: {end}{msg}', sync: true }));
  }
  const destination = pino.destination({ dest: 1, sync: false, minLength: 8 * 1024 });
  setInterval(() => destination.flush(), FLUSH_INTERVAL_MS).unref();
  return pino(options, destination);
}

/** `auto`: pretty when stdout is a terminal, else JSON. */
export type LogFormat = 'auto' | 'json' | 'pretty';

function loggerOptions(level: string, name: string): LoggerOptions {
  return {
    level,
    name,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
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
