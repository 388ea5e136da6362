// The quota decision of quota-state.ts `decide`, step for step, as one Lua script: one round
// trip, atomic across replicas. All state of one API key is one hash under the key's `{id}` hash
// tag (Cluster-safe). Time comes from Redis (TIME; effects replication, Redis ≥ 5), so replicas
// with skewed clocks still agree on window edges.
//
// KEYS[1]  tg:quota:{id}
// ARGV     perMinute, perDay, banAfterRejections, banWindowMs, banDurationMs, cost, reportedRejections
// Reply    { verdict (0 allowed, 1 limited, 2 banned), minuteCount, dayCount, nowMs, bannedUntilMs }
export const QUOTA_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local minuteStart = now - (now % 60000)
local dayStart = now - (now % 86400000)
local perMinute, perDay = tonumber(ARGV[1]), tonumber(ARGV[2])
local banAfter, banWindowMs, banDurationMs = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local cost, reported = tonumber(ARGV[6]), tonumber(ARGV[7])

local h = redis.call('HMGET', KEYS[1], 'ms', 'mc', 'ds', 'dc', 'rs', 'rc', 'bu')
local mc = (tonumber(h[1]) == minuteStart) and (tonumber(h[2]) or 0) or 0
local dc = (tonumber(h[3]) == dayStart) and (tonumber(h[4]) or 0) or 0
local bu = tonumber(h[7]) or 0
if bu > now then return {2, mc, dc, now, bu} end

local expireAt = dayStart + 86400000
if cost > 0 and mc + cost <= perMinute and dc + cost <= perDay then
  mc = mc + cost
  dc = dc + cost
  redis.call('HSET', KEYS[1], 'ms', minuteStart, 'mc', mc, 'ds', dayStart, 'dc', dc)
  redis.call('PEXPIREAT', KEYS[1], expireAt)
  return {0, mc, dc, now, 0}
end

local rs, rc = tonumber(h[5]) or 0, tonumber(h[6]) or 0
if now - rs >= banWindowMs then rs = now; rc = 0 end
if cost > 0 then rc = rc + 1 else rc = rc + reported end
if rc >= banAfter then
  bu = now + banDurationMs
  redis.call('HSET', KEYS[1], 'bu', bu, 'rs', 0, 'rc', 0)
  redis.call('PEXPIREAT', KEYS[1], math.max(expireAt, bu))
  return {2, mc, dc, now, bu}
end
redis.call('HSET', KEYS[1], 'rs', rs, 'rc', rc)
redis.call('PEXPIREAT', KEYS[1], math.max(expireAt, rs + banWindowMs))
return {1, mc, dc, now, 0}
`;

// Use without consuming. Reply as above, verdict 0 or 2.
export const USAGE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'ms', 'mc', 'ds', 'dc', 'bu')
local mc = (tonumber(h[1]) == now - (now % 60000)) and (tonumber(h[2]) or 0) or 0
local dc = (tonumber(h[3]) == now - (now % 86400000)) and (tonumber(h[4]) or 0) or 0
local bu = tonumber(h[5]) or 0
if bu > now then return {2, mc, dc, now, bu} end
return {0, mc, dc, now, 0}
`;

// Lifts a ban. Reply 1 if a ban was in force.
export const UNBAN_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local bu = tonumber(redis.call('HGET', KEYS[1], 'bu')) or 0
redis.call('HDEL', KEYS[1], 'bu', 'rs', 'rc')
if bu > now then return 1 end
return 0
`;
