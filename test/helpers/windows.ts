/**
 * Quota tests count within one UTC minute. Starting one just before the minute ends would split
 * its requests over two windows, so wait until a fresh minute has at least `needSeconds` left.
 */
export async function awayFromMinuteEdge(needSeconds = 15): Promise<void> {
  const secondsLeft = 60 - (Date.now() % 60_000) / 1000;
  if (secondsLeft < needSeconds) await new Promise((r) => setTimeout(r, secondsLeft * 1000 + 50));
}
