import { CLOCK, QUOTA_ARGS_BEFORE_COSTS, QUOTA_REPLY_LENGTH, QUOTA_STEP } from './quota-script.js';
import { QUOTA_NOTICE_CHANNEL } from './redis-keys.js';

// Limit rules (src/quota/limit-rules.ts: the rules; this is their Lua transcription). A rule's
// counter is one hash `tg:limit:<name>:{<digest>}` (keys.ts limitKey): 's' the fixed window's
// start, 'c' its count, 't' a gcra rule's TAT in µs. The hash is self-describing (an ended window
// or a passed TAT reads as empty), so Redis's expiry, a minute after, only collects garbage.

/** Numbers per rule in ARGV: limit, windowMs, gcra (1 or 0), intervalUs, burst, cost. */
export const RULE_ARGS = 6;

export const RULE_PIECES = `
-- A rule's RULE_ARGS numbers in one argument, separated by spaces (RULES_QUOTA_SCRIPT).
local function rulePacked(text)
  local n = {}
  for v in string.gmatch(text, '%S+') do n[#n + 1] = tonumber(v) end
  return { limit = n[1], windowMs = n[2], gcra = n[3] == 1, intervalUs = n[4], burst = n[5], cost = n[6] }
end
local function ruleArgs(at)
  return { limit = tonumber(ARGV[at]), windowMs = tonumber(ARGV[at + 1]), gcra = ARGV[at + 2] == '1',
    intervalUs = tonumber(ARGV[at + 3]), burst = tonumber(ARGV[at + 4]), cost = tonumber(ARGV[at + 5]) }
end
-- ruleCurrent(): the counter as of now, from its stored fields h = { s, c, t } (HMGET's reply).
local function ruleState(h, r, now)
  local start = now - (now % r.windowMs)
  local st = { s = start, c = 0, t = tonumber(h[3]) or 0, fresh = true }
  if tonumber(h[1]) == start then st.c, st.fresh = tonumber(h[2]) or 0, false end
  if st.t <= now * 1000 then st.t = 0 end
  return st
end
local function ruleCurrent(key, r, now)
  return ruleState(redis.call('HMGET', key, 's', 'c', 't'), r, now)
end
-- ruleAdmit(): the counter after the request's cost, or nil when it does not fit.
local function ruleAdmit(st, r, now)
  if r.gcra then
    local t = admit(st.t, now * 1000, r.cost, r.intervalUs, r.burst)
    if t == nil then return nil end
    return { s = st.s, c = st.c + r.cost, t = t }
  end
  if st.c + r.cost > r.limit then return nil end
  return { s = st.s, c = st.c + r.cost, t = st.t, fresh = st.fresh }
end
-- ruleExpiresAtMs(), plus a minute: only garbage collection. A fixed window's expiry moves only
-- when a new window begins ('fresh'); a gcra rule's with every TAT. nil: the expiry stays.
local function ruleTtl(st, r, now)
  if not r.gcra and not st.fresh then return nil end
  local ex = math.max(st.s + r.windowMs, math.ceil(st.t / 1000))
  return string.format('%.0f', ex - now + MINUTE_MS)
end
-- A rule counter's lease notice (rule-lease-script.ts), in QUOTA_SCRIPT's notice layout so that
-- quota-leases.ts reads it as a plan's: the rule's window start where the minute's is, the UTC
-- day, both counts the rule's count, no TAT, no ban, no month; then 'le' and the recall flag.
-- pcall: as QUOTA_SCRIPT's notify.
local function ruleNotify(key, seq, start, count, now, le, recall)
  redis.pcall('PUBLISH', '${QUOTA_NOTICE_CHANNEL}', table.concat({ key, string.format('%.0f', seq), start, count,
    now - (now % DAY_MS), count, 0, 0, now, 0, 0, string.format('%.0f', le), recall }, ' '))
end
local function ruleWrite(key, st, r, now)
  redis.call('HSET', key, 's', st.s, 'c', st.c, 't', string.format('%.0f', st.t))
  local ttl = ruleTtl(st, r, now)
  if ttl then redis.call('PEXPIRE', key, ttl) end
end
`;

// The rules and plan steps of one consumer's requests of one event-loop turn, in one call (a
// single server or Sentinel: the rule keys need not share the consumer's slot there), decided one
// after another at one `now`, as the same requests sent one at a time within that millisecond.
// KEYS[1]  tg:quota:{id}; KEYS[2..] the rules' counters the requests name
// ARGV     QUOTA_SCRIPT's arguments before its costs, then the number of requests, the number of
//          rules, then per rule the index of its counter in KEYS and its RULE_ARGS numbers in one
//          argument, separated by spaces (the same text for every call: redis-limit-rules.ts makes
//          it once per charge; one argument where there were six, each of which cost the client
//          its own framing), then per request: its cost, its number of rules, and the index of
//          each among the rules (from 1)
// Reply    per request: QUOTA_SCRIPT's reply for it, then refusedBy (the 0-based rule that did not
//          fit, -1: none), then per rule its counter after the step: count, TAT (its window's
//          start is always the current one, now - now % windowMs: the caller knows it)
// For each request every rule is checked first; only when all fit does QUOTA_SCRIPT's step run for
// it (its ban, windows, credits, leases' recall and notices as for any request: one notice per
// step, as for the plan's requests of one turn); only when it admits are the rules charged. A
// rule's refusal changes nothing: no window, no ban count (limit-rules.ts). QUOTA_STEP's quotaStep is
// given this call's 'now' (every part decides at one time) and the run's costs.
// The plan's step is the costly part (its hash, usage and expiry written each time), so it runs
// once per run of requests whose rules all fit even with every earlier one of the run charged, as
// QUOTA_SCRIPT decides the costs of one turn: a counter only fills, so each of them fits whatever
// the plan answers the others, and the run is decided as one request after another would be. The
// rules are then charged for the requests the plan admitted, in order. A request a rule refuses
// ends the run; it is checked again on the counters as the run left them (without the charges of
// requests the plan refused). Counters are read once per call and written once at its end: what
// one read and one write per request would leave (the expiry of the last write that set one).
export const RULES_QUOTA_SCRIPT = `${CLOCK}${RULE_PIECES}${QUOTA_STEP}
local plan = planAt(0)
local now = clock(plan.nowArg)
local costAt = ${QUOTA_ARGS_BEFORE_COSTS + 1}
local rules, requests = {}, {}
local at = costAt + 2
for d = 1, tonumber(ARGV[costAt + 1]) do
  rules[d] = rulePacked(ARGV[at + 1])
  rules[d].key = KEYS[tonumber(ARGV[at])]
  at = at + 2
end
for q = 1, tonumber(ARGV[costAt]) do
  local req = { cost = ARGV[at], rules = {} }
  local m = tonumber(ARGV[at + 1])
  at = at + 2
  for i = 1, m do
    req.rules[i] = rules[tonumber(ARGV[at])]
    at = at + 1
  end
  requests[q] = req
end
-- Counters as stored ({ s, c, t }), read at first use; those written, in order, and their expiries.
-- Leases of the counters (rule-lease-script.ts), read with them: 'le' and 'sq'.
local stored, written, ttls, leased = {}, {}, {}, {}
local function storedOf(key)
  if stored[key] == nil then
    local h = redis.call('HMGET', key, 's', 'c', 't', 'le', 'sq')
    stored[key] = { h[1], h[2], h[3] }
    leased[key] = { le = tonumber(h[4]) or 0, sq = tonumber(h[5]) or 0 }
  end
  return stored[key]
end
local function nextRuleSeq(key)
  leased[key].sq = math.max(leased[key].sq + 1, now * 1000)
  return leased[key].sq
end
local function fieldsOf(st)
  return { st.s, st.c, tonumber(string.format('%.0f', st.t)) }
end
local function charge(key, st, r)
  if ttls[key] == nil then written[#written + 1] = key; ttls[key] = false end
  stored[key] = fieldsOf(st)
  ttls[key] = ruleTtl(st, r, now) or ttls[key]
end
-- QUOTA_SCRIPT's step for the costs of 'run'.
local function planFor(run)
  local costs = {}
  for k, req in ipairs(run) do costs[k] = req.cost end
  return quotaStep(plan, now, costs, 1, #costs, nil, {})
end
local out = {}
local function answer(replies, from, refusedBy, states)
  for j = from, from + ${QUOTA_REPLY_LENGTH} - 1 do out[#out + 1] = replies[j] end
  out[#out + 1] = refusedBy
  for i = 1, #states do
    out[#out + 1] = states[i].c
    out[#out + 1] = states[i].t
  end
end
local q, n = 1, #requests
while q <= n do
  -- The run from q: each request's rules fit with the run's earlier requests charged (in 'trial').
  local trial, run = {}, {}
  for j = q, n do
    local req, nextStates = requests[j], {}
    for i, r in ipairs(req.rules) do
      nextStates[i] = ruleAdmit(ruleState(trial[r.key] or storedOf(r.key), r, now), r, now)
      if nextStates[i] == nil then nextStates = nil; break end
    end
    if nextStates == nil then break end
    for i, r in ipairs(req.rules) do trial[r.key] = fieldsOf(nextStates[i]) end
    req.trial = nextStates
    run[#run + 1] = req
  end
  if #run > 0 then
    local replies = planFor(run)
    -- The plan admitted the whole run (the usual answer): its counters are the trial's.
    local all = true
    for k = 1, #run do
      if replies[(k - 1) * ${QUOTA_REPLY_LENGTH} + 1] ~= 0 then all = false end
    end
    for k, req in ipairs(run) do
      local states = {}
      if all then
        states = req.trial
        for i, r in ipairs(req.rules) do charge(r.key, states[i], r) end
      else
        for i, r in ipairs(req.rules) do states[i] = ruleState(storedOf(r.key), r, now) end
      end
      if not all and replies[(k - 1) * ${QUOTA_REPLY_LENGTH} + 1] == 0 then
        -- Fits: it did with more charged (trial), and a counter with less in it admits what one with more did.
        for i, r in ipairs(req.rules) do states[i] = ruleAdmit(states[i], r, now) end
        for i, r in ipairs(req.rules) do charge(r.key, states[i], r) end
      end
      answer(replies, (k - 1) * ${QUOTA_REPLY_LENGTH} + 1, -1, states)
    end
    q = q + #run
  else
    -- A rule refuses the request at q on the counters as they are: the plan is not asked, unless
    -- it is banned (the ban answers, and nothing is charged).
    local req, states, refusedBy = requests[q], {}, -1
    for i, r in ipairs(req.rules) do
      states[i] = ruleState(storedOf(r.key), r, now)
      if refusedBy < 0 and ruleAdmit(states[i], r, now) == nil then refusedBy = i - 1 end
    end
    local replies
    local s = current(now, plan.edges)
    local lease = leased[req.rules[refusedBy + 1].key]
    if s.bu <= now and plan.recall and unitsOut(lease.le, now) then
      -- Units out on leases of the refusing counter may be what it lacks: recalled first, as
      -- QUOTA_STEP recalls the plan's (the holders give back; no block until 'le'; decided again).
      local key = req.rules[refusedBy + 1].key
      local seq = nextRuleSeq(key)
      redis.call('HSET', key, 'rq', string.format('%.0f', recallWant(lease.le, now)), 'sq', string.format('%.0f', seq))
      ruleNotify(key, seq, states[refusedBy + 1].s, states[refusedBy + 1].c, now, lease.le, 1)
      replies = reply(3, s, now, tonumber(req.cost))
      replies[#replies + 1] = seq
      replies[#replies + 1] = lease.le
      replies[#replies + 1] = s.mn
    elseif s.bu <= now then
      replies = reply(1, s, now, tonumber(req.cost))
      replies[#replies + 1] = 0
      replies[#replies + 1] = 0
      replies[#replies + 1] = s.mn
    else
      refusedBy = -1
      replies = planFor({ req })
    end
    answer(replies, 1, refusedBy, states)
    q = q + 1
  end
end
for _, key in ipairs(written) do
  local h = stored[key]
  if leased[key].le > now then
    -- A lease of the counter may still admit: its holders hear of the new count (one notice per call).
    local seq = nextRuleSeq(key)
    redis.call('HSET', key, 's', h[1], 'c', h[2], 't', string.format('%.0f', h[3]), 'sq', string.format('%.0f', seq))
    ruleNotify(key, seq, h[1], h[2], now, leased[key].le, 0)
  else
    redis.call('HSET', key, 's', h[1], 'c', h[2], 't', string.format('%.0f', h[3]))
  end
  if ttls[key] then redis.call('PEXPIRE', key, ttls[key]) end
end
return out
`;

// Redis Cluster: a rule's counter lives in another slot than the consumer's, so each is reserved
// on its own, then the plan decided, then each kept or given back (redis-limit-rules.ts).
// KEYS[1] the counter; ARGV nowMs ('' = Redis TIME), then the rule's RULE_ARGS numbers.
// Reply { reserved (1 or 0), start, count, TAT, nowMs }: the counter after (charged only if reserved).
export const RULE_RESERVE_SCRIPT = `${CLOCK}${RULE_PIECES}
local now = clock(ARGV[1])
local r = ruleArgs(2)
local st = ruleCurrent(KEYS[1], r, now)
local nextState = ruleAdmit(st, r, now)
if nextState == nil then return { 0, st.s, st.c, st.t, now } end
ruleWrite(KEYS[1], nextState, r, now)
return { 1, nextState.s, nextState.c, nextState.t, now }
`;

// Gives a reservation back. KEYS[1] the counter; ARGV nowMs, the rule's RULE_ARGS numbers, then the
// reservation's window start and the TAT it left. A fixed window is credited only while it is the
// one reserved in; a gcra TAT only while it is still the one the reservation left (nothing charged
// after it): otherwise those units stay counted until the window ends or the TAT passes
// (over-counted, never over-admitted).
export const RULE_RELEASE_SCRIPT = `${CLOCK}${RULE_PIECES}
local now = clock(ARGV[1])
local r = ruleArgs(2)
local st = ruleCurrent(KEYS[1], r, now)
local start, tat = tonumber(ARGV[${2 + RULE_ARGS}]), tonumber(ARGV[${3 + RULE_ARGS}])
local changed = false
if st.s == start and st.c > 0 then st.c = math.max(0, st.c - r.cost); changed = true end
if r.gcra and tat > 0 and st.t == tat then st.t = tat - r.cost * r.intervalUs; changed = true end
if changed then ruleWrite(KEYS[1], st, r, now) end
return 1
`;
