import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * JSON logs on stdout. Credentials are redacted by path, so a header dump or an error carrying a
 * request can never print an API key.
 */
export function createLogger(level: string, name: string): Logger {
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
  });
}
