import { resolve } from 'node:path';
import { configDirFrom } from './config-dir.js';
import { ConfigError } from './config-error.js';
import { overlayEnvironment, overrideAt } from './env-overrides.js';
import { gatewayFileSchema, type GatewayFile } from './gateway-schema.js';
import { GATEWAY_FILE, readYamlSource, validated } from './load.js';

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

export { configDirFrom } from './config-dir.js';

export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const configDir = configDirFrom(env);
  const yaml = readYamlSource(configDir, GATEWAY_FILE);
  const { raw, sources } = overlayEnvironment(yaml.raw, env);
  const file = validated(
    GATEWAY_FILE,
    gatewayFileSchema,
    raw,
    (path, reason) => {
      const source = overrideAt(sources, path);
      if (!source) return undefined;
      const value = env[source.name] ?? '';
      return new ConfigError('environment', source.name, source.secret ? reason : `${reason} (got "${value}")`);
    },
    yaml.lineOf,
  );
  const gateway = { ...file.gateway, tls: absoluteTlsPaths(file.gateway.tls, configDir, sources) };
  return Object.freeze({ ...file, gateway, configDir, logLevel: file.log.level });
}

/**
 * The PEM paths made absolute: a path from gateway.yaml is relative to the config directory, one
 * from GATEWAY_TLS_CERT / GATEWAY_TLS_KEY to the working directory (as a shell user expects).
 */
function absoluteTlsPaths(tls: GatewayFile['gateway']['tls'], configDir: string, sources: Parameters<typeof overrideAt>[0]) {
  const fromEnv = (field: 'cert' | 'key') => overrideAt(sources, ['gateway', 'tls', field]) !== undefined;
  const where = (field: 'cert' | 'key') =>
    fromEnv(field) ? `GATEWAY_TLS_${field.toUpperCase()}` : `${GATEWAY_FILE}: gateway.tls.${field}`;
  if (Boolean(tls.cert) !== Boolean(tls.key))
    throw new ConfigError(
      where(tls.cert ? 'cert' : 'key'),
      '',
      `is set without ${tls.cert ? 'a key' : 'a certificate'}: set both, or neither`,
    );
  if (!tls.cert && tls.sni.length > 0)
    throw new ConfigError(GATEWAY_FILE, 'gateway.tls.sni', 'needs gateway.tls.cert and gateway.tls.key (the default certificate)');
  const path = (value: string, env = false) => (value === '' ? '' : resolve(env ? '.' : configDir, value));
  return {
    cert: path(tls.cert, fromEnv('cert')),
    key: path(tls.key, fromEnv('key')),
    sni: tls.sni.map((entry) => ({ ...entry, cert: path(entry.cert), key: path(entry.key) })),
  };
}
