import { pino, type Logger } from 'pino';

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
export function createLogger(level: string, name: string): Logger {
  const destination = pino.destination({ dest: 1, sync: false, minLength: 8 * 1024 });
  setInterval(() => destination.flush(), FLUSH_INTERVAL_MS).unref();
  return pino({
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
  }, destination);
}
