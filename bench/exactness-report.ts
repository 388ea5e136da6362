import type { ExactnessResults, ExactnessWindow } from './phases/exactness.js';
import type { Target } from './report.js';

/**
 * The exactness phase in the report (./phases/exactness.ts): a window's verdict, its table, and
 * its row in the targets table.
 */
function verdict(w: ExactnessWindow, limit: number): string {
  if (w.admitted > limit) return '**over the limit**';
  if (!w.full) return 'partial (≤ limit)';
  if (w.admitted === limit) return 'exact';
  return w.refused > 0 ? '**under, while refusing**' : 'not driven over the limit';
}

const clock = (seconds: number) => new Date(seconds * 1000).toISOString().slice(11, 16);
const perRequest = (w: ExactnessWindow) => {
  const requests = w.admitted + w.refused + w.other;
  return requests ? (w.redisCommands / requests).toFixed(3) : '–';
};

export function exactnessTable(e: ExactnessResults): string {
  const header = [
    `minute window (UTC, Redis's clock): ${e.replicas} gateways with quota leases, one key of ${e.limitPerMinute}/minute at ${e.ratePerSecond} req/s`,
    'admitted (2xx)',
    'refused (429)',
    'other',
    'Redis commands',
    'per request',
    'verdict',
  ];
  const rows = e.windows.map((w) => [
    `${clock(w.endSeconds - 60)}–${clock(w.endSeconds)}${w.full ? '' : ' (partial)'}`,
    String(w.admitted),
    String(w.refused),
    String(w.other),
    String(w.redisCommands),
    perRequest(w),
    verdict(w, e.limitPerMinute),
  ]);
  const lines = [
    `| ${header.join(' | ')} |`,
    `|---|${header
      .slice(1)
      .map(() => '---:')
      .join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ];
  const requests = e.windows.reduce((n, w) => n + w.admitted + w.refused + w.other, 0);
  return (
    `${lines.join('\n')}\n\n${e.leased} of ${requests} requests admitted from a lease; ` +
    `${e.errors} connection errors, ${e.unplaced} answers without X-RateLimit-Reset (in no window).`
  );
}

export function exactnessTargets(e: ExactnessResults | undefined): Target[] {
  if (!e) return [];
  const full = e.windows.filter((w) => w.full);
  const most = Math.max(0, ...e.windows.map((w) => w.admitted));
  return [
    {
      issue: '–',
      what: `${e.replicas} replicas with quota leases, one key of ${e.limitPerMinute}/minute at ${e.ratePerSecond} req/s: admitted per minute window`,
      target: `= ${e.limitPerMinute} in every full window, > ${e.limitPerMinute} in none`,
      measured: `full windows ${full.map((w) => w.admitted).join(' / ') || 'none'}; most in any window ${most}`,
      met: full.length > 0 && full.every((w) => w.admitted === e.limitPerMinute) && most <= e.limitPerMinute,
    },
  ];
}
