/**
 * Tests that must not depend on the minute at all count in the day window instead; only midnight
 * UTC can split those, so wait it out when it is less than `needSeconds` away.
 */
export async function awayFromDayEdge(needSeconds = 60): Promise<void> {
  const secondsLeft = 86_400 - (Date.now() % 86_400_000) / 1000;
  if (secondsLeft < needSeconds) await new Promise((r) => setTimeout(r, secondsLeft * 1000 + 50));
}

/**
 * For the few integration tests about the minute window itself (the unit and differential tests
 * cross minute edges on an injected clock; real processes use Redis's clock): runs `scenario`,
 * and if it fails with a minute edge inside it, once more with its fresh state. Two edges cannot
 * fall inside two runs of a scenario shorter than a minute, so where in the minute the test starts
 * does not matter, and a real failure still fails.
 */
export async function inOneMinute(scenario: () => Promise<void>): Promise<void> {
  const startedMinute = Math.floor(Date.now() / 60_000);
  try {
    await scenario();
  } catch (err) {
    if (Math.floor(Date.now() / 60_000) === startedMinute) throw err;
    await scenario();
  }
}
