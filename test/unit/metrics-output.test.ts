import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/observability/metrics.js';

// The request-path metrics count in plain maps and reach prom-client on scrape
// (src/observability/deferred-metrics.ts). What /metrics prints must be what prom-client's own
// Counter and Histogram print for the same calls.

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const REDIS_BUCKETS = [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5];

function reference() {
  const registry = new Registry();
  const metrics = createMetrics();
  const own = (name: string) => metrics.registry.getSingleMetric(name)! as unknown as { help: string };
  const counter = (name: string, labelNames: string[]) => new Counter({ name, help: own(name).help, labelNames, registers: [registry] });
  const histogram = (name: string, labelNames: string[], buckets: number[]) =>
    new Histogram({ name, help: own(name).help, labelNames, buckets, registers: [registry] });
  return {
    registry,
    requests: counter('tollgate_requests_total', ['route', 'method', 'status']),
    requestSeconds: histogram('tollgate_request_duration_seconds', ['route'], BUCKETS),
    quotaDecisions: counter('tollgate_quota_decisions_total', ['plan', 'decision', 'source']),
    redisSeconds: histogram('tollgate_redis_duration_seconds', ['operation'], REDIS_BUCKETS),
  };
}

/** A fixed pseudo-random sequence of request-path observations, applied to both. */
function feed(target: ReturnType<typeof reference> | ReturnType<typeof createMetrics>): void {
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const routes = ['/v1/categories', '/v1/pets/{param}', '/'];
  for (let i = 0; i < 2000; i++) {
    const route = routes[Math.floor(next() * routes.length)]!;
    const seconds = next() ** 4 * 12; // mostly small, some past the last bucket
    target.requests.inc({ route, method: i % 7 ? 'GET' : 'POST', status: i % 11 ? '200' : 'aborted' });
    target.requestSeconds.observe({ route }, seconds);
    target.quotaDecisions.inc({ plan: i % 3 ? 'free' : 'pro', decision: i % 13 ? 'allowed' : 'limited', source: 'redis' });
    target.redisSeconds.observe({ operation: 'quota' }, seconds / 100);
    // Edge values land in the bucket they bound (le is "less than or equal").
    if (i % 100 === 0) target.requestSeconds.observe({ route }, BUCKETS[i % BUCKETS.length]!);
  }
}

const NAMES = [
  'tollgate_requests_total',
  'tollgate_request_duration_seconds',
  'tollgate_quota_decisions_total',
  'tollgate_redis_duration_seconds',
];

describe('/metrics output of the request-path metrics', () => {
  it('is what prom-client prints for the same observations, across two scrapes', async () => {
    const ours = createMetrics();
    const theirs = reference();
    for (let scrape = 0; scrape < 2; scrape++) {
      feed(ours);
      feed(theirs);
      for (const name of NAMES) {
        expect(await ours.registry.getSingleMetricAsString(name)).toBe(await theirs.registry.getSingleMetricAsString(name));
      }
      // The whole page, as scraped, holds each series once.
      const page = await ours.registry.metrics();
      expect(page.match(/^tollgate_requests_total\{route="\/",method="GET",status="200"\} /gm)).toHaveLength(1);
    }
  });

  it('prints the help and type lines before anything is counted', async () => {
    const ours = createMetrics();
    const theirs = reference();
    for (const name of NAMES) {
      expect(await ours.registry.getSingleMetricAsString(name)).toBe(await theirs.registry.getSingleMetricAsString(name));
    }
  });
});
