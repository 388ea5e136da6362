import type { AuditEntry, AuditLog, AuditPage } from '../audit-log.js';
import type { RedisClient } from './connect.js';
import { AUDIT_STREAM } from './redis-keys.js';

/**
 * The audit as a Redis stream shared by every replica and the CLI. XADD trims it to about
 * `maxEntries` (`MAXLEN ~`: Redis trims whole nodes, so a few more may stay; never fewer).
 */
export class RedisAuditLog implements AuditLog {
  constructor(
    private readonly redis: RedisClient,
    private readonly maxEntries: number,
  ) {}

  async append(entry: Omit<AuditEntry, 'id'>): Promise<void> {
    await this.redis.xadd(
      AUDIT_STREAM,
      'MAXLEN',
      '~',
      String(this.maxEntries),
      '*',
      'at',
      entry.at,
      'actor',
      entry.actor,
      'action',
      entry.action,
      'keyId',
      entry.keyId,
      'changes',
      JSON.stringify(entry.changes),
      // Who acted under which role, and whose key: absent fields are not written.
      ...optionalFields(entry),
    );
  }

  async page({ before, limit }: { before?: string; limit: number }): Promise<AuditPage> {
    // `(id` is an exclusive bound (Redis ≥ 6.2): the page starts just after the cursor.
    const rows = await this.redis.xrevrange(AUDIT_STREAM, before === undefined ? '+' : `(${before}`, '-', 'COUNT', limit + 1);
    const entries = rows.slice(0, limit).map(([id, fields]) => toEntry(id, fields));
    return { entries, next: rows.length > limit ? entries[entries.length - 1]!.id : null };
  }
}

function toEntry(id: string, fields: string[]): AuditEntry {
  const map: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) map[fields[i]!] = fields[i + 1]!;
  return {
    id,
    at: map.at ?? '',
    actor: map.actor ?? '',
    action: map.action as AuditEntry['action'],
    keyId: map.keyId ?? '',
    changes: JSON.parse(map.changes ?? '{}') as AuditEntry['changes'],
    ...(map.role !== undefined && { role: map.role }),
    ...(map.email !== undefined && { email: map.email }),
    ...(map.owner !== undefined && { owner: map.owner }),
    ...(map.reason !== undefined && { reason: map.reason }),
  };
}

function optionalFields(entry: Omit<AuditEntry, 'id'>): string[] {
  const fields: string[] = [];
  for (const name of ['role', 'email', 'owner', 'reason'] as const) if (entry[name] !== undefined) fields.push(name, entry[name]);
  return fields;
}
