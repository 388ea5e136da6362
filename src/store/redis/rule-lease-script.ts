import { CLOCK, GRANT_RECORD } from './quota-script.js';
import { RULE_ARGS, RULE_PIECES } from './limit-rules-script.js';

// Leases of a limit rule's counter (src/quota/rule-leases.ts; the rule of docs/quota-leases.md):
// one step gives back an ended lease's unused units, then reserves a block, as LEASE_SCRIPT does
// for a plan. Fixed windows only (rule-leases.ts says which rules take leases). Fields beside the
// counter's 's', 'c', 't' in its hash (limit-rules-script.ts):
//   'lu', 'ls'   units out on leases, and the window they were counted in: a give-back credits no
//                more than they hold, so a Redis restarted empty takes back nothing it never counted
//   'h:<holder>' each replica holding a lease, with its last grant's end (grant time + leaseMs),
//                kept until its give-back or RECALL_GRACE_MS past that end (CLOCK's unitsOut)
//   'le'         the latest of those ends: until then a lease may admit, and every change of the
//                counter is published (RULES_QUOTA_SCRIPT too); until then and the grace after it,
//                its units may still come back, and a refusal is a recall
//   'sq'         the notices' sequence number (never below Redis's clock in µs)
//   'rq'         a recall's want: no block is granted before it (CLOCK's recallWant)
//   'gb:<holder>' the highest give-back number applied for that replica (lease-give-backs.ts)
//   'ep'         the counter's epoch: set (Redis's clock in µs) by its first grant; a give-back
//                carries its grant's and is credited only to that counter, never to one made anew
//                (Redis restarted empty, FLUSHDB) while the lease was out
//   'g:<holder>' that replica's last grant, '<its ask's number> <units> <window start> <epoch>
//                <end> <the holder's end before it>': an ask naming an earlier unanswered one
//                (cancelFrom) gives it back and puts the holder's end back, as LEASE_SCRIPT
// KEYS[1] the counter; ARGV nowMs ('' = Redis TIME), the rule's RULE_ARGS numbers, then want,
// divisor, minBlock, leaseMs, giveBack, giveBackMinuteStartMs (the start of the window the units
// came from), holder, ends (1: this replica's lease ends), heldUntilMs (that lease's last grant's
// end: a newer grant keeps the holder), giveBackNo, giveBackEpoch (its grant's 'ep'), the ask's
// number (0: none), cancelFrom (0: none; else the first of this replica's unanswered asks).
// Reply { granted, windowStartMs, dayStartMs, nowMs, count, seq, epoch }: the counter after the step.
const AT = 2 + RULE_ARGS;
export const RULE_LEASE_SCRIPT = `${CLOCK}${RULE_PIECES}${GRANT_RECORD}
local now = clock(ARGV[1])
local r = ruleArgs(2)
local want, divisor, minBlock, leaseMs = tonumber(ARGV[${AT}]), tonumber(ARGV[${AT + 1}]), tonumber(ARGV[${AT + 2}]), tonumber(ARGV[${AT + 3}])
local giveBack, giveBackFrom, holder = tonumber(ARGV[${AT + 4}]), tonumber(ARGV[${AT + 5}]), ARGV[${AT + 6}]
local ends, heldUntil, giveBackNo = ARGV[${AT + 7}] == '1', tonumber(ARGV[${AT + 8}]), tonumber(ARGV[${AT + 9}])
local giveBackEpoch = ARGV[${AT + 10}]
local askNo, cancelFrom = tonumber(ARGV[${AT + 11}]) or 0, tonumber(ARGV[${AT + 12}]) or 0
local h = redis.call('HMGET', KEYS[1], 's', 'c', 't', 'lu', 'ls', 'le', 'sq', 'rq', 'gb:' .. holder, 'h:' .. holder, 'ep', 'g:' .. holder)
-- An unanswered ask's grant (quota-leases.ts, rule 5): given back as an unused block, once (the
-- record is consumed). (An ask carries no give-back of its own.)
-- Its holder's end goes back to the one before it, as LEASE_SCRIPT's (lostEnd, endBefore).
local cancelled, lostEnd, endBefore = false, nil, 0
if cancelFrom > 0 and h[12] then
  local rec = fieldsOf(h[12])
  if #rec >= 4 and tonumber(rec[1]) >= cancelFrom then
    redis.call('HDEL', KEYS[1], 'g:' .. holder)
    giveBack, giveBackFrom, giveBackEpoch, cancelled = tonumber(rec[2]), tonumber(rec[3]), rec[4], true
    if #rec >= 6 then lostEnd, endBefore = tonumber(rec[5]), tonumber(rec[6]) end
  end
end
-- This replica's end among the holders as the step goes.
local heldEnd = tonumber(h[10]) or 0
local st = ruleState(h, r, now)
-- A give-back alone (no block wanted) leaves a counter of another window as it is stored: the
-- rule's window may have changed since its grant (a reload: the counter is the new rule's now),
-- and a fresh window would wipe its count. It credits nothing then.
local kept = want == 0 and h[1] and st.fresh
if kept then
  st = { s = tonumber(h[1]), c = tonumber(h[2]) or 0, t = tonumber(h[3]) or 0, fresh = false }
  if st.t <= now * 1000 then st.t = 0 end
end
local lu = 0
if tonumber(h[5]) == st.s then lu = tonumber(h[4]) or 0 end
local le, sq, rq = tonumber(h[6]) or 0, tonumber(h[7]) or 0, tonumber(h[8]) or 0
local changed = false
local fields = {}
-- Give-back: once per number, to the counter and window it came from only, never more than leases hold there.
if (giveBackNo > 0 and giveBackNo > (tonumber(h[9]) or 0)) or cancelled then
  if giveBackNo > 0 then
    fields[#fields + 1] = 'gb:' .. holder
    fields[#fields + 1] = giveBackNo
  end
  if not kept and h[11] == giveBackEpoch and giveBackFrom - (giveBackFrom % r.windowMs) == st.s then
    local credit = math.min(giveBack, lu)
    if credit > 0 then st.c, lu, changed = st.c - credit, lu - credit, true end
  end
end
-- This replica's lease ended (unless a newer grant of it is later): 'le' falls to the others' latest end.
local function latestHeld()
  local latest = 0
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 2) == 'h:' then
      local untilMs = tonumber(all[i + 1])
      if unitsOut(untilMs, now) then latest = math.max(latest, untilMs) else redis.call('HDEL', KEYS[1], all[i]) end
    end
  end
  return latest
end
if ends and heldEnd <= heldUntil then
  -- (Its grant's record stays: it may be a lost renewal's, granted in this lease's millisecond.)
  redis.call('HDEL', KEYS[1], 'h:' .. holder)
  heldEnd = 0
  le = latestHeld()
  changed = true
elseif ends and h[12] then
  -- A later grant of this holder (a lost renewal's, still to be named) keeps it among the holders:
  -- the lease ending here was that grant's end before it, so its name puts back none.
  local rec = fieldsOf(h[12])
  if #rec >= 6 and tonumber(rec[5]) == heldEnd and tonumber(rec[6]) == heldUntil then
    rec[6] = '0'
    redis.call('HSET', KEYS[1], 'g:' .. holder, table.concat(rec, ' '))
  end
end
-- A cancelled grant holds nothing: its holder's end goes back to what it was before it.
if lostEnd and heldEnd == lostEnd then
  if endBefore > 0 then redis.call('HSET', KEYS[1], 'h:' .. holder, string.format('%.0f', endBefore)) else redis.call('HDEL', KEYS[1], 'h:' .. holder) end
  -- (latestHeld drops an end that can hold no units any more, the one put back too.)
  heldEnd = 0
  if endBefore > 0 and unitsOut(endBefore, now) then heldEnd = endBefore end
  le = latestHeld()
  changed = true
end
-- A block: at most what is left / divisor, none below minBlock, none while a recall waits.
local granted = 0
if want > 0 and rq <= now and not r.gcra then
  local n = math.min(want, math.floor((r.limit - st.c) / divisor))
  if n >= minBlock then
    granted, st.c, lu, changed = n, st.c + n, lu + n, true
    if not h[11] then
      h[11] = string.format('%.0f', now * 1000)
      fields[#fields + 1] = 'ep'
      fields[#fields + 1] = h[11]
    end
    fields[#fields + 1] = 'h:' .. holder
    fields[#fields + 1] = now + leaseMs
    le = math.max(le, now + leaseMs)
    if askNo > 0 then
      fields[#fields + 1] = 'g:' .. holder
      fields[#fields + 1] = string.format('%.0f %.0f %.0f %s %.0f %.0f', askNo, n, st.s, h[11], now + leaseMs, heldEnd)
    end
  end
end
-- The counter's fields are written with any other (a fresh window's expiry with them: a hash
-- holding only a give-back's number would outlive its use).
if changed or #fields > 0 then ruleWrite(KEYS[1], st, r, now) end
if changed then
  sq = math.max(sq + 1, now * 1000)
  fields[#fields + 1] = 'lu'
  fields[#fields + 1] = lu
  fields[#fields + 1] = 'ls'
  fields[#fields + 1] = st.s
  fields[#fields + 1] = 'le'
  fields[#fields + 1] = string.format('%.0f', le)
  fields[#fields + 1] = 'sq'
  fields[#fields + 1] = string.format('%.0f', sq)
  ruleNotify(KEYS[1], sq, st.s, st.c, now, le, 0)
end
if #fields > 0 then redis.call('HSET', KEYS[1], unpack(fields)) end
return { granted, st.s, now - (now % DAY_MS), now, st.c, sq, h[11] or '0' }
`;
