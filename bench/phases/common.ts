import type { RedisCounts } from '../redis-stats.js';
import type { LatencyStats, RedisPerRequest } from '../report.js';
import type { Samples } from '../samples.js';

export const say = (text: string) => process.stdout.write(`${text}\n`);

export function latencyStats(samples: Samples): LatencyStats {
  return {
    p50Ms: samples.quantile(0.5),
    p90Ms: samples.quantile(0.9),
    p99Ms: samples.quantile(0.99),
    maxMs: samples.quantile(1),
    count: samples.count,
  };
}

export function perRequest(counts: RedisCounts, requests: number): RedisPerRequest {
  const divide = (calls: Record<string, number>) => Object.fromEntries(Object.entries(calls).map(([name, n]) => [name, n / requests]));
  return {
    requests,
    commands: divide(counts.commands),
    commandsPerRequest: counts.totalCommands / requests,
    scripted: divide(counts.scripted),
    readsPerRequest: counts.reads / requests,
  };
}
