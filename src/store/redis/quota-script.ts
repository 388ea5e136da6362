import { DAY_MS, MINUTE_MS } from '../../quota/windows.js';
import { QUOTA_NOTICE_CHANNEL } from './redis-keys.js';

// The rules of src/quota/quota-state.ts (`current`, `decide`, `peek`, `lift`, `expiresAtMs`),
// line for line, as Lua: one round trip, atomic across replicas. The window lengths come from
// windows.ts, interpolated below, so there is one definition of them. All state of one API key is
// one hash under the key's `{id}` hash tag (Cluster-safe).
//
// Time comes from Redis (TIME; effects replication, Redis >= 5), so replicas with skewed clocks
// still agree on window edges. The ARGV `nowMs` is empty in production; tests pass their
// injected clock there to run the script and the memory store on the same time
// (test/integration/quota-stores-differential.test.ts).

export const CLOCK = `
local MINUTE_MS, DAY_MS = ${MINUTE_MS}, ${DAY_MS}
local function clock(nowArg)
  if nowArg ~= nil and nowArg ~= '' then return tonumber(nowArg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- current(): the stored state as of now; counters of ended windows read as zero. A state past
-- its expiry ('ex', from expiresAtMs) reads as empty, as in the memory store: key expiry in Redis
-- is only garbage collection, so an injected clock gives the same answers. (Hashes written
-- before 'ex' existed have none: Redis's own expiry still covers them. A 'dt', the day's TAT of a
-- gcra plan before its day became the UTC-day budget, is no longer read: expiry collects it.)
local function current(now)
  local h = redis.call('HMGET', KEYS[1], 'ms', 'mc', 'ds', 'dc', 'rs', 'rc', 'bu', 'ex', 'mt', 'le', 'sq')
  local s = { ms = 0, mc = 0, ds = 0, dc = 0, rs = 0, rc = 0, bu = 0, mt = 0 }
  local ex = tonumber(h[8])
  if ex == nil or ex > now then
    s = { ms = tonumber(h[1]) or 0, mc = tonumber(h[2]) or 0, ds = tonumber(h[3]) or 0, dc = tonumber(h[4]) or 0,
          rs = tonumber(h[5]) or 0, rc = tonumber(h[6]) or 0, bu = tonumber(h[7]) or 0,
          mt = tonumber(h[9]) or 0 }
  end
  local minuteStart, dayStart = now - (now % MINUTE_MS), now - (now % DAY_MS)
  if s.ms ~= minuteStart then s.ms = minuteStart; s.mc = 0 end
  if s.ds ~= dayStart then s.ds = dayStart; s.dc = 0 end
  if s.mt <= now * 1000 then s.mt = 0 end
  -- Lease notices (below): kept whatever the state's expiry, so their numbers never go back.
  s.le, s.sq = tonumber(h[10]) or 0, tonumber(h[11]) or 0
  return s
end
local function reply(verdict, s, now, cost)
  local bannedUntil = 0
  if verdict == 2 then bannedUntil = s.bu end
  return { verdict, s.mc, s.dc, s.rc, now, bannedUntil, cost, s.mt }
end
-- gcra.ts admitUs(): the TAT after admitting cost units, or nil when they do not fit.
local function admit(tat, nowUs, cost, intervalUs, burst)
  local nextTat = math.max(tat, nowUs) + cost * intervalUs
  if nextTat - nowUs <= burst * intervalUs then return nextTat end
  return nil
end
-- Lease notices (quota-leases.ts, rule 10): while a lease of this key may still admit ('le', on
-- Redis's clock), every change of its counts, and a ban, is published with the next sequence
-- number ('sq'), so the replicas holding leases see what the others take within a message's time.
-- pcall: the step's writes are made and stay (a script is not rolled back), so a PUBLISH refused
-- (a Redis user whose ACL lacks this channel) must not turn its answer into an error; its leases
-- then hear nothing, as without notices (docs/quota-leases.md).
local function notify(seq, s, now)
  redis.pcall('PUBLISH', '${QUOTA_NOTICE_CHANNEL}', table.concat({ KEYS[1], string.format('%.0f', seq), s.ms, s.mc,
    s.ds, s.dc, string.format('%.0f', s.mt), string.format('%.0f', s.bu), now }, ' '))
end
-- The next sequence number: one more than the last, and never below Redis's clock × 1000. A
-- state lost in Redis (FLUSHDB, eviction, DEL: no reconnection, so no subscription gap) starts
-- 'sq' again, and a lease holding an older, higher number would ignore every notice until the
-- new ones caught up; the clock keeps the new numbers above the old. (Numbers run ahead of the
-- clock only while a key changes more than 1000 times a millisecond, far beyond one Redis.)
local function nextSeq(s, now)
  return math.max(s.sq + 1, now * 1000)
end
`;

// KEYS[1]  tg:quota:{id}
// ARGV     perMinute, perDay, banAfterRejections, banWindowMs, banDurationMs, shadow (1 or 0),
//          gcra (1 or 0), minute intervalUs, minute burst (gcra.ts gcraMinute(), computed once in
//          TS), nowMs ('' = Redis TIME), then the cost of each request to decide, one or more, in
//          the order they arrived
// Reply    per request, 8 numbers in a row: { verdict (0 allowed, 1 limited, 2 banned), minuteCount, dayCount,
//            rejections, nowMs, bannedUntilMs, cost, minuteTatUs }
// Several requests of one key in one call (redis-quota-store.ts merges those of one event-loop
// turn) are decided one after another on the state each left, at one `now`: exactly as the same
// requests sent one at a time within that millisecond.
// Numbers that may grow large (TATs in microseconds, expiries) are written with %.0f,
// exact for every integer a double holds: Redis passes a Lua number on in its shortest form, which
// for large round values is exponent notation ('8.64e+17'), which PEXPIRE refuses.
export const QUOTA_ARGS_BEFORE_COSTS = 10;
export const QUOTA_REPLY_LENGTH = 8;
export const QUOTA_SCRIPT = `${CLOCK}
local now = clock(ARGV[${QUOTA_ARGS_BEFORE_COSTS}])
local perMinute, perDay = tonumber(ARGV[1]), tonumber(ARGV[2])
local banAfter, banWindowMs, banDurationMs = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local shadow, gcra = ARGV[6] == '1', ARGV[7] == '1'
local s = current(now)
local changed, admitted = false, false

-- decide(): one request of cost units on s, which it updates; the verdict.
local function decide(cost)
  if s.bu > now then return 2 end
  changed = true
  local dayFits = s.dc + cost <= perDay
  local minuteFits
  local minuteTat = nil
  if gcra then
    minuteTat = admit(s.mt, now * 1000, cost, tonumber(ARGV[8]), tonumber(ARGV[9]))
    minuteFits = minuteTat ~= nil
  else
    minuteFits = s.mc + cost <= perMinute
  end
  if minuteFits and dayFits then
    s.mc = s.mc + cost
    s.dc = s.dc + cost
    if minuteTat ~= nil then s.mt = minuteTat end
    admitted = true
    return 0
  end
  -- a shadow refusal is admitted by the gateway, so it counts towards no ban
  if shadow then return 1 end
  if now - s.rs >= banWindowMs then s.rs = now; s.rc = 0 end
  s.rc = s.rc + 1
  if s.rc >= banAfter then
    s.bu = now + banDurationMs
    s.rc = 0
    s.rs = 0
    return 2
  end
  return 1
end

local replies = {}
for i = ${QUOTA_ARGS_BEFORE_COSTS + 1}, #ARGV do
  local cost = tonumber(ARGV[i])
  local r = reply(decide(cost), s, now, cost)
  for j = 1, #r do replies[#replies + 1] = r[j] end
end
-- A request refused for a ban in force changes nothing: nothing is written when every one was.
if not changed then return replies end

-- expiresAtMs(): the moment the whole state reads as empty ('ex', checked by current()). Redis's
-- own expiry only collects the garbage, a minute later, so that it never forgets state before
-- 'ex' does, on Redis's clock or an injected one.
local rejectionsEnd = 0
if s.rc > 0 then rejectionsEnd = s.rs + banWindowMs end
local ex = math.max(s.ds + DAY_MS, rejectionsEnd, s.bu, math.ceil(s.mt / 1000))
local exArg = string.format('%.0f', ex)
if gcra then
  redis.call('HSET', KEYS[1], 'ms', s.ms, 'mc', s.mc, 'ds', s.ds, 'dc', s.dc, 'rs', s.rs, 'rc', s.rc, 'bu', s.bu, 'ex', exArg,
    'mt', string.format('%.0f', s.mt))
else
  redis.call('HSET', KEYS[1], 'ms', s.ms, 'mc', s.mc, 'ds', s.ds, 'dc', s.dc, 'rs', s.rs, 'rc', s.rc, 'bu', s.bu, 'ex', exArg)
end
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', ex - now + MINUTE_MS))
-- Counts that moved, or a ban that began, while a lease may be out: its holders hear of it.
if s.le > now and (admitted or s.bu > now) then
  local seq = nextSeq(s, now)
  redis.call('HSET', KEYS[1], 'sq', string.format('%.0f', seq))
  notify(seq, s, now)
end
return replies
`;

// peek(): use without consuming. ARGV nowMs as above. Reply as above, verdict 0 or 2.
export const USAGE_SCRIPT = `${CLOCK}
local now = clock(ARGV[1])
local s = current(now)
if s.bu > now then return reply(2, s, now, 1) end
return reply(0, s, now, 1)
`;

// lift(): ends a ban and forgets counted rejections. ARGV nowMs as above. Reply 1 if a ban was in force.
export const UNBAN_SCRIPT = `${CLOCK}
local now = clock(ARGV[1])
local s = current(now)
redis.call('HDEL', KEYS[1], 'bu', 'rs', 'rc')
if s.bu > now then return 1 end
return 0
`;

// Quota leases (src/quota/quota-leases.ts: the rule). One atomic step that first gives back what
// an ended lease did not use, then reserves a new block, from the minute and the day together.
// KEYS[1]  tg:quota:{id}
// ARGV     perMinute, perDay, banWindowMs, nowMs ('' = Redis TIME), want (units; 0 = only give
//          back), divisor (a block is at most the units left / divisor), minBlock (smaller blocks
//          are not worth a lease: none is granted), returnUnits, returnMinuteStartMs, returnDayStartMs,
//          gcra (1 or 0), minute intervalUs, minute burst, leaseMs (gcra: the lease's longest life),
//          returnTatUs (gcra: the TAT the returned block left behind when it was granted)
// Reply    { granted, minuteStartMs, dayStartMs, nowMs, minuteCount, dayCount, minuteTatUs, seq } (after
//          the step; seq: the notice sequence number of this state, rule 10)
// Given-back units are credited only to the windows they were taken from: a window that has since
// rolled over is not credited (its counters are the new window's). No block while banned, and
// none once the units left are fewer than divisor × minBlock: from then on every request is
// decided by QUOTA_SCRIPT alone, so the limit's edge, Retry-After and bans are exact as ever.
// gcra: a block's cells are charged as if they arrived at now + leaseMs (the latest moment the
// lease may use them) and granted only if the last of them would conform at now (the earliest);
// a returned block takes its unused cells off the TAT only while the TAT is still the one it left
// (nothing charged after it). quota-leases.ts has the reasoning.
export const LEASE_SCRIPT = `${CLOCK}
local now = clock(ARGV[4])
local perMinute, perDay, banWindowMs = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local want, divisor, minBlock = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local back, backMinute, backDay = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local gcra, intervalUs, burst = ARGV[11] == '1', tonumber(ARGV[12]), tonumber(ARGV[13])
local leaseUs, backTat = tonumber(ARGV[14]) * 1000, tonumber(ARGV[15])
local s = current(now)
-- Units out on leases in this minute and this day ('lm', 'ld', each with the window start it
-- belongs to): a give-back credits a window with no more than these, so never with units its
-- counters do not hold (a Redis restarted empty, a give-back run twice).
local raw = redis.call('HMGET', KEYS[1], 'lms', 'lds', 'lm', 'ld')
local lm, ld = 0, 0
if tonumber(raw[1]) == s.ms then lm = tonumber(raw[3]) or 0 end
if tonumber(raw[2]) == s.ds then ld = tonumber(raw[4]) or 0 end
local changed = false
if back > 0 then
  if s.ms == backMinute and s.mc > 0 then
    local credit = math.min(back, lm)
    s.mc = math.max(0, s.mc - credit); lm = lm - credit; changed = true
  end
  if s.ds == backDay and s.dc > 0 then
    local credit = math.min(back, ld)
    s.dc = math.max(0, s.dc - credit); ld = ld - credit; changed = true
  end
  if gcra and backTat > 0 and s.mt == backTat then s.mt = backTat - back * intervalUs; changed = true end
end
local granted = 0
if want > 0 and s.bu <= now then
  local left = perDay - s.dc
  local from = 0
  if gcra then
    local nowUs = now * 1000
    from = math.max(s.mt, nowUs + leaseUs)
    left = math.min(left, math.floor((nowUs + burst * intervalUs - from) / intervalUs))
  else
    left = math.min(left, perMinute - s.mc)
  end
  granted = math.min(want, math.floor(left / divisor))
  if granted < minBlock then
    granted = 0
  else
    s.mc = s.mc + granted
    s.dc = s.dc + granted
    lm = lm + granted
    ld = ld + granted
    if gcra then s.mt = from + granted * intervalUs end
    changed = true
  end
end
local leasedUntil, seq = s.le, s.sq
if changed then
  local rejectionsEnd = 0
  if s.rc > 0 then rejectionsEnd = s.rs + banWindowMs end
  local ex = math.max(s.ds + DAY_MS, rejectionsEnd, s.bu, math.ceil(s.mt / 1000))
  -- A block admits no later than leaseMs after this moment (quota-leases.ts, rules 4 and 8).
  if granted > 0 then leasedUntil = math.max(leasedUntil, now + leaseUs / 1000) end
  -- Published only while a lease may be out: a give-back after the last one lapsed (a replica's
  -- sweep finds its lease ended up to half a leaseMs, at most 500 ms, late) tells no one anything.
  local published = leasedUntil > now
  if published then seq = nextSeq(s, now) end
  -- Every field, as QUOTA_SCRIPT writes them: a hash past its 'ex' read as empty, and must not
  -- come back to life with the old refusals or ban once 'ex' moves on.
  redis.call('HSET', KEYS[1], 'ms', s.ms, 'mc', s.mc, 'ds', s.ds, 'dc', s.dc, 'rs', s.rs, 'rc', s.rc, 'bu', s.bu,
    'ex', string.format('%.0f', ex), 'mt', string.format('%.0f', s.mt), 'lms', s.ms, 'lm', lm, 'lds', s.ds, 'ld', ld,
    'le', string.format('%.0f', leasedUntil), 'sq', string.format('%.0f', seq))
  redis.call('PEXPIRE', KEYS[1], string.format('%.0f', ex - now + MINUTE_MS))
  if published then notify(seq, s, now) end
end
return { granted, s.ms, s.ds, now, s.mc, s.dc, s.mt, seq }
`;
