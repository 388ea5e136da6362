import type { AuditEntry, AuditLog, AuditPage } from '../audit-log.js';

/** The embedded store's audit: the newest `maxEntries` entries of this process, in memory. */
export class MemoryAuditLog implements AuditLog {
  private readonly entries: AuditEntry[] = [];
  private lastMs = 0;
  private sequence = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {}

  async append(entry: Omit<AuditEntry, 'id'>): Promise<void> {
    // Ids grow strictly, like a Redis stream's, even when two entries share a millisecond.
    const ms = Math.max(this.now(), this.lastMs);
    this.sequence = ms === this.lastMs ? this.sequence + 1 : 0;
    this.lastMs = ms;
    this.entries.push({ id: `${ms}-${this.sequence}`, ...entry });
    if (this.entries.length > this.maxEntries) this.entries.splice(0, this.entries.length - this.maxEntries);
  }

  async page({ before, limit }: { before?: string; limit: number }): Promise<AuditPage> {
    const newestFirst = [...this.entries].reverse();
    const start = before === undefined ? 0 : newestFirst.findIndex((e) => compareIds(e.id, before) < 0);
    const slice = start < 0 ? [] : newestFirst.slice(start, start + limit + 1);
    const entries = slice.slice(0, limit);
    return { entries, next: slice.length > limit ? entries[entries.length - 1]!.id : null };
  }
}

function compareIds(a: string, b: string): number {
  const [aMs, aSeq] = a.split('-').map(Number) as [number, number];
  const [bMs, bSeq] = b.split('-').map(Number) as [number, number];
  return aMs - bMs || aSeq - bSeq;
}
