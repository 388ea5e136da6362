import { describe, expect, it } from 'vitest';
import type { PlansConfig } from '../../src/config/plans-schema.js';
import { hashApiKey, parseApiKey } from '../../src/keys/format.js';
import { revokeKey, updateKey } from '../../src/keys/lifecycle/change-key.js';
import { createKey } from '../../src/keys/lifecycle/create-key.js';
import type { Caller, LifecycleDeps } from '../../src/keys/lifecycle/deps.js';
import { LifecycleError } from '../../src/keys/lifecycle/lifecycle-error.js';
import { listKeys } from '../../src/keys/lifecycle/list-keys.js';
import { rotateKey } from '../../src/keys/lifecycle/rotate-key.js';
import { unbanKey } from '../../src/keys/lifecycle/unban-key.js';
import { MemoryAuditLog } from '../../src/store/memory/memory-audit-log.js';
import { MemoryKeyStore } from '../../src/store/memory/memory-key-store.js';
import { MemoryQuotaStore } from '../../src/store/memory/memory-quota-store.js';

// The lifecycle core on the memory stores with an injected clock: the rules the admin API and the
// CLI share. (Real Redis and processes: test/integration/admin-api.test.ts, keys-cli.test.ts.)

const PLANS: PlansConfig = {
  plans: { free: { perMinute: 60, perDay: 1000 }, pro: { perMinute: 300, perDay: 10000 } },
  ban: { afterRejections: 2, window: 60, duration: 900 },
};
const API: Caller = { actor: 'ops', role: 'admin', label: (field) => field };
const CLI: Caller = {
  actor: 'cli',
  role: 'admin',
  label: (field) => ({ perMinute: '--per-minute', perDay: '--per-day', expiresAt: '--expires-at' })[field] ?? field,
};
const START_MS = Date.parse('2026-05-01T12:00:00Z');

function setup() {
  let nowMs = START_MS;
  const keys = new MemoryKeyStore();
  const quotas = new MemoryQuotaStore(() => nowMs);
  const audit = new MemoryAuditLog(100, () => nowMs);
  const deps: LifecycleDeps = { keys, quotas, audit, plans: () => PLANS, now: () => nowMs };
  return { deps, keys, quotas, audit, advance: (ms: number) => (nowMs += ms) };
}

async function refusal(run: Promise<unknown>): Promise<LifecycleError> {
  const err = await run.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(LifecycleError);
  return err as LifecycleError;
}

describe('createKey', () => {
  it('stores only the hash, returns the key once, audits without the secret', async () => {
    const { deps, keys, audit } = setup();
    const { record, key } = await createKey(deps, { plan: 'free', name: 'a', expiresAt: '2026-06-01T00:00:00+02:00' }, API);
    expect(parseApiKey(key)).toBe(record.id);
    expect(record).toEqual({
      id: record.id,
      name: 'a',
      plan: 'free',
      status: 'active',
      createdAt: '2026-05-01T12:00:00.000Z',
      expiresAt: '2026-05-31T22:00:00.000Z',
    });
    expect((await keys.get(record.id))!.hash).toBe(hashApiKey(key));
    const { entries } = await audit.page({ limit: 10 });
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ actor: 'ops', action: 'key.create', keyId: record.id, at: '2026-05-01T12:00:00.000Z' });
    expect(JSON.stringify(entries)).not.toContain(key.slice(16));
    expect(JSON.stringify(entries)).not.toContain(hashApiKey(key));
  });

  it("refuses bad input in the caller's terms, storing nothing", async () => {
    const { deps, keys } = setup();
    expect((await refusal(createKey(deps, { plan: 'free', perMinute: 5 }, CLI))).message).toBe(
      "give both --per-minute and --per-day (numbers, or both null to use the plan's)",
    );
    expect((await refusal(createKey(deps, { plan: 'free', perMinute: 5 }, API))).message).toMatch(/^give both perMinute and perDay/);
    expect((await refusal(createKey(deps, { plan: 'free', expiresAt: '2026-05-01T11:59:59Z' }, CLI))).message).toBe(
      '--expires-at must be in the future (it is 2026-05-01T12:00:00.000Z now)',
    );
    const plan = await refusal(createKey(deps, { plan: 'gold' }, API));
    expect(plan.code).toBe('unknown_plan');
    expect(plan.message).toBe('unknown plan "gold" (plans: free, pro)');
    // Something that is not a plan name (a pasted key, say) is not echoed.
    expect((await refusal(createKey(deps, { plan: 'tg_abc_SECRET' }, API))).message).not.toContain('SECRET');
    expect((await refusal(createKey(deps, { plan: 'free', name: 'a\nforged log line' }, API))).message).toBe(
      'name must not contain control characters',
    );
    expect((await refusal(createKey(deps, { plan: 'free', extra: 1, 'tg_x_SECRET!': 2 }, API))).message).toBe(
      'unknown fields extra, (a field)',
    );
    expect(await keys.list()).toEqual([]);
  });
});

describe('updateKey and revokeKey', () => {
  it('applies a patch, null removes own quotas and expiry, and the audit holds only what changed', async () => {
    const { deps, audit } = setup();
    const { record } = await createKey(deps, { plan: 'free', perMinute: 10, perDay: 100, expiresAt: '2027-01-01T00:00:00Z' }, API);
    const updated = await updateKey(deps, record.id, { plan: 'pro', perMinute: null, perDay: null, expiresAt: null }, API);
    expect(updated).toEqual({ id: record.id, name: '', plan: 'pro', status: 'active', createdAt: record.createdAt });
    const [last] = (await audit.page({ limit: 1 })).entries;
    expect(last!.changes).toEqual({
      plan: { before: 'free', after: 'pro' },
      perMinute: { before: 10, after: null },
      perDay: { before: 100, after: null },
      expiresAt: { before: '2027-01-01T00:00:00.000Z', after: null },
    });
  });

  it('refuses an unknown id with key_not_found, and revoking twice is harmless', async () => {
    const { deps } = setup();
    expect((await refusal(updateKey(deps, 'zzzzzzzzzzzz', { name: 'x' }, API))).code).toBe('key_not_found');
    const { record } = await createKey(deps, { plan: 'free' }, API);
    expect((await revokeKey(deps, record.id, API)).status).toBe('revoked');
    expect((await revokeKey(deps, record.id, API)).status).toBe('revoked');
  });
});

describe('rotateKey', () => {
  it('keeps id and plan, stores the new hash and keeps the old one until the grace ends', async () => {
    const { deps, keys } = setup();
    const first = await createKey(deps, { plan: 'pro' }, API);
    const rotated = await rotateKey(deps, first.record.id, { graceSeconds: 60 }, API);
    expect(parseApiKey(rotated.key)).toBe(first.record.id);
    expect(rotated.record).toMatchObject({ id: first.record.id, plan: 'pro', graceEndsAt: '2026-05-01T12:01:00.000Z' });
    expect(rotated.record).not.toHaveProperty('previousHash');
    const stored = (await keys.get(first.record.id))!;
    expect(stored.hash).toBe(hashApiKey(rotated.key));
    expect(stored.previousHash).toBe(hashApiKey(first.key));
  });

  it('with 0 grace, or rotating again, keeps no older secret than the one replaced', async () => {
    const { deps, keys } = setup();
    const first = await createKey(deps, { plan: 'pro' }, API);
    const second = await rotateKey(deps, first.record.id, { graceSeconds: 60 }, API);
    await rotateKey(deps, first.record.id, { graceSeconds: 60 }, API);
    expect((await keys.get(first.record.id))!.previousHash).toBe(hashApiKey(second.key));
    await rotateKey(deps, first.record.id, { graceSeconds: 0 }, API);
    const stored = (await keys.get(first.record.id))!;
    expect(stored.previousHash).toBeUndefined();
    expect(stored.graceEndsAt).toBeUndefined();
  });

  it('refuses a revoked key and bad graces', async () => {
    const { deps } = setup();
    const { record } = await createKey(deps, { plan: 'pro' }, API);
    expect((await refusal(rotateKey(deps, record.id, {}, API))).message).toBe('graceSeconds is required');
    expect((await refusal(rotateKey(deps, record.id, { graceSeconds: 1.5 }, API))).message).toBe('graceSeconds must be a whole number');
    expect((await refusal(rotateKey(deps, record.id, { graceSeconds: 31 * 86400 }, API))).message).toMatch(/at most 2592000/);
    await revokeKey(deps, record.id, API);
    expect((await refusal(rotateKey(deps, record.id, { graceSeconds: 0 }, API))).code).toBe('key_revoked');
  });
});

describe('unbanKey', () => {
  it('lifts a ban and says whether there was one', async () => {
    const { deps, quotas } = setup();
    const { record } = await createKey(deps, { plan: 'free' }, API);
    const tiny = { perMinute: 1, perDay: 10 };
    for (let i = 0; i < 3; i++) await quotas.consume(record.id, tiny, PLANS.ban);
    expect((await quotas.usage(record.id)).verdict).toBe('banned');
    expect(await unbanKey(deps, record.id, API)).toEqual({ id: record.id, unbanned: true });
    expect((await quotas.usage(record.id)).verdict).toBe('allowed');
    expect(await unbanKey(deps, record.id, API)).toEqual({ id: record.id, unbanned: false });
  });
});

describe('listKeys', () => {
  it('pages in id order and derives `expired` from the clock', async () => {
    const { deps, advance } = setup();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await createKey(deps, { plan: i < 3 ? 'free' : 'pro' }, API)).record.id);
    const soon = (await createKey(deps, { plan: 'free', expiresAt: '2026-05-01T12:00:10Z' }, API)).record.id;
    ids.push(soon);

    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await listKeys(deps, { limit: '2', ...(cursor ? { cursor } : {}) }, API.label);
      expect(page.keys.length).toBeLessThanOrEqual(2);
      seen.push(...page.keys.map((k) => k.id));
      cursor = page.next ?? undefined;
    } while (cursor);
    expect(seen).toEqual([...ids].sort());

    expect((await listKeys(deps, { plan: 'pro' }, API.label)).keys).toHaveLength(2);
    expect((await listKeys(deps, { status: 'expired' }, API.label)).keys).toEqual([]);
    advance(10_000);
    expect((await listKeys(deps, { status: 'expired' }, API.label)).keys.map((k) => k.id)).toEqual([soon]);
    expect((await listKeys(deps, { status: 'active' }, API.label)).keys.map((k) => k.id)).not.toContain(soon);
    expect((await refusal(listKeys(deps, { limit: '0' }, API.label))).message).toBe('limit must be a whole number from 1 to 200');
  });
});

describe('MemoryAuditLog', () => {
  it('keeps the newest maxEntries, pages newest first with strictly growing ids', async () => {
    const log = new MemoryAuditLog(3, () => START_MS);
    for (let i = 0; i < 5; i++) await log.append({ at: '', actor: 'ops', action: 'key.update', keyId: `k${i}`, changes: {} });
    const first = await log.page({ limit: 2 });
    expect(first.entries.map((e) => e.keyId)).toEqual(['k4', 'k3']);
    const second = await log.page({ before: first.next!, limit: 2 });
    expect(second.entries.map((e) => e.keyId)).toEqual(['k2']);
    expect(second.next).toBeNull();
    expect(new Set([...first.entries, ...second.entries].map((e) => e.id)).size).toBe(3);
  });
});

describe('month windows and billing anchors of a key', () => {
  it('stores an own month and an anchor, audits them, and removes them with null', async () => {
    const { deps, audit } = setup();
    const { record } = await createKey(deps, { plan: 'free', perMonth: 20_000, billingAnchor: '2026-01-31' }, API);
    expect(record).toMatchObject({ perMonth: 20_000, billingAnchor: '2026-01-31' });
    const cleared = await updateKey(deps, record.id, { perMonth: null, billingAnchor: null }, API);
    expect(cleared).not.toHaveProperty('perMonth');
    expect(cleared).not.toHaveProperty('billingAnchor');
    const changes = (await audit.page({ limit: 1 })).entries[0]!.changes;
    expect(changes).toEqual({ perMonth: { before: 20_000, after: null }, billingAnchor: { before: '2026-01-31', after: null } });
  });

  it('refuses an anchor that is not a real date and a month below the own day, naming the field', async () => {
    const { deps } = setup();
    const anchor = await refusal(createKey(deps, { plan: 'free', billingAnchor: '2026-02-30' }, API));
    expect(anchor.message).toMatch(/^billingAnchor must be a date/);
    const month = await refusal(createKey(deps, { plan: 'free', perMinute: 10, perDay: 500, perMonth: 400 }, API));
    expect(month.message).toBe('perMonth cannot be lower than perDay');
  });
});
