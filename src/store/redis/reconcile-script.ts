import { CLOCK } from './quota-script.js';

// Adds one replica's batch of admissions made without Redis (gateway/degraded-ledger.ts) to the
// subject's quota hash, once. The marker (SET NX, kept two days: longer than any window a batch
// can add to) makes a retried batch, or one whose first try was cut by a second outage after
// Redis ran it, a no-op. Units go only to the windows that are still current on Redis's clock
// (current() moves a rolled window on, so a batch's window start no longer matches it); a ban
// earned meanwhile is applied if it is still running and ends later than Redis's.
// Credits spent (an unreplicated decision or lease grant re-added after a failover: gateway/
// unreplicated-writes.ts) are taken from the balance 'cb' whatever the windows did meanwhile (the
// balance is money, not a window), never below zero; those a lease's block holds also go to 'lc',
// so the block's give-back can return its unused ones (LEASE_SCRIPT). Likewise the units a lease's
// block holds (an unreplicated grant re-added) go to the units out on leases of each window still
// current ('lm', 'ld', 'ly'), which bound what a give-back may credit: without them, the block's
// unused units stayed counted on a master that lacked its grant. A gcra plan's re-added writes
// also charge their cells to the TAT, on top of it from the last one's admission (where GCRA would
// have put them at the latest: the TAT after cells admitted at or before t is at most
// max(TAT, t) + their cells), never past now + τ: the master lost them from its TAT line, and
// without them it admitted them again. A batch re-added once their slots have passed charges nothing.
// Redis restarted empty before the flush: the batch lands on an empty state, as the first
// admissions of the day.
//
// KEYS[1]  tg:quota:{id}
// KEYS[2]  tg:reconciled:{id}:<replica>:<seq>
// ARGV     minuteStartMs, minuteUnits, dayStartMs, dayUnits, bannedUntilMs, markerTtlMs,
//          nowMs ('' = Redis TIME), monthStartMs, monthUnits, the day's four edges and the month's
//          (calendar.ts, of the batch's calendar: the day and month the quota script counts in),
//          usage retentionMs (0: keep no usage), credits (spent: taken from 'cb'), leasedCredits (of
//          those, the ones leases' blocks hold: added to 'lc'), the units leases' blocks hold in
//          the minute, day and month (added to 'lm', 'ld', 'ly'), gcra: the µs of cells to charge to
//          the TAT, the plan's tolerance τ in µs (0: none) and when the last of them was admitted
//          (µs), then per hour the batch admitted or
//          refused in: its dayStartMs, periods (CLOCK's usagePeriods: day end, month start and end),
//          hourStartMs, admitted, refused, units, credits (seven each)
// Reply    1 applied now, 0 applied before
export const RECONCILE_SCRIPT = `${CLOCK}
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[6]) then return 0 end
local now = clock(ARGV[7])
local s = current(now, 10)
local changed = false
local minuteUnits, dayUnits, bannedUntil = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local monthUnits = tonumber(ARGV[9])
local credits, leasedCredits = tonumber(ARGV[19]), tonumber(ARGV[20])
-- Usage (CLOCK's usageAdd): every hour of the batch, whether or not its windows have rolled since,
-- under the same marker as the windows, so once.
for i = 27, #ARGV, 7 do
  usageAdd(tonumber(ARGV[18]), tonumber(ARGV[i]), ARGV[i + 1], tonumber(ARGV[i + 2]),
    tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6]))
end
if credits > 0 then
  s.cb = math.max(0, s.cb - credits)
  if leasedCredits > 0 then redis.call('HINCRBY', KEYS[1], 'lc', leasedCredits) end
  changed = true
end
if tonumber(ARGV[1]) == s.ms and minuteUnits > 0 then s.mc = s.mc + minuteUnits; changed = true end
if tonumber(ARGV[3]) == s.ds and dayUnits > 0 then s.dc = s.dc + dayUnits; changed = true end
if tonumber(ARGV[8]) == s.ys and monthUnits > 0 then s.yc = s.yc + monthUnits; changed = true end
local tatUs, toleranceUs, lastUs = tonumber(ARGV[24]) or 0, tonumber(ARGV[25]) or 0, tonumber(ARGV[26]) or 0
if tatUs > 0 then
  local nowUs = now * 1000
  local top = math.min(math.max(s.mt, lastUs) + tatUs, nowUs + toleranceUs)
  if top > s.mt and top > nowUs then s.mt = top; changed = true end
end
-- Units out on leases: a window's field counts only with its start beside it (LEASE_SCRIPT).
local leased = redis.call('HMGET', KEYS[1], 'lms', 'lm', 'lds', 'ld', 'lys', 'ly')
for i, w in ipairs({ { ARGV[1], s.ms, ARGV[21] }, { ARGV[3], s.ds, ARGV[22] }, { ARGV[8], s.ys, ARGV[23] } }) do
  local units = tonumber(w[3]) or 0
  if units > 0 and tonumber(w[1]) == w[2] then
    local out = 0
    if tonumber(leased[2 * i - 1]) == w[2] then out = tonumber(leased[2 * i]) or 0 end
    local names = { { 'lms', 'lm' }, { 'lds', 'ld' }, { 'lys', 'ly' } }
    redis.call('HSET', KEYS[1], names[i][1], w[2], names[i][2], out + units)
  end
end
if bannedUntil > now and bannedUntil > s.bu then
  s.bu = bannedUntil
  s.rc = 0
  s.rs = 0
  changed = true
end
if not changed then return 1 end
-- The expiry as the quota script computes it; a live 'ex' already covers the refusals' ban window.
local oldEx = tonumber(redis.call('HGET', KEYS[1], 'ex')) or 0
if oldEx <= now then oldEx = 0 end
local monthEnd = 0
if s.yc > 0 then monthEnd = s.ye end
local ex = math.max(oldEx, s.de, monthEnd, s.bu, math.ceil(s.mt / 1000))
-- Every field, as QUOTA_SCRIPT writes them: a hash past its 'ex' reads as empty, and must not come
-- back to life with its old refusals or ban once 'ex' moves on.
redis.call('HSET', KEYS[1], 'ms', s.ms, 'mc', s.mc, 'ds', s.ds, 'dc', s.dc, 'rs', s.rs, 'rc', s.rc,
  'bu', string.format('%.0f', s.bu), 'ex', string.format('%.0f', ex), 'mt', string.format('%.0f', s.mt), 'ys', s.ys, 'yc', s.yc)
if credits > 0 then redis.call('HSET', KEYS[1], 'cb', s.cb) end
if not s.keep then redis.call('PEXPIRE', KEYS[1], string.format('%.0f', ex - now + MINUTE_MS)) end
-- Leases of this subject out on other replicas hear of the new counts, as of any other change.
if s.le > now then
  local seq = nextSeq(s, now)
  redis.call('HSET', KEYS[1], 'sq', string.format('%.0f', seq))
  notify(seq, s, now, 0)
end
return 1
`;

/** How long a batch's marker is kept: longer than the longest window a batch adds to (the day). */
export const RECONCILED_MARKER_MS = 2 * 86_400_000;
