import { DAY_MS, MINUTE_MS } from '../../quota/windows.js';
import { HOUR_MS } from '../../quota/usage-hours.js';
import { RECALL_GRACE_MS } from '../../quota/quota-leases.js';
import { TAT_MOVES_KEPT } from '../../quota/quota-state.js';
import { QUOTA_NOTICE_CHANNEL } from './redis-keys.js';

// The rules of src/quota/quota-state.ts (`current`, `decide`, `peek`, `lift`, `expiresAtMs`),
// line for line, as Lua: one round trip, atomic across replicas. The window lengths come from
// windows.ts, interpolated below, so there is one definition of them. All state of one API key is
// one hash under the key's `{id}` hash tag (Cluster-safe).
//
// Time comes from Redis (TIME; effects replication, Redis >= 5), so replicas with skewed clocks
// still agree on window edges. Lua knows no time zones: the day and month edges (the day in
// gateway.yaml quota.timeZone, the month also from a billing anchor) come from
// src/quota/calendar.ts as four consecutive starts each, around the gateway's clock, and `pick`
// chooses the period Redis's clock is in, so Redis's clock alone still decides every edge. The ARGV `nowMs` is empty in production; tests pass their
// injected clock there to run the script and the memory store on the same time
// (test/integration/quota-stores-differential.test.ts).

// A field HMGET read into h[i] as a number, 0 when missing: num() inline for a text already
// parsed in this call (the sections of one MULTI_QUOTA_SCRIPT call share most of their texts) and
// for a missing field, so that neither costs a Lua function call (a call and its return were a
// good part of the Lua VM's work per warm-key section).
const fieldNumber = (i: number) => `(h[${i}] and (parsed[h[${i}]] or num(h[${i}])) or 0)`;

export const CLOCK = `
local MINUTE_MS, DAY_MS = ${MINUTE_MS}, ${DAY_MS}
-- Whether units of a lease whose holders' latest end is 'le' may still come back (quota-leases.ts,
-- rule 11): until that end and RECALL_GRACE_MS after it. A holder's lease lapses at its end, but
-- its give-back arrives later (its sweep, its round trip, a loaded machine): a refusal in between
-- lacks units that are on their way, so it is a recall too. Past that, the holder is taken for lost.
local RECALL_GRACE_MS = ${RECALL_GRACE_MS}
local function unitsOut(le, now)
  return le > 0 and now < le + RECALL_GRACE_MS
end
-- A recall's want ('rq'): no block is granted before it, so the units coming back are there when
-- the recalled request is decided again: until 'le', or for the grace of a lapsed lease's.
local function recallWant(le, now)
  if le > now then return le end
  return now + RECALL_GRACE_MS
end
local function clock(nowArg)
  if nowArg ~= nil and nowArg ~= '' then return tonumber(nowArg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- A stored number's text as a number, each distinct text parsed once per script call. Lua's
-- tonumber() of a string runs strtod twice (lua_isnumber, then lua_tonumber), and strtod was 8 %
-- of Redis's instructions per warm-key request (callgrind); the keys of one MULTI_QUOTA_SCRIPT call
-- share most of their texts (the minute's, day's and month's starts, the day's end, '0'), so most
-- reads are a table lookup.
-- false (a field HMGET found missing) reads as nil, as tonumber(false) does.
local parsed = {}
local function num(text)
  if not text then return nil end
  local n = parsed[text]
  if n == nil then
    n = tonumber(text)
    parsed[text] = n
  end
  return n
end
-- A gcra lease block's place in the key's lease holders hash (LEASE_SCRIPT's 'b:' fields,
-- '<end µs> <grant seq>'): where it ends on the TAT line now, and its grant's seq.
local function blockAt(entry)
  local e, q = string.match(entry, '^(%S+) (%S+)$')
  return tonumber(e), tonumber(q)
end
-- The day's and the month's four edges each (calendar.ts), from ARGV[at] on, as numbers.
local function edgesAt(at)
  local e = {}
  for i = 1, 8 do e[i] = num(ARGV[at + i - 1]) end
  return e
end
-- calendar.ts pick(): the period [start, end) of the four edges from e[i] on that now is in.
local function pick(e, i, now)
  if now < e[i + 1] then return e[i], e[i + 1] end
  if now < e[i + 2] then return e[i + 1], e[i + 2] end
  return e[i + 2], e[i + 3]
end
-- current(): the stored state as of now; counters of ended windows read as zero. The day and
-- month edges are e (edgesAt's table, or the ARGV index it reads them from: day, then month);
-- without them (UNBAN_SCRIPT, which reads only the ban) the UTC day, and the month as stored. A
-- state past its expiry ('ex', from expiresAtMs) reads as empty, as in the memory store: key
-- expiry in Redis is only garbage collection, so an injected clock gives the same answers. (Hashes
-- written before 'ex' existed have none: Redis's own expiry still covers them. A 'dt', the day's
-- TAT of a gcra plan before its day became the UTC-day budget, is no longer read: expiry collects it.)
-- s.rolled: the state read as empty, or its day or month moved on: a step writes every field (QUOTA_STEP).
local function current(now, e)
  local h = redis.call('HMGET', KEYS[1], 'ms', 'mc', 'ds', 'dc', 'rs', 'rc', 'bu', 'ex', 'mt', 'le', 'sq', 'ys', 'yc', 'cb', 'mn')
  local ex = h[8] and (parsed[h[8]] or num(h[8])) or nil
  -- Each constructor names every field the state gets below and in QUOTA_STEP, so the table is
  -- made at its size once instead of growing (a rehash) as they are added.
  local s
  if ex == nil or ex > now then
    s = { ms = ${fieldNumber(1)}, mc = ${fieldNumber(2)}, ds = ${fieldNumber(3)}, dc = ${fieldNumber(4)},
          rs = ${fieldNumber(5)}, rc = ${fieldNumber(6)}, bu = ${fieldNumber(7)},
          mt = ${fieldNumber(9)}, ys = ${fieldNumber(12)}, yc = ${fieldNumber(13)}, rolled = false,
          de = 0, ye = 0, le = 0, sq = 0, cb = 0, keep = false, storedEx = false, exAt = false,
          unitsOut = false, changed = false, admitted = false, newMinute = false, mn = h[15] or 0, mnNew = false }
  else
    s = { ms = 0, mc = 0, ds = 0, dc = 0, rs = 0, rc = 0, bu = 0, mt = 0, ys = 0, yc = 0, rolled = true,
          de = 0, ye = 0, le = 0, sq = 0, cb = 0, keep = false, storedEx = false, exAt = false,
          unitsOut = false, changed = false, admitted = false, newMinute = false, mn = h[15] or 0, mnNew = false }
  end
  local minuteStart = now - (now % MINUTE_MS)
  local dayStart, monthStart
  if e ~= nil then
    if type(e) == 'number' then e = edgesAt(e) end
    dayStart, s.de = pick(e, 1, now)
    monthStart, s.ye = pick(e, 5, now)
  else
    dayStart = now - (now % DAY_MS)
    s.de, monthStart, s.ye = dayStart + DAY_MS, s.ys, 0
  end
  if s.ms ~= minuteStart then s.ms = minuteStart; s.mc = 0; s.newMinute = true end
  if s.ds ~= dayStart then s.ds = dayStart; s.dc = 0; s.rolled = true end
  if s.ys ~= monthStart then s.ys = monthStart; s.yc = 0; s.rolled = true end
  if s.mt <= now * 1000 then s.mt = 0 end
  -- Lease notices (below): kept whatever the state's expiry, so their numbers never go back.
  s.le, s.sq = ${fieldNumber(10)}, ${fieldNumber(11)}
  -- The credit balance ('cb', CREDITS_SCRIPT): never part of the expiring state. A hash that holds
  -- one is never given a TTL (CREDITS_SCRIPT made it persistent), so the balance outlives the windows.
  s.cb, s.keep = ${fieldNumber(14)}, h[14] ~= false
  -- The expiry as stored (text and number): a step that leaves it unchanged need not set the key's TTL again.
  s.storedEx, s.exAt = h[8], ex
  -- And the fields as read (HMGET's order above), for a step that must see the windows as stored.
  return s, h
end
local function reply(verdict, s, now, cost)
  local bannedUntil = 0
  if verdict == 2 then bannedUntil = s.bu end
  return { verdict, s.mc, s.dc, s.rc, now, bannedUntil, cost, s.mt, s.yc, s.cb }
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
-- After the key and the eight numbers of the minute, day and ban come the month's start and count,
-- then 'le' after the step (a request waiting on a recall is decided again once it has passed: no
-- lease may still admit), 1 for a recall (rule 11), else 0, and the credit balance ('cb': a lease
-- of a credits key tells Redis's balance plus its own unused block).
local function notify(seq, s, now, recall)
  redis.pcall('PUBLISH', '${QUOTA_NOTICE_CHANNEL}', table.concat({ KEYS[1], string.format('%.0f', seq), s.ms, s.mc,
    s.ds, s.dc, string.format('%.0f', s.mt), string.format('%.0f', s.bu), now, s.ys, s.yc,
    string.format('%.0f', s.le), recall, s.cb }, ' '))
end
-- The next sequence number: one more than the last, and never below Redis's clock × 1000. A
-- state lost in Redis (FLUSHDB, eviction, DEL: no reconnection, so no subscription gap) starts
-- 'sq' again, and a lease holding an older, higher number would ignore every notice until the
-- new ones caught up; the clock keeps the new numbers above the old. (Numbers run ahead of the
-- clock only while a key changes more than 1000 times a millisecond, far beyond one Redis.)
local function nextSeq(s, now)
  return math.max(s.sq + 1, now * 1000)
end
-- The fields every step writes (both scripts, so a hash past its 'ex', read as empty, never comes
-- back to life with old refusals or a ban), with its 'ex'; the caller appends its own fields.
local function stateFields(s, ex)
  return { 'ms', s.ms, 'mc', s.mc, 'ds', s.ds, 'dc', s.dc, 'rs', s.rs, 'rc', s.rc, 'bu', s.bu,
    'ex', string.format('%.0f', ex), 'mt', string.format('%.0f', s.mt), 'ys', s.ys, 'yc', s.yc }
end
-- expiresAtMs(): the moment the whole state reads as empty ('ex', checked by current()). Redis's
-- own expiry only collects the garbage, a minute later, so that it never forgets state before
-- 'ex' does, on Redis's clock or an injected one. The TTL is set only when 'ex' moved: for a
-- warm key 'ex' is the day's end, so most steps need no PEXPIRE.
-- The month keeps the state only once it has counted.
local function expiry(s, banWindowMs)
  local rejectionsEnd, monthEnd = 0, 0
  if s.rc > 0 then rejectionsEnd = s.rs + banWindowMs end
  if s.yc > 0 then monthEnd = s.ye end
  return math.max(s.de, monthEnd, rejectionsEnd, s.bu, math.ceil(s.mt / 1000))
end
local function write(s, now, ex, fields)
  redis.call('HSET', KEYS[1], unpack(fields))
  local exArg = string.format('%.0f', ex)
  if exArg ~= s.storedEx and not s.keep then redis.call('PEXPIRE', KEYS[1], string.format('%.0f', ex - now + MINUTE_MS)) end
end
-- Usage for invoicing (src/store/usage-store.ts reads it): one hash per subject and day of its
-- calendar, 'tg:usage:{id}:<dayStartMs>' (KEYS[1]'s hash tag: the same slot, written in the same
-- atomic step as the windows), fields '<hourStartMs>:a|r|u|c|n' (requests admitted, refused, units
-- charged, credits spent; 'n': requests admitted at one unit each, so both admitted and units:
-- QUOTA_STEP counts its admissions there, one HINCRBY, and only units beyond one each in 'u';
-- readers add 'n' to 'a' and to 'u', redis-usage-reader.ts) and 'p', '<dayEndMs> <monthStartMs>
-- <monthEndMs>': the day's end and the month window it is in (usagePeriods). Hours count from the
-- day's start, so they sum to the zone's days and months. The hash lives retentionMs (0: no usage
-- is kept) plus a day from its first write: relative, so an injected clock keeps it too.
-- The day's and the hour's texts are kept while they stay the same (the sections of one
-- MULTI_QUOTA_SCRIPT call share them).
local usageDayAt, usageDayText, usageHourAt, usageHourText, usageSingleField
local function usageKey(dayStart)
  if dayStart ~= usageDayAt then usageDayAt, usageDayText = dayStart, string.format('%.0f', dayStart) end
  return 'tg:usage:' .. string.sub(KEYS[1], 10) .. ':' .. usageDayText
end
local function usageHour(dayStart, at)
  local hour = dayStart + math.floor((at - dayStart) / ${HOUR_MS}) * ${HOUR_MS}
  if hour ~= usageHourAt then
    usageHourAt, usageHourText = hour, string.format('%.0f', hour)
    usageSingleField = usageHourText .. ':n'
  end
  return usageHourText
end
-- The 'p' of the day current() read (s.ds).
local function usagePeriods(s)
  return string.format('%.0f %.0f %.0f', s.de, s.ys, s.ye)
end
-- HINCRBY of one count; true when it made the field (its result is the increment: nothing was there).
-- A count of 1 (a warm key's one request of a call) goes as the text '1': Redis turns a number
-- argument into text with snprintf, a good part of a small command's cost.
local function usageCount(key, field, by)
  if by == 0 then return false end
  local arg = by
  if by == 1 then arg = '1' end
  return redis.call('HINCRBY', key, field, arg) == by
end
-- Adds to the hour of 'at' in the day beginning at dayStart ('p': periods, usagePeriods' text or
-- the state to make it from; single: requests admitted at one unit each, the 'n' field).
-- 'p' and the hash's expiry are set when a count makes its field (the first of its hour, or the
-- first after the hash was deleted or evicted while the windows' hash lives), not on every step:
-- one HINCRBY is a warm key's usage. (A field that had come back to 0 only sets 'p' again: HSETNX.)
local function usageAdd(retentionMs, dayStart, periods, at, admitted, refused, units, credits, single)
  if retentionMs <= 0 or dayStart <= 0 then return end
  local key, hour = usageKey(dayStart), usageHour(dayStart, at)
  -- (A count of 0 adds nothing: its field's name is not even made, most of a warm key's usage step.)
  local made = usageCount(key, usageSingleField, single or 0)
  if admitted ~= 0 then made = usageCount(key, hour .. ':a', admitted) or made end
  if refused ~= 0 then made = usageCount(key, hour .. ':r', refused) or made end
  if units ~= 0 then made = usageCount(key, hour .. ':u', units) or made end
  if credits ~= 0 then made = usageCount(key, hour .. ':c', credits) or made end
  if not made then return end
  if type(periods) ~= 'string' then periods = usagePeriods(periods) end
  if redis.call('HSETNX', key, 'p', periods) == 1 then
    redis.call('PEXPIRE', key, string.format('%.0f', retentionMs + DAY_MS))
  end
end
`;

// KEYS[1]  tg:quota:{id}
// ARGV     perMinute, perDay, banAfterRejections, banWindowMs, banDurationMs, shadow (1 or 0),
//          gcra (1 or 0), minute intervalUs, minute burst (gcra.ts gcraMinute(), computed once in
//          TS), nowMs ('' = Redis TIME), recall (1: a refusal while a lease of the key may be out
//          is a recall, below; 0: final), perMonth (0: no month window), the day's four edges and
//          the month's (calendar.ts), credits (1: the quota requires credits: an admitted request
//          spends its cost from 'cb', one 'cb' cannot cover is answered 4, or 3 with `recall` 1 while
//          a lease may be out: its block may hold the credits), usage retentionMs (0: keep
//          no usage; CLOCK's usageAdd), then the cost of each request to decide, one or more, in the
//          order they arrived
// Reply    per request, QUOTA_REPLY_LENGTH numbers in a row: { verdict (0 allowed, 1 limited,
//            2 banned, 3 recalled, 4 unfunded), minuteCount, dayCount, rejections, nowMs, bannedUntilMs,
//            cost, minuteTatUs, monthCount, creditBalance, seq, leasedUntilMs, moveNo } (seq and leasedUntilMs: this step's
//            notice number and 'le', for a recalled request to wait on; 0 when no lease may be out;
//            moveNo: gcra, the number of the TAT's last move down, 'mn', TAT_MOVES)
// Several requests of one key in one call (redis-quota-store.ts merges those of one event-loop
// turn) are decided one after another on the state each left, at one `now`: exactly as the same
// requests sent one at a time within that millisecond.
// Recall (quota-leases.ts, rule 11): with `recall` 1, a request that does not fit while units of
// a lease of the key may be out (CLOCK's unitsOut: a lease may still admit, or one lapsed less
// than RECALL_GRACE_MS ago has not given back yet) is not refused: it is answered 3, counted
// towards no ban, the want is recorded ('rq': no block is granted before it, CLOCK's recallWant),
// and the recall is published; the holders give their unused units back and the request is
// decided again, with `recall` 0.
// Numbers that may grow large (TATs in microseconds, expiries) are written with %.0f,
// exact for every integer a double holds: Redis passes a Lua number on in its shortest form, which
// for large round values is exponent notation ('8.64e+17'), which PEXPIRE refuses.
export const QUOTA_ARGS_BEFORE_COSTS = 22;
export const QUOTA_REPLY_LENGTH = 13;
/**
 * QUOTA_SCRIPT's step as Lua functions, after the shared pieces (CLOCK): `planAt(o)` reads the
 * fixed arguments from ARGV[o + 1] on, `quotaStep(plan, now, costs, from, to, slotsKey, out)`
 * decides the costs costs[from..to] of KEYS[1] on that plan and appends the replies to `out`.
 * QUOTA_SCRIPT, RULES_QUOTA_SCRIPT and MULTI_QUOTA_SCRIPT all call it: one step, defined once per
 * call (no closure or table made per section, nor per request beyond what the state needs).
 */
export const QUOTA_STEP = `
-- A plan: QUOTA_SCRIPT's fixed arguments as numbers (MULTI_QUOTA_SCRIPT reads one per plan and call).
local function planAt(o)
  return { perMinute = tonumber(ARGV[o + 1]), perDay = tonumber(ARGV[o + 2]), banAfter = tonumber(ARGV[o + 3]),
    banWindowMs = tonumber(ARGV[o + 4]), banDurationMs = tonumber(ARGV[o + 5]), shadow = ARGV[o + 6] == '1',
    gcra = ARGV[o + 7] == '1', intervalUs = tonumber(ARGV[o + 8]), burst = tonumber(ARGV[o + 9]), nowArg = ARGV[o + 10],
    recall = ARGV[o + 11] == '1', perMonth = tonumber(ARGV[o + 12]), edges = edgesAt(o + 13),
    credits = ARGV[o + 21] == '1', usageMs = tonumber(ARGV[o + 22]) }
end
-- decide(): one request of cost units on s, which it updates (s.changed, s.admitted, s.recalled,
-- s.spent, s.refused: what the step must write); the verdict. member: the request's concurrency
-- slot, in s.slots (below).
local function decide(s, P, now, cost, member)
  if s.bu > now then return 2 end
  -- quota-state.ts: a balance that cannot pay changes nothing (no window, no ban count). Credits out
  -- on leases may be what it lacks: recalled first, as a window's refusal (a shadow plan's too: the
  -- balance is money), then decided again.
  if P.credits and s.cb < cost then
    if s.unitsOut and P.recall then
      s.changed, s.recalled = true, true
      return 3
    end
    return 4
  end
  s.changed = true
  local dayFits = s.dc + cost <= P.perDay
  local monthFits = P.perMonth == 0 or s.yc + cost <= P.perMonth
  local minuteFits
  local minuteTat = nil
  if P.gcra then
    minuteTat = admit(s.mt, now * 1000, cost, P.intervalUs, P.burst)
    minuteFits = minuteTat ~= nil
  else
    minuteFits = s.mc + cost <= P.perMinute
  end
  if minuteFits and dayFits and monthFits then
    if member then
      -- Not a refusal of the windows: no ban count, nothing charged (docs/policies.md, maxConcurrent).
      if redis.call('ZCARD', s.slots) >= s.slotMax then return 5 end
      redis.call('ZADD', s.slots, now + s.slotLife, member)
      redis.call('PEXPIRE', s.slots, s.slotLife + MINUTE_MS)
    end
    s.mc = s.mc + cost
    s.dc = s.dc + cost
    if P.perMonth > 0 then s.yc = s.yc + cost end
    if minuteTat ~= nil then s.mt = minuteTat end
    if P.credits then s.cb = s.cb - cost; s.spent = true end
    s.admitted = true
    return 0
  end
  -- Units out on leases may be what it lacks: they are recalled before the refusal is final.
  if s.unitsOut and P.recall and not P.shadow then
    s.recalled = true
    return 3
  end
  -- a shadow refusal is admitted by the gateway, so it counts towards no ban
  if P.shadow then return 1 end
  s.refused = true
  if now - s.rs >= P.banWindowMs then s.rs = now; s.rc = 0 end
  s.rc = s.rc + 1
  if s.rc >= P.banAfter then
    s.bu = now + P.banDurationMs
    s.rc = 0
    s.rs = 0
    return 2
  end
  return 1
end

-- Concurrency slots (redis-quota-store.ts, call()): with slotsKey, tg:slots:{id}, costs[from] and costs[from + 1]
-- are maxConcurrent and a slot's life in ms, then each request is a cost and its slot's member. A
-- request the windows admit takes a slot too, or is answered 5 and charged nothing.
local function quotaStep(P, now, costs, from, to, slotsKey, out)
  local s = current(now, P.edges)
  -- gcra: a state with no move number yet takes the time in µs as its first (TAT_MOVES), so that
  -- the numbers of a state lost since (a Redis restarted empty, FLUSHDB) lie below this one's: a
  -- settlement of an admission made there finds the moves between missing. Not when this master's
  -- clock is behind the lost one's by more than the moves since, nor for a replica promoted without
  -- the hash's last writes (its numbers go on from its own): gcra-move-numbers-attacks.test.ts.
  -- ('mn' stays the text HMGET read: only a settlement needs it as a number, and strtod of its 16
  -- digits was most of what it cost a warm gcra key's step; the reply carries the text.)
  if P.gcra and s.mn == 0 then s.mn, s.mnNew = string.format('%.0f', now * 1000), true end
  -- A lease may still admit (its holders hear of every change), or its units may still come back
  -- (a refusal is a recall: decide).
  local leased = s.le > now
  s.unitsOut = unitsOut(s.le, now)
  -- The number a notice of this step carries, if it publishes one (only while a lease may be out,
  -- or for a recall).
  local seq, leasedUntil = 0, 0
  if leased then seq, leasedUntil = nextSeq(s, now), s.le end
  local costStep = 1
  if slotsKey then
    s.slots, s.slotMax, s.slotLife = slotsKey, tonumber(costs[from]), tonumber(costs[from + 1])
    from, costStep = from + 2, 2
    redis.call('ZREMRANGEBYSCORE', slotsKey, '-inf', now)
  end
  -- Usage (CLOCK's usageAdd): what this step admitted, refused (a recall is decided again later), charged and spent.
  local ua, ur, uu, uc = 0, 0, 0, 0
  local n = #out
  for i = from, to, costStep do
    local cost = num(costs[i])
    local member = nil
    if costStep == 2 then member = costs[i + 1] end
    local verdict = decide(s, P, now, cost, member)
    -- A recall of a lapsed lease's units: this step's notice is the recall.
    if verdict == 3 and not leased and seq == 0 then seq, leasedUntil = nextSeq(s, now), s.le end
    local bannedUntil = 0
    if verdict == 0 then
      ua, uu = ua + 1, uu + cost
      if P.credits then uc = uc + cost end
    elseif verdict == 2 then bannedUntil = s.bu
    end
    if verdict ~= 0 and verdict ~= 3 then ur = ur + 1 end
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = verdict, s.mc, s.dc, s.rc, now, bannedUntil
    out[n + 7], out[n + 8], out[n + 9], out[n + 10], out[n + 11], out[n + 12] = cost, s.mt, s.yc, s.cb, seq, leasedUntil
    out[n + 13] = s.mn
    n = n + ${QUOTA_REPLY_LENGTH}
  end
  usageAdd(P.usageMs, s.ds, s, now, 0, ur, uu - ua, uc, ua)
  -- A request refused for a ban in force changes nothing: nothing is written when every one was.
  if not s.changed then return out end

  local ex = expiry(s, P.banWindowMs)
  -- Counts that moved, a ban that began, or a recall, while a lease may be out: its holders hear of it.
  local published = (leased and (s.admitted or s.bu > now)) or s.recalled
  if not published then
    -- The path of every key no lease is out on: one HSET with its arguments as they are (no table),
    -- of the minute and the counters alone while nothing else moved (the same day and month, no
    -- refusal, the same expiry): a warm key's minute often begins with its request. Within the
    -- minute stored, not even that: 'ms' holds it already (each field written costs Redis a
    -- lookup in the hash and a number's conversion to text).
    if not s.rolled and not s.refused and ex == s.exAt then
      -- ('yc' moves only with a month window.)
      if not s.newMinute then
        if P.gcra then
          redis.call('HSET', KEYS[1], 'mc', s.mc, 'dc', s.dc, 'yc', s.yc, 'mt', string.format('%.0f', s.mt))
        elseif P.perMonth > 0 then
          redis.call('HSET', KEYS[1], 'mc', s.mc, 'dc', s.dc, 'yc', s.yc)
        else
          redis.call('HSET', KEYS[1], 'mc', s.mc, 'dc', s.dc)
        end
      elseif P.gcra then
        redis.call('HSET', KEYS[1], 'ms', s.ms, 'mc', s.mc, 'dc', s.dc, 'yc', s.yc, 'mt', string.format('%.0f', s.mt))
      elseif P.perMonth > 0 then
        redis.call('HSET', KEYS[1], 'ms', s.ms, 'mc', s.mc, 'dc', s.dc, 'yc', s.yc)
      else
        redis.call('HSET', KEYS[1], 'ms', s.ms, 'mc', s.mc, 'dc', s.dc)
      end
    else
      local exArg = string.format('%.0f', ex)
      if P.gcra then
        redis.call('HSET', KEYS[1], 'ms', s.ms, 'mc', s.mc, 'ds', s.ds, 'dc', s.dc, 'rs', s.rs, 'rc', s.rc, 'bu', s.bu,
          'ex', exArg, 'mt', string.format('%.0f', s.mt), 'ys', s.ys, 'yc', s.yc)
      else
        redis.call('HSET', KEYS[1], 'ms', s.ms, 'mc', s.mc, 'ds', s.ds, 'dc', s.dc, 'rs', s.rs, 'rc', s.rc, 'bu', s.bu, 'ex', exArg,
          'ys', s.ys, 'yc', s.yc)
      end
      if ex ~= s.exAt and not s.keep then redis.call('PEXPIRE', KEYS[1], string.format('%.0f', ex - now + MINUTE_MS)) end
    end
    if s.spent then redis.call('HSET', KEYS[1], 'cb', s.cb) end
    if s.mnNew then redis.call('HSET', KEYS[1], 'mn', s.mn) end
    return out
  end
  local fields = stateFields(s, ex)
  fields[#fields + 1] = 'sq'
  fields[#fields + 1] = string.format('%.0f', seq)
  if s.spent then
    fields[#fields + 1] = 'cb'
    fields[#fields + 1] = s.cb
  end
  if s.recalled then
    fields[#fields + 1] = 'rq'
    fields[#fields + 1] = string.format('%.0f', recallWant(s.le, now))
  end
  if s.mnNew then
    fields[#fields + 1] = 'mn'
    fields[#fields + 1] = s.mn
  end
  write(s, now, ex, fields)
  if s.recalled then notify(seq, s, now, 1) else notify(seq, s, now, 0) end
  return out
end
`;
export const QUOTA_SCRIPT = `${CLOCK}${QUOTA_STEP}
local plan = planAt(0)
return quotaStep(plan, clock(plan.nowArg), ARGV, ${QUOTA_ARGS_BEFORE_COSTS + 1}, #ARGV, KEYS[2], {})
`;

// peek(): use without consuming. ARGV nowMs as above, then the day's and the month's edges, then
// an optional usage retentionMs: a request answered by the ban this finds in force is counted
// refused in usage, as QUOTA_STEP counts a ban's refusal (a Cluster's limit rules refused it and
// asked only this: redis-limit-rules.ts consumeRulesOnCluster); 0 or none counts nothing.
// Reply as above (without seq and leasedUntilMs), verdict 0 or 2.
export const USAGE_SCRIPT = `${CLOCK}
local now = clock(ARGV[1])
local s = current(now, 2)
if s.bu > now then
  usageAdd(tonumber(ARGV[10]) or 0, s.ds, usagePeriods(s), now, 0, 1, 0, 0)
  return reply(2, s, now, 1)
end
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

// gcra: the TAT's moves down (quota-state.ts TatMove: a settled reservation's refund, a lease
// block given back), numbered one after another in the quota hash's 'mn' from the time in µs at
// the state's first step (QUOTA_STEP; each decision replies it: a reservation's settlement carries
// the number it was admitted at, and one from a state since lost is below it), kept in a sorted set by
// number (tatMovesKey), each member '<number> <pos µs> <amount µs>': the last TAT_MOVES_KEPT, for
// τ. SETTLE_SCRIPT reads those after a reservation's number to find where its cells are now
// (movedEnd, quota-state.ts movedEndUs); when any of them is missing (more were made, the set
// expired) where they are is unknown, and nothing comes off.
const TAT_MOVES = `
local function logTatMove(movesKey, now, posUs, amountUs, toleranceUs)
  local n = (tonumber(redis.call('HGET', KEYS[1], 'mn')) or now * 1000) + 1
  redis.call('HSET', KEYS[1], 'mn', string.format('%.0f', n))
  redis.call('ZADD', movesKey, string.format('%.0f', n), string.format('%.0f %.0f %.0f', n, posUs, amountUs))
  redis.call('ZREMRANGEBYRANK', movesKey, 0, -${TAT_MOVES_KEPT + 1})
  redis.call('PEXPIRE', movesKey, string.format('%.0f', toleranceUs / 1000 + MINUTE_MS))
end
-- Where a reservation admitted at move number sinceNo that ended at endUs ends now; nil: unknown.
local function movedEnd(movesKey, endUs, sinceNo, lastNo)
  if lastNo < sinceNo then return nil end
  if lastNo == sinceNo then return endUs end
  local moves = redis.call('ZRANGEBYSCORE', movesKey, string.format('(%.0f', sinceNo), '+inf')
  if #moves ~= lastNo - sinceNo then return nil end
  for _, m in ipairs(moves) do
    local pos, amount = string.match(m, '^%S+ (%S+) (%S+)$')
    if tonumber(pos) < endUs then endUs = endUs - tonumber(amount) end
  end
  return endUs
end
`;

// A lease grant's record ('g:<holder>': LEASE_SCRIPT, RULE_LEASE_SCRIPT), its fields as text.
export const GRANT_RECORD = `
local function fieldsOf(record)
  local list = {}
  for field in string.gmatch(record, '%S+') do list[#list + 1] = field end
  return list
end
`;

// Quota leases (src/quota/quota-leases.ts: the rule). One atomic step that first gives back what
// an ended lease did not use, then reserves a new block, from the minute and the day together.
// KEYS[1]  tg:quota:{id}
// KEYS[2]  tg:lease-holders:{id}: per replica holding a lease of the key, the end of its last
//          grant on Redis's clock ('le' is the latest of them, so it falls once the last holder
//          has ended its lease, and recalled requests know the units are back), kept until the
//          holder gives back, or RECALL_GRACE_MS past that end (CLOCK's unitsOut)
// KEYS[3]  tg:tat-moves:{id} (gcra: a block given back moves the TAT down, TAT_MOVES)
// ARGV     perMinute, perDay, banWindowMs, nowMs ('' = Redis TIME), want (units; 0 = only give
//          back), divisor (a block is at most the units left / divisor), minBlock (smaller blocks
//          are not worth a lease: none is granted), returnUnits, returnMinuteStartMs, returnDayStartMs,
//          gcra (1 or 0), minute intervalUs, minute burst, leaseMs (gcra: the lease's longest life),
//          block (gcra: the replica's number for the block this step may grant; below),
//          holder (the replica's id), ends (1: its lease of the key ends with this step), heldUntilMs
//          (with ends: the end of that lease's last grant; a newer grant keeps the holder),
//          perMonth (0: no month window), the day's and the month's edges (calendar.ts),
//          returnMonthStartMs, usage retentionMs (0: keep no usage), returnRequests (the requests the
//          returned block admitted), returnNo (0: unnumbered; else applied once per holder, below),
//          credits (1: the quota requires credits: a block also takes its units from 'cb'),
//          returnCredits (the returned block's unused credits), returnEpoch (the 'ce' its grant
//          replied; below), returnHashEpoch (the 'he' its grant replied; 0: unknown; below),
//          returnBlock (gcra: the returned block's number, as its ask gave it; 0: none; below),
//          cancelFrom (0: none; else the first of this replica's asks of the key whose answer it
//          never heard: a grant of one of them goes back, below)
// Reply    { granted, minuteStartMs, dayStartMs, nowMs, minuteCount, dayCount, minuteTatUs, seq,
//          monthStartMs, monthCount, creditBalance, creditEpoch, hashEpoch } (after the step; seq: the notice
//          sequence number of this state, rule 10; creditBalance: 'cb', blocks out not in it)
// Given-back units are credited only to the windows they were taken from: a window that has since
// rolled over is not credited (its counters are the new window's). No block while banned, none
// while a recall is pending ('rq', rule 11), and none once the units left are fewer than
// divisor × minBlock: from then on every request is decided by QUOTA_SCRIPT alone, so the
// limit's edge, Retry-After and bans are exact as ever.
// gcra: a block's cells are charged as if they arrived at now + leaseMs (the latest moment the
// lease may use them) and granted only if the last of them would conform at now (the earliest);
// a returned block takes its unused cells off the TAT while the TAT is still the block's end
// (nothing charged after it), or while those cells' slots are all later than now + leaseMs (then
// every cell charged after them, a block's included, moves down onto slots still after its use).
// Blocks given back before it (another holder's below it, a recall ending them all) may have moved
// its end down: Redis keeps each gcra block's end as it moves (KEYS[2]'s 'b:' fields, named by
// holder and the replica's number for the block, so a block a failed-over master lacks is never
// taken for another). quota-leases.ts has the reasoning.
export const LEASE_SCRIPT = `${CLOCK}${TAT_MOVES}${GRANT_RECORD}
local now = clock(ARGV[4])
local perMinute, perDay, banWindowMs = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local want, divisor, minBlock = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local back, backMinute, backDay = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local gcra, intervalUs, burst = ARGV[11] == '1', tonumber(ARGV[12]), tonumber(ARGV[13])
local leaseUs, askBlock = tonumber(ARGV[14]) * 1000, tonumber(ARGV[15]) or 0
local holder, ends, heldUntil = ARGV[16], ARGV[17] == '1', tonumber(ARGV[18])
local perMonth, backMonth = tonumber(ARGV[19]), tonumber(ARGV[28])
local s, stored = current(now, 20)
-- A step that wants no block (a give-back, a lost ask named alone) goes under the quota its lease
-- was granted with, and the key's time zone or billing anchor may have moved since (keys.onChange):
-- its windows are counted under the new calendar. Where this step's calendar reads the stored day
-- or month as ended while the state lives ('ex'), they stay as stored: written back fresh, what
-- the key's new windows counted would be forgotten, and admitted again. The give-back credits a
-- kept window only where it is the one its block came from (a day or month that really ended, by
-- no more than 'ld'/'ly' hold there: nothing reads an ended window as current), never the new
-- calendar's. A day or month that really ended is rolled by the key's next decision, under its
-- own calendar, as ever.
-- (The usage of the give-back's day keeps the periods of this step's own calendar, ownPeriods: the
-- ends kept are the stored state's expiry, not that day's or month's.)
local ownDs, ownPeriods = s.ds, nil
if want == 0 and s.rolled then
  local storedEx = s.exAt
  if storedEx and storedEx > now then
    ownPeriods = usagePeriods(s)
    local ds, ys = num(stored[3]) or 0, num(stored[12]) or 0
    if ds > 0 and ds ~= s.ds then s.ds, s.dc, s.de = ds, num(stored[4]) or 0, storedEx end
    if ys > 0 and ys ~= s.ys then s.ys, s.yc, s.ye = ys, num(stored[13]) or 0, storedEx end
  end
end
-- Usage of a lease's block (quota-leases.ts, rule 13): its grant is counted in the grant's hour, and
-- its give-back takes the unused units off that hour again (never more than it holds) and adds the
-- requests the block admitted there, so the hour holds what the block really charged.
local usageMs, backRequests = tonumber(ARGV[29]) or 0, tonumber(ARGV[30]) or 0
-- A numbered give-back (ARGV[31], lease-give-backs.ts: one replica's give-backs of a key come in
-- order, a failed one again after an outage) is applied once: 'gb:<holder>' keeps the highest
-- applied, and one not above it credits nothing, so a retry whose first try ran here (its reply
-- lost) cannot credit twice, nor take its usage off twice. ('lm'/'ld'/'ly' bound a credit by
-- every replica's units out, which a duplicate could still take from.) Written into a missing hash too (a Redis restarted empty),
-- kept a day, for a retry after new grants.
local backNo = tonumber(ARGV[31]) or 0
-- Credits (quota-leases.ts, rule 14): a block of a credits key is also that many credits taken from
-- 'cb'; its unused ones go back to 'cb', whatever the windows did meanwhile, but no more than 'lc'
-- (credits granted on blocks less those given back: at least what blocks still hold, as 'lm'), and
-- only while 'ce' is the grant's: CREDITS_SCRIPT's 'set' moves it on, and the blocks out before the
-- set go back to no balance.
local credits, backCredits, backEpoch = ARGV[32] == '1', tonumber(ARGV[33]) or 0, tonumber(ARGV[34]) or 0
-- The hash's epoch 'he' (Redis's clock in µs, set by the first grant into a hash without one): a
-- Redis restarted empty (or FLUSHDB, a DEL) makes a new one, so a give-back of a block granted
-- before credits nothing to the counts and balance made after, though 'lm'/'ld'/'lc' there may
-- hold a new lease's units. A give-back that carries none (0: granted before 'he' existed) is
-- credited as before. (The requests it admitted still count in usage.)
local he = tonumber(redis.call('HGET', KEYS[1], 'he')) or 0
local backHashEpoch, backBlock = tonumber(ARGV[35]) or 0, tonumber(ARGV[36]) or 0
-- An ask whose answer was lost (a connection cut, a timeout: quota-leases.ts, rule 5): its holder
-- never uses a block it may have been granted, so that block goes back as an unused one. Each grant
-- leaves 'g:<holder>' in KEYS[2], '<ask's number> <units> <minute> <day> <month> <he> <ce> <end>
-- <credits spent> <gcra interval µs, 0: fixed> <the holder's end before it>': what the grant took, read from the record, not
-- from this step's quota (the key may have moved to another plan since: credits, or a gcra
-- interval, of its own),
-- and a replica's asks of a key go one at a time, so when the ask named cancelFrom or a later
-- one (all unanswered) was granted, it is that record. Consumed here: once only, whatever comes
-- after. (This step carries no give-back of its own: an ask, or a lease's end.)
local cancelFrom = tonumber(ARGV[37]) or 0
-- A cancelled grant's end, and its holder's end before it (the record's last field; 0: none).
local lostEnd, endBefore = nil, 0
-- The interval the given-back cells were charged at (a cancelled grant's own, below).
local backIntervalUs = intervalUs
if cancelFrom > 0 then
  local lost = redis.call('HGET', KEYS[2], 'g:' .. holder)
  local r = {}
  if lost then for i, field in ipairs(fieldsOf(lost)) do r[i] = tonumber(field) end end
  if #r >= 10 and r[1] >= cancelFrom then
    redis.call('HDEL', KEYS[2], 'g:' .. holder)
    back, backMinute, backDay, backMonth = r[2], r[3], r[4], r[5]
    backHashEpoch, backEpoch, backCredits = r[6], r[7], r[9]
    if r[10] > 0 then backBlock, backIntervalUs = r[1], r[10] end
    if #r >= 11 then lostEnd, endBefore = r[8], r[11] end
  end
end
if backHashEpoch ~= 0 and backHashEpoch ~= he then back, backCredits = 0, 0 end
if (back > 0 or backRequests > 0) and backNo > 0 then
  local mark = 'gb:' .. holder
  if (tonumber(redis.call('HGET', KEYS[1], mark)) or 0) >= backNo then
    back, backRequests, backCredits = 0, 0, 0
  else
    local fresh = redis.call('EXISTS', KEYS[1]) == 0
    redis.call('HSET', KEYS[1], mark, backNo)
    if fresh then redis.call('PEXPIRE', KEYS[1], DAY_MS) end
  end
end
if back > 0 or backRequests > 0 then
  local hour = usageHour(backDay, backMinute)
  -- (Units held: 'u' and 'n', CLOCK's usageAdd.)
  local counts = redis.call('HMGET', usageKey(backDay), hour .. ':u', hour .. ':n', hour .. ':c')
  local held = (tonumber(counts[1]) or 0) + (tonumber(counts[2]) or 0)
  local heldCredits = tonumber(counts[3]) or 0
  -- (Its day's hash has its 'p' from the grant; one lost meanwhile gets the ends as far as known.)
  local periods = '0 ' .. string.format('%.0f', backMonth) .. ' 0'
  if backDay == ownDs then periods = ownPeriods or usagePeriods(s) end
  usageAdd(usageMs, backDay, periods, backMinute, backRequests, 0, -math.min(back, held), -math.min(backCredits, heldCredits))
end
-- Units out on leases in this minute and this day ('lm', 'ld', each with the window start it
-- belongs to): a give-back credits a window with no more than these, so never with units its
-- counters do not hold (a Redis restarted empty, a give-back run twice).
local raw = redis.call('HMGET', KEYS[1], 'lms', 'lds', 'lm', 'ld', 'rq', 'lys', 'ly', 'lc', 'ce')
local lm, ld, ly = 0, 0, 0
if tonumber(raw[1]) == s.ms then lm = tonumber(raw[3]) or 0 end
if tonumber(raw[2]) == s.ds then ld = tonumber(raw[4]) or 0 end
local recallUntil = tonumber(raw[5]) or 0
if tonumber(raw[6]) == s.ys then ly = tonumber(raw[7]) or 0 end
local lc, ce = tonumber(raw[8]) or 0, tonumber(raw[9]) or 0
-- gcra blocks (quota-leases.ts, rule 9): each block out has a field in KEYS[2],
-- 'b:<holder>:<the replica's number for it>' = '<end> <seq>': where it ends on the TAT line now
-- (give-backs of blocks below it move it down) and its grant's seq (a block granted later lies
-- above it: a grant starts at the TAT). A give-back names its block (ARGV[36]) and removes its
-- field, with or without unused cells. A block without one here (a master that lacks its grant,
-- a Redis restarted, given back already) is not on this TAT line: nothing comes off it.
local nowUs = now * 1000
local function blockField(no) return 'b:' .. holder .. ':' .. string.format('%.0f', no) end
local backEnd, backSeq = nil, nil
if gcra and backBlock > 0 then
  local entry = redis.call('HGET', KEYS[2], blockField(backBlock))
  if entry then
    redis.call('HDEL', KEYS[2], blockField(backBlock))
    backEnd, backSeq = blockAt(entry)
  end
end
local changed, creditsMoved = false, false
if backCredits > 0 and backEpoch == ce and lc > 0 then
  local credit = math.min(backCredits, lc)
  s.cb = s.cb + credit; lc = lc - credit; changed, creditsMoved = true, true
end
if back > 0 then
  if s.ms == backMinute and s.mc > 0 then
    local credit = math.min(back, lm)
    s.mc = math.max(0, s.mc - credit); lm = lm - credit; changed = true
  end
  if s.ds == backDay and s.dc > 0 then
    local credit = math.min(back, ld)
    s.dc = math.max(0, s.dc - credit); ld = ld - credit; changed = true
  end
  if s.ys == backMonth and s.yc > 0 then
    local credit = math.min(back, ly)
    s.yc = math.max(0, s.yc - credit); ly = ly - credit; changed = true
  end
  -- The block's unused cells are its top slots, below its end E. Every cell charged above them
  -- (up to the TAT) moves down onto slots that must stay after its use: nothing is above (the
  -- TAT is E), or the freed slots all lie after now + leaseMs and after 'le', the end of every
  -- lease out (a replica whose leaseMs is longer, in a rolling change of it, uses its blocks later).
  local usedBy = math.max(nowUs + leaseUs, s.le * 1000)
  if backEnd and s.mt > nowUs and s.mt >= backEnd and (s.mt == backEnd or backEnd - back * backIntervalUs >= usedBy) then
    s.mt = s.mt - back * backIntervalUs; changed = true
    logTatMove(KEYS[3], now, backEnd, back * backIntervalUs, burst * intervalUs)
    -- The blocks granted after it lie above it: they move down with it.
    local blocks = redis.call('HGETALL', KEYS[2])
    for i = 1, #blocks, 2 do
      if string.sub(blocks[i], 1, 2) == 'b:' then
        local e, q = blockAt(blocks[i + 1])
        if q > backSeq then redis.call('HSET', KEYS[2], blocks[i], string.format('%.0f %.0f', e - back * backIntervalUs, q)) end
      end
    end
  end
end
local leasedBefore = s.le
-- A lease that ends leaves the holders; 'le' becomes the latest end of those still in force.
-- (A grant's record stays: it may be a lost renewal's, granted in the ending lease's millisecond,
-- still to be named.)
local function latestHeld()
  local latest = 0
  local held = redis.call('HGETALL', KEYS[2])
  for i = 2, #held, 2 do
    -- (Blocks' fields, 'b:<holder>:<number>', and grants' records, 'g:<holder>', are no holders.)
    local field = string.sub(held[i - 1], 1, 2)
    if field ~= 'b:' and field ~= 'g:' then
      local untilMs = tonumber(held[i]) or 0
      if unitsOut(untilMs, now) then latest = math.max(latest, untilMs) else redis.call('HDEL', KEYS[2], held[i - 1]) end
    end
  end
  return latest
end
-- This replica's end among the holders as the step goes (nil: none).
local heldEnd = tonumber(redis.call('HGET', KEYS[2], holder))
if ends and heldEnd == heldUntil then
  redis.call('HDEL', KEYS[2], holder)
  heldEnd = nil
  local latest = latestHeld()
  if latest < s.le then s.le = latest; changed = true end
elseif ends and heldEnd then
  -- A later grant of this holder (a lost renewal's, still to be named) keeps it among the holders;
  -- the lease ending here was that grant's "end before": its cancel puts back none (nothing is out).
  local rec = redis.call('HGET', KEYS[2], 'g:' .. holder)
  local r = {}
  if rec then r = fieldsOf(rec) end
  if #r >= 11 and tonumber(r[8]) == heldEnd and tonumber(r[11]) == heldUntil then
    r[11] = '0'
    redis.call('HSET', KEYS[2], 'g:' .. holder, table.concat(r, ' '))
  end
end
-- A cancelled grant holds nothing: its holder's end goes back to what it was before it (none: it
-- leaves the holders), so that a refusal waits for no units that are not out.
if lostEnd and heldEnd == lostEnd then
  if endBefore > 0 then redis.call('HSET', KEYS[2], holder, string.format('%.0f', endBefore)) else redis.call('HDEL', KEYS[2], holder) end
  -- (latestHeld drops an end that can hold no units any more, the one put back too.)
  heldEnd = nil
  if endBefore > 0 and unitsOut(endBefore, now) then heldEnd = endBefore end
  local latest = latestHeld()
  if latest < s.le then s.le = latest; changed = true end
end
local granted = 0
if want > 0 and s.bu <= now and recallUntil <= now then
  local left = perDay - s.dc
  if perMonth > 0 then left = math.min(left, perMonth - s.yc) end
  if credits then left = math.min(left, s.cb) end
  local from = 0
  if gcra then
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
    if perMonth > 0 then s.yc = s.yc + granted; ly = ly + granted end
    if gcra then s.mt = from + granted * intervalUs end
    local spent = 0
    if credits then s.cb = s.cb - granted; lc = lc + granted; spent = granted; creditsMoved = true end
    usageAdd(usageMs, s.ds, usagePeriods(s), now, 0, 0, granted, spent)
    changed = true
    if he == 0 then he = now * 1000 end
    -- A block admits no later than leaseMs after this moment (quota-leases.ts, rules 4 and 8).
    local untilMs = now + leaseUs / 1000
    s.le = math.max(s.le, untilMs)
    local record = string.format('%.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f', askBlock, granted, s.ms, s.ds, s.ys, he, ce, untilMs,
      spent, gcra and intervalUs or 0, heldEnd or 0)
    redis.call('HSET', KEYS[2], holder, string.format('%.0f', untilMs), 'g:' .. holder, record)
    redis.call('PEXPIRE', KEYS[2], string.format('%.0f', leaseUs / 1000 + MINUTE_MS))
  end
end
local seq = s.sq
if changed then
  -- Published only while a lease's units may be out (unitsOut: a give-back of a lapsed lease is
  -- what a recalled request waits for), or a recall's want is pending (a give-back later still);
  -- one much later tells no one anything.
  local published = unitsOut(math.max(leasedBefore, s.le), now) or recallUntil > now
  if published then seq = nextSeq(s, now) end
  local ex = expiry(s, banWindowMs)
  local fields = stateFields(s, ex)
  for _, field in ipairs({ 'lms', s.ms, 'lm', lm, 'lds', s.ds, 'ld', ld, 'lys', s.ys, 'ly', ly,
    'le', string.format('%.0f', s.le), 'sq', string.format('%.0f', seq) }) do fields[#fields + 1] = field end
  if he ~= 0 then
    fields[#fields + 1] = 'he'
    fields[#fields + 1] = string.format('%.0f', he)
  end
  if creditsMoved then
    for _, field in ipairs({ 'cb', s.cb, 'lc', lc }) do fields[#fields + 1] = field end
  end
  write(s, now, ex, fields)
  if published then notify(seq, s, now, 0) end
end
-- The granted gcra block's field (above). Fields whose end has passed are dropped: nothing can
-- come off them any more (their holders killed, or the give-backs lost).
if gcra and granted > 0 and askBlock > 0 then
  local blocks = redis.call('HGETALL', KEYS[2])
  for i = 1, #blocks, 2 do
    if string.sub(blocks[i], 1, 2) == 'b:' and blockAt(blocks[i + 1]) <= nowUs then redis.call('HDEL', KEYS[2], blocks[i]) end
  end
  redis.call('HSET', KEYS[2], blockField(askBlock), string.format('%.0f %.0f', s.mt, seq))
end
return { granted, s.ms, s.ds, now, s.mc, s.dc, s.mt, seq, s.ys, s.yc, s.cb, ce, he }
`;

// An operator's change of the credit balance ('cb', beside the windows: one hash, one slot).
// ARGV  mode ('add', 'set' or 'show'), amount. A result below zero is not applied. The hash is made
// persistent: the balance must outlive the windows' expiry (QUOTA_SCRIPT then sets no TTL on it).
// Reply { applied (1 or 0), before, after }
// 'add' adds to Redis's balance; credits out on leases' blocks (LEASE_SCRIPT, 'lc') come back on
// top of it. 'set' makes Redis's balance the amount, and the blocks out are spent: 'lc' becomes 0
// and the epoch 'ce' moves on, so their give-backs return nothing, and while a lease may still
// admit ('le') a recall tells their holders to stop now (a notice as QUOTA_SCRIPT's, rule 11).
export const CREDITS_SCRIPT = `
local h = redis.call('HMGET', KEYS[1], 'cb', 'lc', 'le', 'sq', 'ms', 'mc', 'ds', 'dc', 'mt', 'bu', 'ys', 'yc')
local before = tonumber(h[1]) or 0
local mode, amount = ARGV[1], tonumber(ARGV[2])
local after = before
if mode == 'add' then after = before + amount elseif mode == 'set' then after = amount end
if after < 0 then return { 0, before, before } end
if mode ~= 'show' then
  redis.call('HSET', KEYS[1], 'cb', after)
  redis.call('PERSIST', KEYS[1])
end
if mode == 'set' and (tonumber(h[2]) or 0) > 0 then
  redis.call('HSET', KEYS[1], 'lc', 0)
  redis.call('HINCRBY', KEYS[1], 'ce', 1)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local le = tonumber(h[3]) or 0
  if le > now then
    local seq = string.format('%.0f', math.max((tonumber(h[4]) or 0) + 1, now * 1000))
    redis.call('HSET', KEYS[1], 'sq', seq)
    local n = {}
    for i = 5, 12 do n[#n + 1] = h[i] or '0' end
    redis.pcall('PUBLISH', '${QUOTA_NOTICE_CHANNEL}', table.concat({ KEYS[1], seq, n[1], n[2], n[3], n[4], n[5], n[6], now,
      n[7], n[8], string.format('%.0f', le), 1, after }, ' '))
  end
end
return { 1, before, after }
`;

// quota-state.ts settle(): a reservation settled to the cost the upstream reported, once.
// KEYS[1]  tg:quota:{id}
// KEYS[2]  tg:settled:{id}:<settlement id> (SET NX, kept markerTtlMs: a retried settlement, or
//          one whose reply was lost, changes nothing the second time)
// KEYS[3]  tg:lease-holders:{id} (gcra: where the blocks out on leases end, LEASE_SCRIPT)
// KEYS[4]  tg:tat-moves:{id} (gcra: the TAT's moves down, TAT_MOVES)
// ARGV     reserve, cost (capped), minuteStartMs, dayStartMs, monthStartMs (the reservation's
//          windows), perMonth (0: no month window), credits (1: the quota spends credits), gcra
//          (1 or 0), minute intervalUs, banWindowMs, markerTtlMs, nowMs ('' = Redis TIME), the
//          day's four edges and the month's (calendar.ts), usage retentionMs (0: keep no usage),
//          the TAT the reservation left (gcra, µs; 0: unknown, nothing comes off the TAT), the
//          reservation's admission (Redis's ms; 0: unknown, nothing comes off the TAT), minute
//          burst, the TAT's move number at the admission (its reply's moveNo)
// Reply    { applied (1, or 0 when settled before), shortfall, creditBalance }
// The extra is charged to the current windows even past their limits and to the balance never
// below zero (the shortfall is what it could not hold); the rest is given back to the windows it
// was taken from only, and to the balance (gcra: to the TAT only while no block is out, below).
// Leases of the subject hear of it as of any change.
export const SETTLE_SCRIPT = `${CLOCK}${TAT_MOVES}
-- A gcra block out whose end is still ahead (LEASE_SCRIPT's 'b:' fields; one that has ended has
-- nothing left to take off the TAT).
local function blockOut(nowUs)
  local held = redis.call('HGETALL', KEYS[3])
  for i = 1, #held, 2 do
    if string.sub(held[i], 1, 2) == 'b:' and blockAt(held[i + 1]) > nowUs then return true end
  end
  return false
end
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[11]) then
  return { 0, 0, tonumber(redis.call('HGET', KEYS[1], 'cb')) or 0 }
end
local now = clock(ARGV[12])
local s = current(now, 13)
local delta = tonumber(ARGV[2]) - tonumber(ARGV[1])
local perMonth, credits, gcra = tonumber(ARGV[6]), ARGV[7] == '1', ARGV[8] == '1'
local intervalUs, nowUs = tonumber(ARGV[9]), now * 1000
local shortfall, balanceMoved = 0, false
if delta == 0 then return { 1, 0, s.cb } end
if delta > 0 then
  s.mc = s.mc + delta
  s.dc = s.dc + delta
  if perMonth > 0 then s.yc = s.yc + delta end
  if gcra then s.mt = math.max(s.mt, nowUs) + delta * intervalUs end
  if credits then
    local taken = math.min(delta, s.cb)
    s.cb = s.cb - taken
    shortfall = delta - taken
    balanceMoved = taken > 0
  end
else
  local back = -delta
  if s.ms == tonumber(ARGV[3]) then s.mc = math.max(0, s.mc - back) end
  if s.ds == tonumber(ARGV[4]) then s.dc = math.max(0, s.dc - back) end
  if perMonth > 0 and s.ys == tonumber(ARGV[5]) then s.yc = math.max(0, s.yc - back) end
  -- (gcra: not while a block is out: a lease in force, or a block whose end Redis keeps, its
  -- give-back still to come. Blocks lie above these cells; taking them off the TAT would move
  -- the blocks' slots below their use and leave their kept ends too high (LEASE_SCRIPT's rule).
  -- Those cells stay charged until real time passes them.)
  -- quota-state.ts settle(): the reservation's top slots below where it ends now (the TAT it left,
  -- ARGV[22], moved down by the moves below it since its admission, numbered after ARGV[25]; none
  -- once it is older than τ, ARGV[23]: its cells have all passed), all of them while nothing is
  -- above it, else only those at or after now (refundedCells).
  local endUs, admittedAt, admittedNo = tonumber(ARGV[22]) or 0, tonumber(ARGV[23]) or 0, tonumber(ARGV[25]) or 0
  local toleranceUs = (tonumber(ARGV[24]) or 0) * intervalUs
  if gcra and s.mt > nowUs and s.le <= now and endUs > 0 and nowUs - admittedAt * 1000 <= toleranceUs and not blockOut(nowUs) then
    endUs = movedEnd(KEYS[4], endUs, admittedNo, num(s.mn) or 0)
    if endUs and s.mt >= endUs then
      local cells = back
      if s.mt ~= endUs then cells = math.min(back, math.max(0, math.floor((endUs - nowUs) / intervalUs))) end
      if cells > 0 then
        s.mt = s.mt - cells * intervalUs
        if s.mt <= nowUs then s.mt = 0 end
        logTatMove(KEYS[4], now, endUs, cells * intervalUs, toleranceUs)
      end
    end
  end
  if credits then s.cb = s.cb + back; balanceMoved = true end
end
-- Usage (CLOCK's usageAdd): the extra in this hour, as the windows; what is given back off the
-- reservation's hour, whether or not its windows have rolled since (the invoice holds the cost
-- reported; a rolled window's count is final).
local usageMs = tonumber(ARGV[21]) or 0
if delta > 0 then
  local spentCredits = 0
  if balanceMoved then spentCredits = delta - shortfall end
  usageAdd(usageMs, s.ds, usagePeriods(s), now, 0, 0, delta, spentCredits)
else
  local reservedDay, periods = tonumber(ARGV[4]), '0 0 0'
  if reservedDay == s.ds then periods = usagePeriods(s) end
  local creditsBack = 0
  if credits then creditsBack = delta end
  usageAdd(usageMs, reservedDay, periods, tonumber(ARGV[3]), 0, 0, delta, creditsBack)
end
local ex = expiry(s, tonumber(ARGV[10]))
local fields = stateFields(s, ex)
-- Written only when it moved: a hash given a 'cb' keeps no TTL (CREDITS_SCRIPT).
if balanceMoved then
  fields[#fields + 1] = 'cb'
  fields[#fields + 1] = s.cb
end
local leased = s.le > now
local seq = 0
if leased then
  seq = nextSeq(s, now)
  fields[#fields + 1] = 'sq'
  fields[#fields + 1] = string.format('%.0f', seq)
end
write(s, now, ex, fields)
if leased then notify(seq, s, now, 0) end
return { 1, shortfall, s.cb }
`;
