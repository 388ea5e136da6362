import { resolve } from 'node:path';
import { ConfigError } from './config-error.js';
import type { GatewayFile } from './gateway-schema.js';
import { loadGatewayFile } from './load.js';
import { redisSettings } from './redis-settings.js';

/**
 * Process settings: gateway.yaml with the environment laid over it (the environment wins, so a
 * container can be configured without editing files).
 */
export interface Settings extends GatewayFile {
  configDir: string;
  logLevel: string;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function configDirFrom(env: NodeJS.ProcessEnv): string {
  return resolve(env.TOLLGATE_CONFIG_DIR || 'config');
}

export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const configDir = configDirFrom(env);
  const file = loadGatewayFile(configDir);
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('environment', 'LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);
  }
  const upstreamUrl = env.UPSTREAM_URL ?? file.upstream.url;
  if (env.UPSTREAM_URL !== undefined && !/^https?:\/\/[^/]/.test(upstreamUrl)) {
    throw new ConfigError('environment', 'UPSTREAM_URL', 'must be an http:// or https:// URL');
  }
  return Object.freeze({
    ...file,
    configDir,
    logLevel,
    gateway: {
      ...file.gateway,
      port: envPort(env, 'GATEWAY_PORT') ?? file.gateway.port,
      trustProxyHops: envInteger(env, 'TRUST_PROXY_HOPS', 0, 10) ?? file.gateway.trustProxyHops,
    },
    // In a container the admin and backend listeners must bind 0.0.0.0 (ADMIN_HOST, BACKEND_HOST).
    admin: { ...file.admin, host: env.ADMIN_HOST || file.admin.host, port: envPort(env, 'ADMIN_PORT') ?? file.admin.port },
    backend: { ...file.backend, host: env.BACKEND_HOST || file.backend.host, port: envPort(env, 'BACKEND_PORT') ?? file.backend.port },
    upstream: { ...file.upstream, url: upstreamUrl },
    redis: redisSettings(env, file.redis),
    quota: { ...file.quota, replicas: envInteger(env, 'QUOTA_REPLICAS', 1, 1000) ?? file.quota.replicas },
  });
}

function envInteger(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError('environment', name, `must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function envPort(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError('environment', name, `must be a port number (0-65535), got "${raw}"`);
  }
  return port;
}

