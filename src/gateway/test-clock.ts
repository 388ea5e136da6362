import { readFileSync } from 'node:fs';
import type { Logger } from '../observability/log.js';

/**
 * A shifted quota clock for the test suite (test/integration/month-windows.test.ts), off unless
 * TOLLGATE_TEST_CLOCK_FILE names a file. Armed, the shared quota store decides on this machine's
 * clock plus the milliseconds the file holds (read on every call, so a test moves every gateway
 * of a stack across a month edge at once, without waiting for one), instead of Redis's clock.
 * Never arm it in production: replicas must share Redis's clock.
 */
export const TEST_CLOCK_ENV = 'TOLLGATE_TEST_CLOCK_FILE';

export function testClockFromEnv(env: NodeJS.ProcessEnv, logger: Logger): (() => number) | undefined {
  const file = env[TEST_CLOCK_ENV];
  if (!file) return undefined;
  logger.warn({ file }, `${TEST_CLOCK_ENV} is set: quotas run on a test clock, not Redis's (tests only)`);
  return () => Date.now() + Number(readFileSync(file, 'utf8').trim() || 0);
}
