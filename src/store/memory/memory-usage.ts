import { addUsage, type HourUsage, type UsageDay } from '../../quota/usage-hours.js';
import { dayMayOverlap, type UsageReader } from '../usage-store.js';

/**
 * The embedded store's usage for invoicing (what the quota script keeps in Redis): per subject and
 * day, its hours. Days older than the retention are dropped as new ones begin.
 */
export class MemoryUsage implements UsageReader {
  private readonly bySubject = new Map<string, Map<number, UsageDay>>();

  constructor(private readonly retentionMs: number) {}

  add(subject: string, hour: HourUsage): void {
    if (this.retentionMs <= 0) return;
    let days = this.bySubject.get(subject);
    if (!days) this.bySubject.set(subject, (days = new Map()));
    let day = days.get(hour.dayStartMs);
    if (!day) {
      const { dayStartMs, dayEndMs, monthStartMs, monthEndMs } = hour;
      days.set(dayStartMs, (day = { subject, dayStartMs, dayEndMs, monthStartMs, monthEndMs, hours: [] }));
      for (const start of days.keys()) if (start < dayStartMs - this.retentionMs) days.delete(start);
    }
    let stored = day.hours.find((h) => h.hourStartMs === hour.hourStartMs);
    if (!stored) {
      day.hours.push((stored = { hourStartMs: hour.hourStartMs, admitted: 0, refused: 0, units: 0, credits: 0 }));
      day.hours.sort((a, b) => a.hourStartMs - b.hourStartMs);
    }
    addUsage(stored, hour);
  }

  async *days(fromMs: number, toMs: number, subject?: string): AsyncIterable<UsageDay> {
    const subjects = subject === undefined ? [...this.bySubject.keys()] : [subject];
    for (const name of subjects) {
      for (const day of this.bySubject.get(name)?.values() ?? []) {
        if (dayMayOverlap(day.dayStartMs, fromMs, toMs)) yield { ...day, hours: day.hours.map((h) => ({ ...h })) };
      }
    }
  }
}
