/**
 * Quota tests count within one UTC minute. Starting one just before the minute ends would split
 * its requests over two windows, so wait until a fresh minute has at least `needSeconds` left.
 */
export async function awayFromMinuteEdge(needSeconds = 15): Promise<void> {
  const secondsLeft = 60 - (Date.now() % 60_000) / 1000;
  if (secondsLeft < needSeconds) await new Promise((r) => setTimeout(r, secondsLeft * 1000 + 50));
}

/**
 * Tests that must not depend on the minute at all count in the day window instead; only midnight
 * UTC can split those, so wait it out when it is less than `needSeconds` away.
 */
export async function awayFromDayEdge(needSeconds = 60): Promise<void> {
  const secondsLeft = 86_400 - (Date.now() % 86_400_000) / 1000;
  if (secondsLeft < needSeconds) await new Promise((r) => setTimeout(r, secondsLeft * 1000 + 50));
}
