import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ConfigMap, Service } from 'kubernetes-models/v1';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import type { IContainer, IPodSpec } from 'kubernetes-models/v1';
import { loadSettings } from '../../src/config/settings.js';
import { commandPath, describeNeeding } from '../helpers/needs-tool.js';
import { REPO_ROOT } from '../helpers/processes.js';

// deploy/kubernetes/ without a cluster: every overlay rendered by kustomize (kubectl's built-in
// one), every object validated against the Kubernetes API schemas (kubernetes-models: types,
// required fields, enums, formats; it does not reject unknown fields, which the schemas allow),
// and the invariants that tie the manifests to the code checked here, so that a change on either
// side that breaks the other fails this file.

const OVERLAYS_DIR = join(REPO_ROOT, 'deploy/kubernetes/overlays');
const overlays = readdirSync(OVERLAYS_DIR);
const kubectl = commandPath('kubectl');
const packageVersion = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** The API model of each kind we ship; a kind missing here fails the test (nothing goes unvalidated). */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
};

const rendered = new Map<string, K8sObject[]>();

/** `kubectl kustomize` of one overlay, once per file run; each test gets its own copy. */
function render(overlay: string): K8sObject[] {
  if (!rendered.has(overlay)) rendered.set(overlay, renderNow(overlay));
  return structuredClone(rendered.get(overlay)!);
}

function renderNow(overlay: string): K8sObject[] {
  const result = spawnSync(kubectl!, ['kustomize', join(OVERLAYS_DIR, overlay)], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`kubectl kustomize ${overlay} failed: ${result.stderr}`);
  return parseAllDocuments(result.stdout).map((doc) => doc.toJS() as K8sObject);
}

const find = <T = K8sObject>(objects: K8sObject[], kind: string, name: string): T => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name}`);
  return found as T;
};

type Workload = K8sObject & {
  spec: {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    strategy?: { type: string; rollingUpdate?: { maxUnavailable?: number | string } };
    template: { metadata: { labels: Record<string, string> }; spec: IPodSpec };
  };
};

const envOf = (container: IContainer): Record<string, string | undefined> =>
  Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]));

/** Every string literal of the source tree, where the environment variable names live. */
const sourceText = (() => {
  const texts: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) texts.push(readFileSync(path, 'utf8'));
    }
  };
  walk(join(REPO_ROOT, 'src'));
  return texts.join('\n');
})();
const userDocs = [
  join(REPO_ROOT, 'README.md'),
  ...readdirSync(join(REPO_ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => join(REPO_ROOT, 'docs', f)),
]
  .map((path) => readFileSync(path, 'utf8'))
  .join('\n');
const kubernetesDoc = readFileSync(join(REPO_ROOT, 'docs/kubernetes.md'), 'utf8');

/** The admin listener's GET paths, as admin-server.ts answers them. */
const adminServer = readFileSync(join(REPO_ROOT, 'src/admin/admin-server.ts'), 'utf8');
/** The image's config directory (Dockerfile ENV TOLLGATE_CONFIG_DIR). */
const imageConfigDir = /TOLLGATE_CONFIG_DIR=(\S+)/.exec(readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8'))![1];

describeNeeding(kubectl ? undefined : 'kubectl is not installed (apt-get install kubernetes-client)', 'deploy/kubernetes', () => {
  it('has the two overlays', () => {
    expect(overlays.sort()).toEqual(['external-redis', 'single-redis']);
  });

  for (const overlay of overlays) {
    describeOverlay(overlay);
  }
});

function describeOverlay(overlay: string): void {
  const objects = () => render(overlay);

  it(`${overlay}: renders, and every object is valid against the Kubernetes API schemas`, () => {
    const rendered = objects();
    expect(rendered.length).toBeGreaterThan(5);
    for (const object of rendered) {
      const model = MODELS[`${object.apiVersion}/${object.kind}`];
      expect(model, `${object.apiVersion} ${object.kind} has a model`).toBeDefined();
      expect(() => new model!(object as never).validate(), `${object.kind} ${object.metadata.name}`).not.toThrow();
    }
  });

  it(`${overlay}: probes on the admin listener's own paths and port; liveness never on readiness`, () => {
    const gateway = find<Workload>(objects(), 'Deployment', 'tollgate-gateway');
    const container = gateway.spec.template.spec.containers[0]!;
    const env = envOf(container);
    const admin = container.ports!.find((p) => p.name === 'admin')!;
    expect(String(admin.containerPort)).toBe(env.ADMIN_PORT);
    // Reachable by the kubelet: not loopback.
    expect(env.ADMIN_HOST).toBe('0.0.0.0');
    const probe = (p: IContainer['livenessProbe']) => ({ path: p?.httpGet?.path, port: p?.httpGet?.port });
    expect(probe(container.livenessProbe)).toEqual({ path: '/healthz', port: 'admin' });
    expect(probe(container.readinessProbe)).toEqual({ path: '/readyz', port: 'admin' });
    expect(probe(container.startupProbe)).toEqual({ path: '/healthz', port: 'admin' });
    // What admin-server.ts answers: /healthz unconditionally (the process is up), /readyz from the checks.
    expect(adminServer).toMatch(/path === '\/healthz'\) return sendJson\(res, 200,/);
    expect(adminServer).toContain("path === '/readyz'");
  });

  it(`${overlay}: grace period longer than the drain plus the shutdown grace`, () => {
    for (const name of ['tollgate-gateway', 'tollgate-backend']) {
      const workload = find<Workload>(objects(), 'Deployment', name);
      const container = workload.spec.template.spec.containers[0]!;
      // The settings the process itself computes from the shipped config and this environment.
      const settings = loadSettings({ ...envOf(container), TOLLGATE_CONFIG_DIR: join(REPO_ROOT, 'config') });
      const drain = settings.gateway.drainDelaySeconds;
      expect(drain, name).toBeGreaterThanOrEqual(5);
      expect(workload.spec.template.spec.terminationGracePeriodSeconds, name).toBeGreaterThan(
        drain + settings.gateway.shutdownGraceSeconds,
      );
      expect(workload.spec.strategy?.rollingUpdate?.maxUnavailable, name).toBe(0);
    }
  });

  it(`${overlay}: HPA and PDB select the Deployments; at least two gateways; QUOTA_REPLICAS is the HPA's minimum`, () => {
    const rendered = objects();
    const gateway = find<Workload>(rendered, 'Deployment', 'tollgate-gateway');
    const hpa = find<HorizontalPodAutoscaler>(rendered, 'HorizontalPodAutoscaler', 'tollgate-gateway');
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'tollgate-gateway' });
    expect(hpa.spec.metrics).toContainEqual(
      expect.objectContaining({ type: 'Resource', resource: expect.objectContaining({ name: 'cpu' }) }),
    );
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    expect(gateway.spec.replicas).toBe(hpa.spec.minReplicas);
    expect(envOf(gateway.spec.template.spec.containers[0]!).QUOTA_REPLICAS).toBe(String(hpa.spec.minReplicas));
    // Utilization is measured against the request: there must be one.
    expect(gateway.spec.template.spec.containers[0]!.resources?.requests?.cpu).toBeTruthy();

    for (const name of ['tollgate-gateway', 'tollgate-backend']) {
      const workload = find<Workload>(rendered, 'Deployment', name);
      const podLabels = workload.spec.template.metadata.labels;
      const pdb = find<PodDisruptionBudget>(rendered, 'PodDisruptionBudget', name);
      const selects = (selector: Record<string, string>) => Object.entries(selector).every(([k, v]) => podLabels[k] === v);
      expect(selects(pdb.spec!.selector!.matchLabels!), `${name} PDB`).toBe(true);
      // Selecting no other workload's pods.
      for (const other of rendered.filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet')) {
        if (other.metadata.name === name) continue;
        const otherLabels = (other as Workload).spec.template.metadata.labels;
        expect(
          Object.entries(pdb.spec!.selector!.matchLabels!).every(([k, v]) => otherLabels[k] === v),
          `${name} PDB vs ${other.metadata.name}`,
        ).toBe(false);
      }
      expect(selects(workload.spec.selector.matchLabels)).toBe(true);
      expect(workload.spec.replicas).toBeGreaterThanOrEqual(2);
      // Spread over nodes, selecting its own pods.
      const spread = workload.spec.template.spec.topologySpreadConstraints ?? [];
      expect(spread.map((c) => c.topologyKey)).toContain('kubernetes.io/hostname');
      for (const c of spread) expect(selects(c.labelSelector!.matchLabels!)).toBe(true);
    }
  });

  it(`${overlay}: Services reach the pods; the gateways' upstream is the backend Service`, () => {
    const rendered = objects();
    for (const service of rendered.filter((o) => o.kind === 'Service') as unknown as Service[]) {
      const pods = rendered.filter(
        (o) =>
          (o.kind === 'Deployment' || o.kind === 'StatefulSet') &&
          Object.entries(service.spec!.selector!).every(([k, v]) => (o as Workload).spec.template.metadata.labels[k] === v),
      ) as Workload[];
      expect(pods, `Service ${service.metadata!.name}`).toHaveLength(1);
      const ports = pods[0]!.spec.template.spec.containers[0]!.ports!.map((p) => p.name);
      for (const port of service.spec!.ports!) expect(ports).toContain(port.targetPort);
    }
    const gateway = find<Workload>(rendered, 'Deployment', 'tollgate-gateway');
    const backend = find<Workload>(rendered, 'Deployment', 'tollgate-backend');
    const backendService = find<Service>(rendered, 'Service', 'tollgate-backend');
    const backendEnv = envOf(backend.spec.template.spec.containers[0]!);
    expect(envOf(gateway.spec.template.spec.containers[0]!).UPSTREAM_URL).toBe(
      `http://tollgate-backend:${backendService.spec!.ports![0]!.port}`,
    );
    expect(backendEnv.BACKEND_HOST).toBe('0.0.0.0');
    expect(String(backend.spec.template.spec.containers[0]!.ports![0]!.containerPort)).toBe(backendEnv.BACKEND_PORT);
    // The admin listener has no auth: no Service exposes it.
    for (const service of rendered.filter((o) => o.kind === 'Service') as unknown as Service[])
      expect(service.spec!.ports!.map((p) => p.targetPort)).not.toContain('admin');
  });

  it(`${overlay}: every environment variable is one the code reads and the docs describe; secrets only from Secrets`, () => {
    for (const workload of objects().filter((o) => o.kind === 'Deployment') as Workload[]) {
      for (const container of workload.spec.template.spec.containers) {
        for (const variable of container.env ?? []) {
          expect(new RegExp(`['"\`]${variable.name}['"\`]`).test(sourceText), `${variable.name} is read by src/`).toBe(true);
          expect(userDocs.includes(variable.name), `${variable.name} is documented in README.md or docs/`).toBe(true);
          if (/SECRET|TOKENS/.test(variable.name)) expect(variable.valueFrom?.secretKeyRef, variable.name).toBeDefined();
          const secretKey = variable.valueFrom?.secretKeyRef?.key;
          if (secretKey) expect(kubernetesDoc.includes(secretKey), `docs/kubernetes.md names the Secret key ${secretKey}`).toBe(true);
        }
      }
    }
  });

  it(`${overlay}: Redis for gateways and backend`, () => {
    const rendered = objects();
    for (const name of ['tollgate-gateway', 'tollgate-backend']) {
      const container = find<Workload>(rendered, 'Deployment', name).spec.template.spec.containers[0]!;
      if (overlay === 'single-redis') {
        const redisService = find<Service>(rendered, 'Service', 'tollgate-redis');
        expect(envOf(container).REDIS_URL).toBe(`redis://tollgate-redis:${redisService.spec!.ports![0]!.port}`);
        expect(find<StatefulSet>(rendered, 'StatefulSet', 'tollgate-redis').spec!.serviceName).toBe('tollgate-redis');
      } else {
        // The topology variables from one Secret; whichever it holds picks the topology.
        expect(container.envFrom).toEqual([{ secretRef: { name: 'tollgate-redis' } }]);
        expect(envOf(container).REDIS_URL).toBeUndefined();
        for (const variable of ['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS', 'REDIS_SENTINEL_MASTER']) {
          expect(sourceText.includes(`'${variable}'`), variable).toBe(true);
          expect(kubernetesDoc.includes(variable), `docs/kubernetes.md names ${variable}`).toBe(true);
        }
      }
    }
  });

  it(`${overlay}: every container locked down and sized; the tollgate image tagged with package.json's version`, () => {
    for (const workload of objects().filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet') as Workload[]) {
      const pod = workload.spec.template.spec;
      expect(pod.securityContext?.runAsNonRoot, workload.metadata.name).toBe(true);
      // Numeric, or the kubelet cannot check runAsNonRoot against the image's named user.
      expect(pod.securityContext?.runAsUser).toBeGreaterThan(0);
      expect(pod.automountServiceAccountToken).toBe(false);
      for (const container of pod.containers) {
        const where = `${workload.metadata.name}/${container.name}`;
        expect(container.securityContext, where).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        });
        for (const field of ['cpu', 'memory'] as const) {
          expect(container.resources?.requests?.[field], `${where} requests.${field}`).toBeTruthy();
          expect(container.resources?.limits?.[field], `${where} limits.${field}`).toBeTruthy();
        }
        if (container.image!.startsWith('tollgate')) expect(container.image, where).toBe(`tollgate:${packageVersion}`);
        expect(container.livenessProbe, where).toBeDefined();
        expect(container.readinessProbe, where).toBeDefined();
      }
    }
  });

  it(`${overlay}: the ConfigMap is the shipped config, mounted as a directory (hot reload) where the image reads it`, () => {
    const rendered = objects();
    const configMap = find<ConfigMap>(rendered, 'ConfigMap', 'tollgate-config');
    for (const file of ['gateway.yaml', 'plans.yaml'])
      expect(configMap.data![file]).toBe(readFileSync(join(REPO_ROOT, 'config', file), 'utf8'));
    for (const name of ['tollgate-gateway', 'tollgate-backend']) {
      const pod = find<Workload>(rendered, 'Deployment', name).spec.template.spec;
      const volume = pod.volumes!.find((v) => v.configMap?.name === 'tollgate-config')!;
      const mount = pod.containers[0]!.volumeMounts!.find((m) => m.name === volume.name)!;
      expect(mount.mountPath).toBe(imageConfigDir);
      // A subPath mount is never updated by the kubelet.
      expect(mount.subPath).toBeUndefined();
    }
  });
}
