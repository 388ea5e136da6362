import type { UsageReader } from '../../src/store/usage-store.js';

/** A subject's usage days as a reader yields them (every day it holds), in day order, as one text to compare. */
export async function usageRows(reader: UsageReader, subject: string): Promise<string> {
  const days = [];
  for await (const day of reader.days(0, Number.MAX_SAFE_INTEGER, subject)) days.push(day);
  return JSON.stringify(days.sort((a, b) => a.dayStartMs - b.dayStartMs));
}
