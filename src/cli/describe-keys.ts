import type { AuditPage } from '../store/audit-log.js';
import type { PublicKeyRecord } from '../keys/record.js';
import type { CreditsReport } from '../keys/lifecycle/key-credits.js';

// Human output of `tollgate keys …` (with --json the records are printed as they are).

function quotaText(record: PublicKeyRecord): string {
  let windows = record.perMinute !== undefined ? `${record.perMinute}/min, ${record.perDay}/day (own quota)` : 'from plan';
  if (record.perMonth !== undefined) windows += `, ${record.perMonth}/month (own)`;
  if (record.maxConcurrent !== undefined) windows += `, ${record.maxConcurrent} in flight (own)`;
  if (record.billingAnchor !== undefined) windows += `, month from day ${Number(record.billingAnchor.slice(8))}`;
  return record.shadow ? `${windows}, shadow` : windows;
}

export function describeKey(record: PublicKeyRecord): string {
  const lines = [
    `id:       ${record.id}`,
    `name:     ${record.name || '-'}`,
    `plan:     ${record.plan}`,
    `quota:    ${quotaText(record)}`,
    ...(record.owner ? [`owner:    ${record.owner}`] : []),
    ...(record.allowedCidrs ? [`networks: ${record.allowedCidrs.join(' ')}`] : []),
    ...(record.scopes ? [`scopes:   ${record.scopes.join(' ')}`] : []),
    `status:   ${record.status}`,
    `created:  ${record.createdAt}`,
    `expires:  ${record.expiresAt ?? 'never'}`,
  ];
  if (record.graceEndsAt) lines.push(`previous secret valid until: ${record.graceEndsAt}`);
  return lines.join('\n');
}

export function keyTable(records: PublicKeyRecord[]): string {
  const rows = [['ID', 'NAME', 'PLAN', 'STATUS', 'QUOTA', 'CREATED', 'EXPIRES']];
  for (const r of records) rows.push([r.id, r.name || '-', r.plan, r.status, quotaText(r), r.createdAt, r.expiresAt ?? '-']);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function describeAudit(page: AuditPage): string {
  if (page.entries.length === 0) return 'no audit entries';
  const lines: string[] = [];
  for (const entry of page.entries) {
    lines.push(`${entry.at}  ${entry.actor}  ${entry.action}  ${entry.keyId}${entry.reason !== undefined ? `  (${entry.reason})` : ''}`);
    for (const [field, change] of Object.entries(entry.changes)) {
      lines.push(`    ${field}: ${JSON.stringify(change.before)} → ${JSON.stringify(change.after)}`);
    }
  }
  if (page.next) lines.push(`(older entries: --cursor ${page.next})`);
  return lines.join('\n');
}

export function describeCredits(report: CreditsReport): string {
  const whose = report.subject === report.id ? '' : ` (the balance of ${report.subject}, shared by its keys)`;
  const spent = report.required ? '' : '; its plan does not require credits, so none are spent';
  return `${report.id}: ${report.credits} credits${whose}${spent}`;
}
