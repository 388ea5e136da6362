import { CLOCK } from './quota-script.js';

// Concurrency slots (gateway/concurrency-slots.ts): the sorted set tg:slots:{subject}, in the
// subject's hash tag (one Cluster slot with its quota hash), member `<replicaId>:<n>` scored by
// the end of its life on Redis's clock (or the injected test clock, as the quota script). A slot
// past its life is removed before counting, so a replica that died gives its slots back when they
// end. QUOTA_SCRIPT takes a slot in the quota step itself (its KEYS[2]); these take one alone (for
// subjects other than a consumer's) and keep the held ones alive.

// KEYS[1] tg:slots:{subject}   ARGV nowMs ('' = Redis TIME), max, lifeMs, member
// Reply   1 taken, 0 none free
export const TAKE_SLOT_SCRIPT = `${CLOCK}
local now = clock(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[4])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) + MINUTE_MS)
return 1
`;

// KEYS[1] tg:slots:{subject}   ARGV nowMs ('' = Redis TIME), lifeMs, member...
// Every member listed lives lifeMs from now. A member that ended meanwhile (this replica stalled
// past its life) is added back: its request is still in flight, and counting it keeps the set true.
export const RENEW_SLOTS_SCRIPT = `${CLOCK}
local now = clock(ARGV[1])
local life = tonumber(ARGV[2])
for i = 3, #ARGV do redis.call('ZADD', KEYS[1], now + life, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], life + MINUTE_MS)
return #ARGV - 2
`;

// KEYS[1] tg:slots:{subject}   ARGV nowMs ('' = Redis TIME). Reply: the slots alive.
export const COUNT_SLOTS_SCRIPT = `${CLOCK}
return redis.call('ZCOUNT', KEYS[1], '(' .. clock(ARGV[1]), '+inf')
`;
