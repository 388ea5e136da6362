import { resolve } from 'node:path';
import { ConfigError } from './config-error.js';
import type { GatewayFile } from './gateway-schema.js';
import { GATEWAY_FILE, loadGatewayFile } from './load.js';

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
    gateway: { ...file.gateway, port: envPort(env, 'GATEWAY_PORT') ?? file.gateway.port },
    admin: { ...file.admin, port: envPort(env, 'ADMIN_PORT') ?? file.admin.port },
    backend: { ...file.backend, port: envPort(env, 'BACKEND_PORT') ?? file.backend.port },
    upstream: { ...file.upstream, url: upstreamUrl },
    redis: { ...file.redis, url: env.REDIS_URL ?? file.redis.url },
  });
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

export { GATEWAY_FILE };
