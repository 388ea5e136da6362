import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { createMetrics } from '../../src/observability/metrics.js';
import { commandPath, describeNeeding } from '../helpers/needs-tool.js';
import { REPO_ROOT } from '../helpers/processes.js';

// The `observability` compose profile (Prometheus scraping every replica, Grafana provisioned with
// the dashboard), checked with Debian's docker-compose (`config`, no engine needed), and the
// dashboard's queries checked against the metrics the gateway really exports.

const composeFile = join(REPO_ROOT, 'docker-compose.yml');
const composeMissing = commandPath('docker-compose') ? undefined : 'docker-compose is not installed (apt-get install docker-compose)';
const read = (path: string) => readFileSync(join(REPO_ROOT, path), 'utf8');

interface Service {
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  profiles?: string[];
  ports?: Array<string | { published?: number | string; host_ip?: string }>;
  volumes?: string[];
  depends_on?: Record<string, unknown> | string[];
}

function composeConfig(options: string[], extraEnv: Record<string, string> = {}) {
  const result = spawnSync('docker-compose', ['-f', composeFile, ...options, 'config'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      TOLLGATE_ASSERTION_SECRET: 'compose-check-secret-0123456789abcdefghijklmnop',
      ...extraEnv,
    },
  });
  return {
    code: result.status,
    stderr: result.stderr,
    config: result.status === 0 ? (parseYaml(result.stdout) as { services: Record<string, Service> }) : undefined,
  };
}

const mounts = (service: Service) => JSON.stringify(service.volumes);

describeNeeding(composeMissing, 'docker-compose.yml, profile observability', () => {
  it('is accepted with --profile observability and with COMPOSE_PROFILES', () => {
    const flag = composeConfig(['--profile', 'observability']);
    expect(flag.code, flag.stderr).toBe(0);
    const env = composeConfig([], { COMPOSE_PROFILES: 'observability' });
    expect(env.code, env.stderr).toBe(0);
    for (const name of ['prometheus', 'grafana']) expect(flag.config!.services[name]!.profiles).toEqual(['observability']);
  });

  it('has Prometheus scrape every gateway replica of the file on its admin port', () => {
    const { services } = composeConfig(['--profile', 'observability']).config!;
    const gateways = Object.keys(services)
      .filter((name) => /^gateway-\d+$/.test(name))
      .sort();
    expect(gateways.length).toBeGreaterThanOrEqual(2);
    const prometheus = parseYaml(read('observability/prometheus.yml')) as {
      scrape_configs: Array<{ job_name: string; metrics_path: string; static_configs: Array<{ targets: string[] }> }>;
    };
    const job = prometheus.scrape_configs.find((j) => j.job_name === 'tollgate')!;
    expect(job.metrics_path).toBe('/metrics');
    expect(job.static_configs.flatMap((c) => c.targets).sort()).toEqual(gateways.map((g) => `${g}:9090`));
    expect(mounts(services.prometheus!)).toContain('observability/prometheus.yml');
  });

  it('provisions Grafana with the data source and the dashboard, published on loopback only', () => {
    const { services } = composeConfig(['--profile', 'observability']).config!;
    const grafana = services.grafana!;
    expect(mounts(grafana)).toContain('observability/grafana/provisioning');
    expect(mounts(grafana)).toContain('observability/grafana/dashboards');
    expect(JSON.stringify(grafana.ports)).toContain('127.0.0.1');
    const provider = parseYaml(read('observability/grafana/provisioning/dashboards/tollgate.yml')) as {
      providers: Array<{ options: { path: string } }>;
    };
    // docker-compose 1.x resolves short volume syntax to "source:target:mode".
    const mount = (grafana.volumes as string[])
      .map((v) => v.split(':'))
      .find(([source]) => source!.endsWith('observability/grafana/dashboards'))!;
    expect(provider.providers[0]!.options.path).toBe(mount[1]);
  });
});

describeNeeding(composeMissing, 'docker-compose.yml, the trace store (issue 24)', () => {
  it('runs Jaeger in the observability profile, OTLP/HTTP on this network, its UI on loopback only', () => {
    const { services } = composeConfig(['--profile', 'observability']).config!;
    const jaeger = services.jaeger!;
    expect(jaeger.profiles).toEqual(['observability']);
    expect(jaeger.image).toMatch(/^jaegertracing\/all-in-one:/);
    expect(jaeger.environment!.COLLECTOR_OTLP_ENABLED).toBe('true');
    expect(JSON.stringify(jaeger.ports)).toContain('127.0.0.1');
    expect(JSON.stringify(jaeger.ports)).not.toContain('4318');
  });

  it('has tracing off by default and every gateway and the backend export to Jaeger once OTEL_EXPORTER_OTLP_ENDPOINT says so', () => {
    const off = composeConfig(['--profile', 'observability']).config!.services;
    const on = composeConfig(['--profile', 'observability'], { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318' }).config!.services;
    const tracers = Object.keys(on).filter((name) => /^gateway-\d+$/.test(name) || name === 'backend');
    expect(tracers.length).toBeGreaterThanOrEqual(3);
    for (const name of tracers) {
      expect(off[name]!.environment!.OTEL_EXPORTER_OTLP_ENDPOINT, name).toBe('');
      expect(on[name]!.environment!.OTEL_EXPORTER_OTLP_ENDPOINT, name).toBe('http://jaeger:4318');
      expect(on[name]!.environment!.OTEL_TRACES_SAMPLER, name).toBe('parentbased_traceidratio');
    }
  });

  it('has Prometheus keep exemplars, and Grafana link their trace ids to the Jaeger data source', () => {
    const { services } = composeConfig(['--profile', 'observability']).config!;
    expect(services.prometheus!.command).toContain('--enable-feature=exemplar-storage');
    const prometheus = parseYaml(read('observability/grafana/provisioning/datasources/prometheus.yml')) as {
      datasources: Array<{ jsonData?: { exemplarTraceIdDestinations?: Array<{ name: string; datasourceUid: string }> } }>;
    };
    const jaeger = parseYaml(read('observability/grafana/provisioning/datasources/jaeger.yml')) as {
      datasources: Array<{ uid: string; type: string; url: string }>;
    };
    expect(jaeger.datasources[0]).toMatchObject({ type: 'jaeger', url: 'http://jaeger:16686' });
    // trace_id: the exemplar label the gateway writes (src/observability/deferred-metrics.ts).
    expect(prometheus.datasources[0]!.jsonData!.exemplarTraceIdDestinations).toEqual([
      { name: 'trace_id', datasourceUid: jaeger.datasources[0]!.uid },
    ]);
  });
});

describe('the Grafana dashboard', () => {
  const dashboard = JSON.parse(read('observability/grafana/dashboards/tollgate.json')) as {
    uid: string;
    panels: Array<{ type: string; title: string; datasource?: { uid: string }; targets?: Array<{ expr: string }> }>;
  };
  const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));

  it('queries only metrics the gateway exports (histograms by their _bucket series)', async () => {
    const exported = new Set<string>();
    for (const metric of await createMetrics().registry.getMetricsAsJSON()) {
      exported.add(metric.name);
      if (String(metric.type) === 'histogram') exported.add(`${metric.name}_bucket`);
    }
    expect(queries.length).toBeGreaterThan(10);
    for (const { panel, expr } of queries) {
      const names = expr.match(/\btollgate_[a-z0-9_]+/g) ?? [];
      // Only the replica count reads Prometheus's own `up` series.
      if (names.length === 0) expect(expr, panel).toMatch(/^sum\(up\{job="tollgate"/);
      for (const name of names) expect(exported.has(name), `${panel}: ${name}`).toBe(true);
    }
  });

  it('covers requests and decisions by plan, refusals and bans, upstream errors and latency, Redis and degraded mode', () => {
    const all = queries.map((q) => q.expr).join('\n');
    for (const metric of [
      'tollgate_requests_total',
      'tollgate_quota_decisions_total',
      'tollgate_bans_total',
      'tollgate_auth_failures_total',
      'tollgate_upstream_errors_total',
      'tollgate_request_duration_seconds_bucket',
      'tollgate_redis_duration_seconds_bucket',
      'tollgate_redis_errors_total',
      'tollgate_degraded',
      'tollgate_trace_spans_dropped_total',
    ]) {
      expect(all).toContain(metric);
    }
    expect(all).toMatch(/by \(plan, decision\)/);
  });

  it('shows exemplars on the request-latency panels: a latency spike links to its traces', () => {
    const latency = dashboard.panels.filter((p) =>
      (p.targets ?? []).some((t) => t.expr.includes('tollgate_request_duration_seconds_bucket')),
    ) as Array<{ title: string; targets: Array<{ expr: string; exemplar?: boolean }> }>;
    expect(latency.length).toBeGreaterThanOrEqual(2);
    for (const panel of latency) for (const target of panel.targets) expect(target.exemplar, panel.title).toBe(true);
  });

  it('uses the provisioned data source', () => {
    const source = parseYaml(read('observability/grafana/provisioning/datasources/prometheus.yml')) as {
      datasources: Array<{ uid: string; url: string }>;
    };
    expect(source.datasources[0]!.url).toBe('http://prometheus:9090');
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row'))
      expect(panel.datasource?.uid, panel.title).toBe(source.datasources[0]!.uid);
  });
});
