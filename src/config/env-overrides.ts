import { splitNodeList } from './redis-target.js';

/**
 * The environment variables that override gateway.yaml, as data: each names the one field it sets.
 * They are laid over the file's raw content before the one schema validates the result
 * (settings.ts), so a value from the environment meets exactly the checks a value in the file
 * meets, and an error names the variable instead of the file.
 */
interface EnvOverride {
  name: string;
  path: readonly string[];
  /** list: comma-separated, e.g. `10.0.0.0/8, 192.168.0.0/16`. */
  kind: 'string' | 'integer' | 'list';
  /** Never echo the value in an error (it may hold a password). */
  secret?: boolean;
}

export const ENV_OVERRIDES: readonly EnvOverride[] = [
  { name: 'LOG_LEVEL', path: ['log', 'level'], kind: 'string' },
  { name: 'LOG_FORMAT', path: ['log', 'format'], kind: 'string' },
  { name: 'GATEWAY_PORT', path: ['gateway', 'port'], kind: 'integer' },
  { name: 'DRAIN_DELAY_SECONDS', path: ['gateway', 'drainDelaySeconds'], kind: 'integer' },
  { name: 'TRUST_PROXY_HOPS', path: ['gateway', 'trustProxyHops'], kind: 'integer' },
  { name: 'TRUSTED_PROXIES', path: ['gateway', 'trustedProxies'], kind: 'list' },
  // PEM paths; relative ones are read from the working directory (settings.ts).
  { name: 'GATEWAY_TLS_CERT', path: ['gateway', 'tls', 'cert'], kind: 'string' },
  { name: 'GATEWAY_TLS_KEY', path: ['gateway', 'tls', 'key'], kind: 'string' },
  // In a container the admin and backend listeners must bind 0.0.0.0.
  { name: 'ADMIN_HOST', path: ['admin', 'host'], kind: 'string' },
  { name: 'ADMIN_PORT', path: ['admin', 'port'], kind: 'integer' },
  { name: 'BACKEND_HOST', path: ['backend', 'host'], kind: 'string' },
  { name: 'BACKEND_PORT', path: ['backend', 'port'], kind: 'integer' },
  { name: 'UPSTREAM_URL', path: ['upstream', 'url'], kind: 'string', secret: true },
  { name: 'QUOTA_REPLICAS', path: ['quota', 'replicas'], kind: 'integer' },
  { name: 'REDIS_SENTINEL_MASTER', path: ['redis', 'sentinelMaster'], kind: 'string' },
];

/**
 * Each names one Redis topology. One set in the environment replaces whatever topology the file
 * names, so the other two are emptied; an empty value means "none" (as `REDIS_URL=` always did).
 */
const TOPOLOGY_OVERRIDES: readonly EnvOverride[] = [
  { name: 'REDIS_URL', path: ['redis', 'url'], kind: 'string', secret: true },
  { name: 'REDIS_CLUSTER_NODES', path: ['redis', 'clusterNodes'], kind: 'string', secret: true },
  { name: 'REDIS_SENTINELS', path: ['redis', 'sentinels'], kind: 'string', secret: true },
];

export interface Overlaid {
  raw: Record<string, unknown>;
  /** Which variable set which field, to name it in an error. */
  sources: EnvOverride[];
}

/** The file's raw content with the environment laid over it; nothing is validated here. */
export function overlayEnvironment(file: Record<string, unknown>, env: NodeJS.ProcessEnv): Overlaid {
  const raw = structuredClone(file);
  const sources: EnvOverride[] = [];
  // An empty variable is unset: `ADMIN_HOST=` in a compose file keeps the file's value.
  for (const o of ENV_OVERRIDES) {
    const value = env[o.name];
    if (value === undefined || value === '') continue;
    const parsed = o.kind === 'list' ? splitNodeList(value) : o.kind === 'integer' && /^-?\d+$/.test(value.trim()) ? Number(value) : value;
    setIn(raw, o.path, parsed);
    sources.push(o);
  }
  if (TOPOLOGY_OVERRIDES.some((o) => env[o.name] !== undefined)) {
    setIn(raw, ['redis', 'url'], env.REDIS_URL ?? '');
    setIn(raw, ['redis', 'clusterNodes'], splitNodeList(env.REDIS_CLUSTER_NODES ?? ''));
    setIn(raw, ['redis', 'sentinels'], splitNodeList(env.REDIS_SENTINELS ?? ''));
    sources.push(...TOPOLOGY_OVERRIDES.filter((o) => env[o.name]));
  }
  return { raw, sources };
}

/** The variable that set the field at `path` (or a field inside it), if one did. */
export function overrideAt(sources: readonly EnvOverride[], path: readonly PropertyKey[]): EnvOverride | undefined {
  return sources.find((o) => o.path.every((part, i) => String(path[i]) === part));
}

function setIn(target: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let node = target;
  for (const part of path.slice(0, -1)) {
    const next = node[part];
    if (!next || typeof next !== 'object' || Array.isArray(next)) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[path.at(-1)!] = value;
}
