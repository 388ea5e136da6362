import { createHash } from 'node:crypto';
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

/**
 * The bundled document as the build wrote it (scripts/bundle-openapi.mjs: dist/openapi.json, from
 * dist/gateway/), with the SHA-256 of the YAML it came from: parsing the YAML cost ~100 ms of every
 * start. Run from src/ (no build), or once openapi.yaml was edited after the build, it is not used.
 */
const PREBUILT_OPENAPI_FILE = fileURLToPath(new URL('../openapi.json', import.meta.url));

export function prebuilt(text: string): unknown {
  let built: { sha256?: unknown; document?: unknown };
  try {
    built = JSON.parse(readFileSync(PREBUILT_OPENAPI_FILE, 'utf8')) as typeof built;
  } catch {
    return undefined;
  }
  return built.sha256 === createHash('sha256').update(text).digest('hex') ? built.document : undefined;
}

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
    const text = readFileSync(path, 'utf8');
    document = (path === BUNDLED_OPENAPI_FILE && prebuilt(text)) || parseYaml(text);
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
