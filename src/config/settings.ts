import { resolve } from 'node:path';
import { ConfigError } from './config-error.js';
import { overlayEnvironment, overrideAt } from './env-overrides.js';
import { gatewayFileSchema, type GatewayFile } from './gateway-schema.js';
import { GATEWAY_FILE, readYamlFile, validated } from './load.js';

/**
 * Process settings: gateway.yaml with the environment laid over it (the environment wins, so a
 * container can be configured without editing files). One path: file and environment are merged
 * first (env-overrides.ts), then the one schema validates the result once; an error names the
 * variable when the environment set the field, else the file.
 */
export interface Settings extends GatewayFile {
  configDir: string;
  logLevel: GatewayFile['log']['level'];
}

export function configDirFrom(env: NodeJS.ProcessEnv): string {
  return resolve(env.TOLLGATE_CONFIG_DIR || 'config');
}

export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const configDir = configDirFrom(env);
  const { raw, sources } = overlayEnvironment(readYamlFile(configDir, GATEWAY_FILE), env);
  const file = validated(GATEWAY_FILE, gatewayFileSchema, raw, (path, reason) => {
    const source = overrideAt(sources, path);
    if (!source) return undefined;
    const value = env[source.name] ?? '';
    return new ConfigError('environment', source.name, source.secret ? reason : `${reason} (got "${value}")`);
  });
  return Object.freeze({ ...file, configDir, logLevel: file.log.level });
}
