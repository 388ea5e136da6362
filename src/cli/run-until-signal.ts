import type { Logger } from '../observability/log.js';

/**
 * Keeps a server process up until SIGTERM or SIGINT, then runs `close` (which finishes in-flight
 * requests within the grace period) and exits 0. A second signal exits at once.
 */
export function runUntilSignal(logger: Logger, close: () => Promise<void>): void {
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1);
    stopping = true;
    logger.info({ signal }, 'shutting down');
    close().then(
      () => {
        logger.info('stopped');
        logger.flush();
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        logger.flush();
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
