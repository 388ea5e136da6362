import type { Logger } from './log.js';

/**
 * A warn line that clients can cause (a refused admin token, a request without the gateway's
 * assertion, a client resetting streams), written at most `perMinute` times a minute: a flood of
 * bad requests cannot fill a disk or drown the log. The first line after a quiet spell says how many
 * were left out (`suppressed`); metrics still count every one. Error level is for our own faults.
 */
export function limitedWarn(logger: Logger, msg: string, perMinute = 60): (fields: Record<string, unknown>) => void {
  let windowStartMs = 0;
  let written = 0;
  let suppressed = 0;
  return (fields) => {
    const nowMs = Date.now();
    if (nowMs - windowStartMs >= 60_000) {
      windowStartMs = nowMs;
      written = 0;
    }
    if (written >= perMinute) {
      suppressed++;
      return;
    }
    written++;
    if (suppressed > 0) {
      logger.warn({ ...fields, suppressed }, msg);
      suppressed = 0;
    } else logger.warn(fields, msg);
  };
}
