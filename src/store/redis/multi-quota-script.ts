import { CLOCK, QUOTA_STEP } from './quota-script.js';

// Several keys' QUOTA_SCRIPT steps of one event-loop turn in one call (a single server or
// Sentinel: the keys need not share a slot there). Each warm key (no lease: not hot) costs one
// EVALSHA per turn otherwise, and the call's own cost (the dispatch, KEYS and ARGV, TIME) was
// most of a step's Redis CPU; here it is paid once per call.
// KEYS     one tg:quota:{id} per section (no concurrency slots: those calls stay single)
// ARGV     per section, in KEYS' order: the number of its arguments, then QUOTA_SCRIPT's ARGV for
//          that key exactly as a single call sends it (its costs included)
// Reply    the sections' QUOTA_SCRIPT replies one after another (QUOTA_REPLY_LENGTH numbers per
//          cost of each); a section whose step raised an error (a key holding another type) is
//          that error alone, one element in its place: the other sections are decided and told,
//          as they would be in calls of their own. A script's writes are not undone by its error,
//          so failing the whole call would leave the sections before it charged for requests told
//          they failed.
// Every section is decided at one `now` (the first section's nowMs, or one Redis TIME), as if its
// call came within that millisecond; each is its own step, with its own notices, recall and
// usage, exactly as a call of its own. Sections are independent: a key's requests are all in one
// section (redis-quota-store.ts), so all-or-nothing per request is QUOTA_SCRIPT's, unchanged.
// KEYS and ARGV are set to each section's before its step: QUOTA_SCRIPT and CLOCK's functions
// read them as a single call's.
export const MULTI_QUOTA_SCRIPT = `${CLOCK}
local function quotaStep()
${QUOTA_STEP}
end
local all, keys = {}, {}
for i = 1, #ARGV do all[i] = ARGV[i] end
for i = 1, #KEYS do keys[i] = KEYS[i] end
for i = #KEYS, 2, -1 do KEYS[i] = nil end
local now, out, at = nil, {}, 1
for k = 1, #keys do
  local n = tonumber(all[at])
  for i = #ARGV, 1, -1 do ARGV[i] = nil end
  for i = 1, n do ARGV[i] = all[at + i] end
  at = at + 1 + n
  if now == nil then now = string.format('%.0f', clock(ARGV[10])) end
  ARGV[10] = now
  KEYS[1] = keys[k]
  local ok, replies = pcall(quotaStep)
  if ok then
    for j = 1, #replies do out[#out + 1] = replies[j] end
  elseif type(replies) == 'table' and replies.err then
    out[#out + 1] = replies
  else
    out[#out + 1] = redis.error_reply(tostring(replies))
  end
end
return out
`;
