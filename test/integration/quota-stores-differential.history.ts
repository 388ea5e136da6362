import fc from 'fast-check';
import type { BanPolicy, Quota } from '../../src/config/plans-schema.js';

/** One step of a history run on both quota stores by quota-stores-differential.test.ts. */
export type Step =
  | { kind: 'request'; key: number; cost?: number }
  | { kind: 'burst'; requests: Array<{ key: number; cost: number }> }
  /** `count` requests of one key one after another, `everyMs` apart: many minutes' worth, across edges. */
  | { kind: 'drip'; key: number; count: number; everyMs: number }
  | { kind: 'usage' | 'unban'; key: number }
  | { kind: 'advance'; ms: number }
  /** The next edge of the window (the day and month of the plans' calendar), and `offsetMs` from it. */
  | { kind: 'toEdge'; window: 'minute' | 'day' | 'month'; offsetMs: number }
  | { kind: 'reloadPlans'; quota: Quota; ban: BanPolicy }
  | { kind: 'setQuota'; key: number; quota: Quota | null }
  /**
   * A request reserving `reserve` units whose upstream reports `cost` (0 included), settled
   * `afterMs` later (its windows may have rolled meanwhile), as cost-reservation.ts settles it.
   */
  | { kind: 'settle'; key: number; reserve: number; cost: number; afterMs: number }
  /** An operator's change of a credit balance: add (may be negative) or set; neither: show. */
  | { kind: 'credits'; key: number; add?: number; set?: number };

const key = fc.integer({ min: 0, max: 2 });
const quota = fc
  .record({
    perMinute: fc.integer({ min: 1, max: 5 }),
    // Days spent within a few requests, and days of many minutes' worth.
    extraPerDay: fc.oneof(fc.integer({ min: 0, max: 6 }), fc.integer({ min: 7, max: 60 })),
    shadow: fc.boolean(),
    // Prepaid credits: balances spent within a few requests (steps of kind 'credits' top them up).
    credits: fc.boolean(),
    // gcra with a burst up to perMinute (clamped, as a per-key quota below the plan's burst is).
    gcraBurst: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined }),
    // A month window a few days' worth (spent across days), and the calendar its day and month
    // follow: zones with daylight saving (Berlin; Santiago, whose spring midnight does not exist;
    // Lord Howe, half an hour) and billing anchors up to the 31st.
    extraPerMonth: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }),
    timeZone: fc.constantFrom('UTC', 'Europe/Berlin', 'America/Santiago', 'Australia/Lord_Howe'),
    anchorDay: fc.option(fc.constantFrom(1, 15, 28, 29, 30, 31), { nil: undefined }),
  })
  .map(({ perMinute, extraPerDay, shadow, credits, gcraBurst, extraPerMonth, timeZone, anchorDay }): Quota => ({
    perMinute,
    perDay: perMinute + extraPerDay,
    ...(shadow && { shadow }),
    ...(credits && { credits: 'required' as const }),
    ...(gcraBurst !== undefined && { algorithm: 'gcra' as const, burst: gcraBurst }),
    ...(extraPerMonth !== undefined && { perMonth: perMinute + extraPerDay + extraPerMonth }),
    ...((timeZone !== 'UTC' || anchorDay !== undefined) && { calendar: { timeZone, ...(anchorDay !== undefined && { anchorDay }) } }),
  }));
const ban = fc.record({
  afterRejections: fc.integer({ min: 1, max: 5 }),
  window: fc.integer({ min: 1, max: 120 }),
  duration: fc.integer({ min: 1, max: 180 }),
});

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 9, arbitrary: key.map((k) => ({ kind: 'request' as const, key: k })) },
  // routes.costs: requests of several units, some larger than a whole window.
  {
    weight: 3,
    arbitrary: fc.record({ key, cost: fc.integer({ min: 1, max: 7 }) }).map((r) => ({ kind: 'request' as const, ...r })),
  },
  // Requests sent together, over one or several keys, in one event-loop turn.
  {
    weight: 3,
    arbitrary: fc
      .array(fc.record({ key, cost: fc.integer({ min: 1, max: 3 }) }), { minLength: 2, maxLength: 12 })
      .map((requests) => ({ kind: 'burst' as const, requests })),
  },
  // A key using its quota over many minutes, up to 100 minutes: the day is spent by
  // minutes, and with the day edge steps below the drip crosses 00:00 UTC.
  {
    weight: 3,
    arbitrary: fc
      .record({
        key,
        count: fc.integer({ min: 2, max: 40 }),
        everyMs: fc.oneof(fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 20_000, max: 150_000 })),
      })
      .map((drip) => ({ kind: 'drip' as const, ...drip })),
  },
  { weight: 2, arbitrary: key.map((k) => ({ kind: 'usage' as const, key: k })) },
  {
    weight: 2,
    arbitrary: fc
      .record({
        key,
        reserve: fc.integer({ min: 1, max: 3 }),
        cost: fc.integer({ min: 0, max: 6 }),
        afterMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 90_000 })),
      })
      .map((settle) => ({ kind: 'settle' as const, ...settle })),
  },
  { weight: 1, arbitrary: key.map((k) => ({ kind: 'unban' as const, key: k })) },
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 20_000 }).map((ms) => ({ kind: 'advance' as const, ms })) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 2 * 86_400_000 }).map((ms) => ({ kind: 'advance' as const, ms })) },
  {
    weight: 2,
    arbitrary: fc
      .record({ window: fc.constantFrom('minute' as const, 'day' as const, 'month' as const), offsetMs: fc.integer({ min: -2, max: 2 }) })
      .map((edge) => ({ kind: 'toEdge' as const, ...edge })),
  },
  // Up to half an hour before midnight: a drip from there spends the day's end and the next day's start.
  {
    weight: 1,
    arbitrary: fc.integer({ min: -1_800_000, max: -1 }).map((offsetMs) => ({ kind: 'toEdge' as const, window: 'day' as const, offsetMs })),
  },
  { weight: 1, arbitrary: fc.record({ quota, ban }).map((plans) => ({ kind: 'reloadPlans' as const, ...plans })) },
  {
    weight: 2,
    arbitrary: fc
      .oneof(
        fc.record({ key, add: fc.integer({ min: -8, max: 12 }) }),
        fc.record({ key, set: fc.integer({ min: 0, max: 12 }) }),
        fc.record({ key }),
      )
      .map((change) => ({ kind: 'credits' as const, ...change })),
  },
  {
    weight: 1,
    arbitrary: fc.record({ key, quota: fc.option(quota, { nil: null }) }).map((o) => ({ kind: 'setQuota' as const, ...o })),
  },
);

export const quotaHistory = fc.record({
  // Any millisecond of 2026-2030: edges land anywhere relative to the start.
  startMs: fc.integer({ min: Date.UTC(2026, 0, 1), max: Date.UTC(2030, 0, 1) }),
  steps: fc.array(step, { minLength: 1, maxLength: 80, size: 'max' }),
});

export interface Regression {
  name: string;
  startMs: number;
  steps: Step[];
}

const JAN_1 = Date.UTC(2026, 0, 1);
const tiny = (window: number): Step => ({
  kind: 'reloadPlans',
  quota: { perMinute: 1, perDay: 1 },
  ban: { afterRejections: 2, window, duration: 1 },
});

/**
 * Shrunk counterexamples of divergences between the stores as they were before the rules were
 * shared (memory store and script of commit e65dbf2), each replayed as found.
 */
export const REGRESSIONS: Regression[] = [
  {
    // The day ledger once missed the windows a refusal that began a ban wrote (here the UTC day's,
    // between two Berlin days): the stores agreed, the ledger expected the older count.
    name: 'a ban begun under another calendar, then its own again',
    startMs: Date.UTC(2026, 0, 1),
    steps: [
      {
        kind: 'reloadPlans',
        quota: { perMinute: 1, perDay: 1, calendar: { timeZone: 'Europe/Berlin' } },
        ban: { afterRejections: 1, window: 1, duration: 1 },
      },
      { kind: 'request', key: 0 },
      { kind: 'reloadPlans', quota: { perMinute: 1, perDay: 1 }, ban: { afterRejections: 1, window: 1, duration: 1 } },
      { kind: 'request', key: 0 },
      {
        kind: 'reloadPlans',
        quota: { perMinute: 1, perDay: 8, calendar: { timeZone: 'Europe/Berlin' } },
        ban: { afterRejections: 1, window: 1, duration: 1 },
      },
      { kind: 'drip', key: 0, count: 2, everyMs: 20_000 },
    ],
  },
  {
    // The ledger once took a refusal in a ban begun the same millisecond for the one that began it.
    name: 'a ban in force answered in the millisecond it began, under another calendar and back',
    startMs: Date.UTC(2026, 0, 1),
    steps: [
      { kind: 'burst', requests: [1, 1, 1, 1, 1].map((cost) => ({ key: 0, cost })) },
      { kind: 'request', key: 0 },
      { kind: 'setQuota', key: 0, quota: { perMinute: 1, perDay: 1, calendar: { timeZone: 'America/Santiago' } } },
      { kind: 'request', key: 0 },
      { kind: 'setQuota', key: 0, quota: null },
      { kind: 'request', key: 0, cost: 1 },
    ],
  },
  {
    name: 'credits spent, refused without a window or a ban, topped up, set, and kept past the day',
    startMs: Date.UTC(2026, 0, 1, 12),
    steps: [
      {
        kind: 'reloadPlans',
        quota: { perMinute: 5, perDay: 20, credits: 'required' },
        ban: { afterRejections: 1, window: 60, duration: 60 },
      },
      { kind: 'credits', key: 0, add: 3 },
      {
        kind: 'burst',
        requests: [
          { key: 0, cost: 2 },
          { key: 0, cost: 2 },
          { key: 0, cost: 1 },
        ],
      },
      { kind: 'request', key: 0 },
      { kind: 'credits', key: 0, add: -5 },
      { kind: 'credits', key: 0, set: 4 },
      { kind: 'toEdge', window: 'day', offsetMs: 1 },
      { kind: 'advance', ms: 2 * 86_400_000 },
      { kind: 'usage', key: 0 },
      { kind: 'request', key: 0, cost: 4 },
      { kind: 'request', key: 0 },
      { kind: 'credits', key: 0 },
    ],
  },
  {
    // fast-check seed 2: memory kept the refusal counted before an unban of a key that was not
    // banned (and banned on the next refusal); the script deleted it.
    name: 'an unban of a key that is not banned (seed 2)',
    startMs: JAN_1,
    steps: [tiny(1), { kind: 'request', key: 0 }, { kind: 'request', key: 0 }, { kind: 'unban', key: 0 }, { kind: 'request', key: 0 }],
  },
  {
    // fast-check seed 6: a refusal one ms before midnight with a 61 s ban window; memory's
    // once-a-minute sweep dropped the key's state after midnight with the refusal still inside its
    // window, Redis kept it until the window ended, and banned on the next refusal.
    name: 'a refusal counted across midnight and the memory sweep (seed 6)',
    startMs: JAN_1,
    steps: [
      { kind: 'toEdge', window: 'day', offsetMs: -1 },
      tiny(61),
      { kind: 'request', key: 1 },
      { kind: 'request', key: 1 },
      { kind: 'advance', ms: 1 },
      { kind: 'toEdge', window: 'minute', offsetMs: 0 },
      { kind: 'request', key: 1 },
      { kind: 'request', key: 1 },
    ],
  },
  {
    // fast-check seed 9: Redis set the key's expiry from the ban window in force when it wrote;
    // after a reload lengthened the window, Redis had forgotten a refusal that memory still
    // counted towards a ban.
    name: 'a longer ban window after a plans reload, at midnight (seed 9)',
    startMs: JAN_1,
    steps: [
      tiny(1),
      { kind: 'toEdge', window: 'day', offsetMs: -1 },
      { kind: 'request', key: 2 },
      { kind: 'request', key: 2 },
      { kind: 'advance', ms: 1000 },
      tiny(2),
      { kind: 'request', key: 2 },
      { kind: 'request', key: 2 },
    ],
  },
  {
    // fast-check seed 1: Redis expired the key at midnight (its expiry: the day's end, the ban
    // window then being 1 s), memory's sweep had not run yet: after a reload to a 60 s window
    // memory banned on the next refusal, Redis did not.
    name: 'expiry at midnight before the memory sweep (seed 1)',
    startMs: Date.UTC(2026, 9, 7, 23, 59, 0, 1),
    steps: [
      tiny(1),
      { kind: 'request', key: 2 },
      { kind: 'request', key: 2 },
      tiny(60),
      { kind: 'toEdge', window: 'minute', offsetMs: 0 },
      { kind: 'request', key: 2 },
      { kind: 'request', key: 2 },
    ],
  },
  {
    // Found in the shared-rules script while writing it: its Redis TTL ended at the state's
    // expiry on Redis's clock, so with an injected clock a state written 1 ms before midnight was
    // gone (real time had moved on) when read again at the same injected instant.
    name: 'a second request in the last millisecond of the day',
    startMs: Date.UTC(2027, 1, 7, 12),
    steps: [
      { kind: 'request', key: 0 },
      { kind: 'toEdge', window: 'day', offsetMs: -1 },
      { kind: 'request', key: 0 },
      { kind: 'request', key: 0 },
    ],
  },
  {
    // Found by the property once gcra was in it: a gcra state expired at midnight read as empty,
    // but the fixed plan reloaded after it wrote no TATs, so Redis's stale ones came back to life
    // (passed TATs now read as zero in both stores).
    name: 'TATs of an expired gcra state after a reload to fixed windows',
    startMs: JAN_1,
    steps: [
      {
        kind: 'reloadPlans',
        quota: { perMinute: 1, perDay: 1, algorithm: 'gcra', burst: 1 },
        ban: { afterRejections: 1, window: 1, duration: 1 },
      },
      { kind: 'request', key: 0 },
      { kind: 'reloadPlans', quota: { perMinute: 1, perDay: 1 }, ban: { afterRejections: 1, window: 1, duration: 1 } },
      { kind: 'toEdge', window: 'day', offsetMs: 0 },
      { kind: 'request', key: 0 },
      { kind: 'request', key: 0 },
    ],
  },
  {
    // Issue 21: the day of a gcra plan was a cell rate too (burst perMinute, the rest spread over
    // 24 h), so after its first minute's worth a key got one request every few hours, its day
    // far from spent; both stores agreed. The day is now the UTC-day budget; replay checks it.
    name: 'a gcra day spent by minutes across midnight (issue 21)',
    startMs: Date.UTC(2026, 10, 22, 23, 50),
    steps: [
      {
        kind: 'reloadPlans',
        quota: { perMinute: 2, perDay: 12, algorithm: 'gcra', burst: 1 },
        ban: { afterRejections: 100, window: 60, duration: 60 },
      },
      { kind: 'drip', key: 0, count: 40, everyMs: 30_000 },
    ],
  },
];

/** Month windows on both stores, across the edges that matter: not found divergences, but the cases to keep. */
REGRESSIONS.push(
  {
    name: 'a month spent over days, across the Berlin month edge (daylight-saving spring)',
    startMs: Date.UTC(2026, 2, 28, 12),
    steps: [
      {
        kind: 'reloadPlans',
        quota: { perMinute: 2, perDay: 3, perMonth: 4, calendar: { timeZone: 'Europe/Berlin' } },
        ban: { afterRejections: 100, window: 60, duration: 60 },
      },
      { kind: 'drip', key: 0, count: 4, everyMs: 61_000 },
      { kind: 'toEdge', window: 'day', offsetMs: 0 },
      { kind: 'drip', key: 0, count: 3, everyMs: 61_000 },
      { kind: 'usage', key: 0 },
      { kind: 'toEdge', window: 'month', offsetMs: -1 },
      { kind: 'request', key: 0 },
      { kind: 'advance', ms: 1 },
      { kind: 'request', key: 0 },
    ],
  },
  {
    name: 'an anchor of the 31st through February',
    startMs: Date.UTC(2026, 1, 27, 23, 59),
    steps: [
      {
        kind: 'reloadPlans',
        quota: { perMinute: 5, perDay: 5, perMonth: 6, calendar: { timeZone: 'UTC', anchorDay: 31 }, algorithm: 'gcra', burst: 5 },
        ban: { afterRejections: 100, window: 60, duration: 60 },
      },
      { kind: 'drip', key: 1, count: 8, everyMs: 20_000 },
      { kind: 'toEdge', window: 'month', offsetMs: 0 },
      { kind: 'drip', key: 1, count: 3, everyMs: 0 },
    ],
  },
);

REGRESSIONS.push({
  name: 'a Berlin day of 25 hours (daylight saving ends) spent across its extra hour',
  // 2026-10-25 00:30 in Berlin (CEST); the day ends 25 hours after its midnight, at 23:00Z.
  startMs: Date.UTC(2026, 9, 24, 22, 30),
  steps: [
    {
      kind: 'reloadPlans',
      quota: { perMinute: 2, perDay: 4, perMonth: 40, calendar: { timeZone: 'Europe/Berlin' } },
      ban: { afterRejections: 100, window: 60, duration: 60 },
    },
    { kind: 'drip', key: 2, count: 3, everyMs: 12 * 3_600_000 },
    { kind: 'toEdge', window: 'day', offsetMs: -1 },
    { kind: 'request', key: 2, cost: 2 },
    { kind: 'usage', key: 2 },
    { kind: 'advance', ms: 1 },
    { kind: 'request', key: 2, cost: 2 },
  ],
});
