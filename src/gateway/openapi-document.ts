import { readFileSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../config/config-error.js';

/**
 * The OpenAPI document shipped with tollgate, at the package root (beside package.json). Found
 * from this module's own location (src/gateway/ or dist/gateway/, two levels down), never from
 * the working directory, so `npx tollgate` works from anywhere.
 */
export const BUNDLED_OPENAPI_FILE = fileURLToPath(new URL('../../openapi.yaml', import.meta.url));

/** The file `openapi.file` names: "" the bundled one, a relative path from the config directory. */
export function openApiPath(file: string, configDir: string): string {
  return file === '' ? BUNDLED_OPENAPI_FILE : isAbsolute(file) ? file : resolve(configDir, file);
}

/**
 * Reads an OpenAPI document (YAML or JSON) once, at start, and returns it as the JSON bytes the
 * gateway serves: no parsing or serialising per request. `file` "" means the bundled one; a
 * relative path is relative to the config directory.
 */
export function loadOpenApiDocument(file: string, configDir: string): Buffer {
  const path = openApiPath(file, configDir);
  // A start reads the same document twice (served, and its route templates for metrics): parsed
  // once while the file is unchanged, a reload after an edit reads it again.
  const seen = statOf(path);
  const known = loaded.get(path);
  if (known && seen && known.stamp === seen) return known.json;
  let document: unknown;
  try {
    document = parseYaml(readFileSync(path, 'utf8'));
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message.split('\n')[0];
    throw new ConfigError('gateway.yaml', 'openapi.file', `cannot load ${path}: ${reason}`);
  }
  if (!document || typeof document !== 'object' || typeof (document as { openapi?: unknown }).openapi !== 'string') {
    throw new ConfigError('gateway.yaml', 'openapi.file', `${path} is not an OpenAPI document (no "openapi" version field)`);
  }
  const json = Buffer.from(JSON.stringify(document));
  if (seen) loaded.set(path, { stamp: seen, json });
  return json;
}

/** Documents parsed in this process, by path, with the size and time of the file they came from. */
const loaded = new Map<string, { stamp: string; json: Buffer }>();

function statOf(path: string): string | undefined {
  try {
    const { size, mtimeMs } = statSync(path);
    return `${size}:${mtimeMs}`;
  } catch {
    return undefined;
  }
}

/**
 * The route templates of an OpenAPI document as request paths: its `paths` under the path of its
 * first server URL (`https://{host}/v1` + `/pets/{petId}` → `/v1/pets/{petId}`), for metrics labels.
 */
export function openApiRouteTemplates(json: Buffer): string[] {
  const document = JSON.parse(json.toString('utf8')) as { servers?: Array<{ url?: string }>; paths?: Record<string, unknown> };
  const serverUrl = (document.servers?.[0]?.url ?? '/').replace(/\{[^}]*\}/g, 'x');
  const base = new URL(serverUrl, 'http://x').pathname.replace(/\/$/, '');
  return Object.keys(document.paths ?? {}).map((path) => base + path);
}
