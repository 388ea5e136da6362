// The implementation is shared with the benchmark: test/harness/redis-server.ts.
export { RedisServer as TestRedis } from '../harness/redis-server.js';
