import { CLOCK, QUOTA_ARGS_BEFORE_COSTS, QUOTA_STEP } from './quota-script.js';

// Several keys' QUOTA_SCRIPT steps of one event-loop turn in one call (a single server or
// Sentinel: the keys need not share a slot there). Each warm key (no lease: not hot) costs one
// EVALSHA per turn otherwise, and the call's own cost (the dispatch, KEYS and ARGV, TIME) was
// most of a step's Redis CPU; here it is paid once per call.
// KEYS     one tg:quota:{id} per section (no concurrency slots: those calls stay single)
// ARGV     the number of plans, then each plan: QUOTA_SCRIPT's ARGV before the costs
//          (QUOTA_ARGS_BEFORE_COSTS, the same for every key of that plan in one turn: sent once,
//          read once); then per section, in KEYS' order: its plan's number (from 1), the number of
//          its costs, and the costs
// Reply    the sections' QUOTA_SCRIPT replies one after another (QUOTA_REPLY_LENGTH numbers per
//          cost of each); a section whose step raised an error (a key holding another type) is
//          that error alone, one element in its place (what it had added to the reply is taken
//          out): the other sections are decided and told, as they would be in calls of their own.
//          A script's writes are not undone by its error, so failing the whole call would leave
//          the sections before it charged for requests told they failed.
// Every section is decided at one `now` (the first plan's nowMs, or one Redis TIME), as if its
// call came within that millisecond; each is its own step, with its own notices, recall and
// usage, exactly as a call of its own. Sections are independent: a key's requests are all in one
// section (redis-quota-store.ts), so all-or-nothing per request is QUOTA_SCRIPT's, unchanged.
// KEYS[1] is set to each section's key before its step: CLOCK's functions read it as a single call's.
export const MULTI_QUOTA_SCRIPT = `${CLOCK}${QUOTA_STEP}
local plans, at = {}, 2
for p = 1, tonumber(ARGV[1]) do
  plans[p] = planAt(at - 1)
  at = at + ${QUOTA_ARGS_BEFORE_COSTS}
end
local now = clock(plans[1].nowArg)
local out = {}
for k = 1, #KEYS do
  local n = num(ARGV[at + 1])
  KEYS[1] = KEYS[k]
  local before = #out
  local ok, err = pcall(quotaStep, plans[num(ARGV[at])], now, ARGV, at + 2, at + 1 + n, nil, out)
  if not ok then
    for i = #out, before + 1, -1 do out[i] = nil end
    if type(err) == 'table' and err.err then out[before + 1] = err else out[before + 1] = redis.error_reply(tostring(err)) end
  end
  at = at + 2 + n
end
return out
`;
