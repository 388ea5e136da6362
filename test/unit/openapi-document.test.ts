import { Validator } from '@seriousme/openapi-schema-validator';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { loadGatewayFile } from '../../src/config/load.js';
import { ERRORS, type ErrorCode } from '../../src/errors/registry.js';
import { BUNDLED_OPENAPI_FILE, loadOpenApiDocument } from '../../src/gateway/openapi-document.js';
import { CONFIG_DIR, REPO_ROOT } from '../helpers/processes.js';

// openapi.yaml itself: a valid OpenAPI 3.1 document that agrees with the shipped config. Whether
// the running system answers as it says is contract.test.ts.

const document = parseYaml(readFileSync(join(REPO_ROOT, 'openapi.yaml'), 'utf8')) as {
  openapi: string;
  paths: Record<
    string,
    Record<string, { operationId?: string; deprecated?: boolean; security?: unknown[]; responses?: Record<string, unknown> }>
  >;
  servers: Array<{ url: string; variables?: Record<string, { default: string }> }>;
};

describe('openapi.yaml', () => {
  it('is read by the built gateway from the JSON the build wrote of it, never from a stale one', async () => {
    // dist/ as `npm test` builds it (package.json "build": scripts/bundle-openapi.mjs).
    const built = (await import(
      join(REPO_ROOT, 'dist/gateway/openapi-document.js')
    )) as typeof import('../../src/gateway/openapi-document.js');
    const text = readFileSync(join(REPO_ROOT, 'openapi.yaml'), 'utf8');
    expect(built.prebuilt(text)).toEqual(document);
    expect(built.prebuilt(`${text}\n# edited after the build\n`)).toBeUndefined();
    expect(built.loadOpenApiDocument('', CONFIG_DIR).equals(Buffer.from(JSON.stringify(document)))).toBe(true);
  });

  it('is a valid OpenAPI 3.1 document (official schema, $refs resolved)', async () => {
    const validator = new Validator();
    const result = await validator.validate(join(REPO_ROOT, 'openapi.yaml'));
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('lists the operations of the interface, with only the pets one deprecated', () => {
    const operations = Object.entries(document.paths)
      .flatMap(([path, item]) => Object.entries(item).map(([method, op]) => [`${method.toUpperCase()} ${path}`, op] as const))
      .filter(([, op]) => !op.operationId?.endsWith('NotAllowed'));
    expect(operations.map(([name]) => name).sort()).toEqual([
      'GET /categories',
      'GET /openapi.json',
      'GET /pets/{petId}',
      'GET /store/orders',
      'GET /usage',
      'POST /categories',
      'POST /ws-tickets',
    ]);
    expect(operations.filter(([, op]) => op.deprecated).map(([name]) => name)).toEqual(['GET /pets/{petId}']);
  });

  it('documents the 405 of every other method on every path, as the operation it is', () => {
    for (const [path, item] of Object.entries(document.paths)) {
      for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
        const op = item[method];
        expect(op, `${method} ${path}`).toBeDefined();
        if (op!.operationId?.endsWith('NotAllowed')) expect(Object.keys(op!.responses!), `${method} ${path}`).toContain('405');
      }
    }
  });

  it('agrees with the shipped deprecation rules (the servers end in /v1)', () => {
    const rules = loadGatewayFile(CONFIG_DIR).routes.deprecations.map((r) => `${r.method} ${r.path}`);
    const deprecated = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([, op]) => op.deprecated)
        .map(([method]) => `${method.toUpperCase()} /v1${path}`),
    );
    expect(rules).toEqual(deprecated);
    for (const server of document.servers) expect(server.url).toMatch(/\/v1$/);
  });

  it('names only error codes of the registry, and every one a request to the API can get', () => {
    const text = readFileSync(join(REPO_ROOT, 'openapi.yaml'), 'utf8');
    const named = new Set([...text.matchAll(/(?:`|code: )([a-z]+(?:_[a-z]+)+)/g)].map((m) => m[1]!));
    named.delete('error_description'); // a WWW-Authenticate parameter, not a code
    for (const code of named) expect(Object.keys(ERRORS), code).toContain(code);
    // Codes no request to this document's operations is answered with: the admin API and console
    // (openapi-admin.yaml), the backend's own check, and the listener's answers before any route
    // (docs/clients.md lists those). A new code lands here only on purpose.
    const elsewhere: ErrorCode[] = [
      ...['invalid_query', 'unknown_plan', 'missing_admin_token', 'invalid_admin_token', 'key_not_found', 'key_revoked'],
      ...['credits_below_zero', 'insufficient_role', 'invalid_csrf_token', 'no_console_role', 'sign_in_failed'],
      ...['sign_in_provider_unavailable', 'invalid_gateway_assertion'],
      ...['request_timeout', 'request_header_fields_too_large', 'http_version_not_supported'],
      ...['cors_origin_not_allowed', 'too_many_preflights', 'request_invalid'],
    ] as ErrorCode[];
    const missing = (Object.keys(ERRORS) as ErrorCode[]).filter((code) => !named.has(code) && !elsewhere.includes(code));
    expect(missing).toEqual([]);
  });

  it('needs no key only for the document itself', () => {
    for (const [path, item] of Object.entries(document.paths)) {
      for (const op of Object.values(item)) expect(op.security, path).toEqual(path === '/openapi.json' ? [] : undefined);
    }
  });
});

describe('loading the document for the gateway', () => {
  it('finds the bundled file at the package root, whatever the working directory', () => {
    expect(BUNDLED_OPENAPI_FILE).toBe(join(REPO_ROOT, 'openapi.yaml'));
    const json = loadOpenApiDocument('', '/nonexistent');
    expect(JSON.parse(json.toString())).toEqual(document);
  });

  it('reads another YAML or JSON file, relative to the config directory', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-openapi-'));
    writeFileSync(join(dir, 'api.json'), '{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{}}');
    expect(JSON.parse(loadOpenApiDocument('api.json', dir).toString()).info.title).toBe('t');
  });

  it('refuses a missing file or one that is not an OpenAPI document, naming openapi.file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-openapi-'));
    writeFileSync(join(dir, 'not-openapi.yaml'), 'hello: world\n');
    for (const file of ['missing.yaml', 'not-openapi.yaml']) {
      const err = (() => {
        try {
          loadOpenApiDocument(file, dir);
        } catch (e) {
          return e as ConfigError;
        }
      })();
      expect(err).toBeInstanceOf(ConfigError);
      expect(err!.message).toMatch(/^gateway\.yaml: openapi\.file: /);
    }
  });
});
