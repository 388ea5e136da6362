import type { Logger } from './log.js';

let installed = false;

/**
 * The last line of defence: a stray stream error (an 'error' event without a listener, a throw in
 * a socket callback) would otherwise end the process and every client connection of this replica
 * with it. Each exchange already handles its own errors (proxy.ts); anything that still escapes is
 * logged and counted here, and the process keeps serving. Installed once per process.
 */
export function guardProcess(logger: Logger, count: () => void): void {
  if (installed) return;
  installed = true;
  process.on('uncaughtException', (err) => {
    count();
    logger.error({ err }, 'uncaught error (process kept running)');
  });
  process.on('unhandledRejection', (reason) => {
    count();
    logger.error({ err: reason }, 'unhandled rejection (process kept running)');
  });
}
