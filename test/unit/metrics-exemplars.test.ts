import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/observability/metrics.js';
import { scraper } from '../../src/observability/scrape.js';

// Exemplars: the request-duration histogram names the trace of its last sampled observation per
// bucket, printed only when the scrape asks for OpenMetrics; the Prometheus page stays as it was.

const TRACE_A = 'a'.repeat(32);
const TRACE_B = 'b'.repeat(32);
const OPEN_METRICS = 'application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5';

describe('request-duration exemplars', () => {
  it('OpenMetrics: the last sampled trace of each bucket, on that bucket only', async () => {
    const metrics = createMetrics();
    metrics.requestSeconds.observe({ route: '/v1/categories' }, 0.003, TRACE_A);
    metrics.requestSeconds.observe({ route: '/v1/categories' }, 0.004, TRACE_B);
    metrics.requestSeconds.observe({ route: '/v1/categories' }, 0.2);
    metrics.requestSeconds.observe({ route: '/v1/categories' }, 30, TRACE_A);
    const page = await scraper(metrics.registry)(OPEN_METRICS);
    expect(page.contentType).toContain('application/openmetrics-text');
    const lines = page.body.split('\n').filter((l) => l.startsWith('tollgate_request_duration_seconds_bucket'));
    const withExemplar = lines.filter((l) => l.includes(' # {'));
    expect(withExemplar).toHaveLength(2);
    expect(withExemplar[0]).toMatch(new RegExp(`le="0.005".* 2 # \\{trace_id="${TRACE_B}"\\} 0.004 \\d+(\\.\\d+)?$`));
    expect(withExemplar[1]).toMatch(new RegExp(`le="\\+Inf".* 4 # \\{trace_id="${TRACE_A}"\\} 30 `));
    expect(page.body.endsWith('# EOF\n')).toBe(true);
  });

  it('the Prometheus page before and after an OpenMetrics one is the same, with counters named *_total and no exemplar', async () => {
    const metrics = createMetrics();
    metrics.requests.inc({ route: '/v1/categories', method: 'GET', status: '200' });
    metrics.requestSeconds.observe({ route: '/v1/categories' }, 0.003, TRACE_A);
    const scrape = scraper(metrics.registry);
    const strip = (body: string) => body.replace(/^(tollgate_process|tollgate_nodejs).*$/gm, '');
    const before = await scrape(undefined);
    const [open, during] = await Promise.all([scrape(OPEN_METRICS), scrape('text/plain')]);
    const after = await scrape('*/*');
    expect(open.body).toContain('tollgate_requests_total{');
    expect(open.body).toContain('# TYPE tollgate_requests counter');
    for (const page of [during, after]) {
      expect(page.contentType).toBe(before.contentType);
      expect(strip(page.body)).toBe(strip(before.body));
    }
    expect(after.body).toContain('# TYPE tollgate_requests_total counter');
    expect(after.body).not.toContain('# {');
  });
});
