import { Validator } from '@seriousme/openapi-schema-validator';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ADMIN_OPENAPI_FILE } from '../../src/admin/admin-api.js';
import type { AdminDeps } from '../../src/admin/admin-route.js';
import { auditRoutes } from '../../src/admin/routes/audit-routes.js';
import { keysRoutes } from '../../src/admin/routes/keys-routes.js';
import { plansRoutes } from '../../src/admin/routes/plans-routes.js';
import { servicesRoutes } from '../../src/admin/routes/services-routes.js';
import { usageRoutes } from '../../src/admin/routes/usage-routes.js';
import { trafficRoutes } from '../../src/admin/routes/traffic-routes.js';
import { ERRORS } from '../../src/errors/registry.js';

// openapi-admin.yaml itself: valid OpenAPI 3.1, and the same operations as the admin router.
// Whether the running API answers as it says: test/integration/admin-api.test.ts (every call checked).

const document = parseYaml(readFileSync(ADMIN_OPENAPI_FILE, 'utf8')) as { paths: Record<string, Record<string, { security?: unknown[] }>> };

describe('openapi-admin.yaml', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(ADMIN_OPENAPI_FILE);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('documents exactly the routes the admin API serves, and its own document needs no token', () => {
    const deps = {} as AdminDeps; // the routes are only listed here, never called
    const served = [
      ...keysRoutes(deps),
      ...plansRoutes(deps),
      ...servicesRoutes(deps),
      ...auditRoutes(deps),
      ...trafficRoutes({ traffic: {} } as AdminDeps),
      ...usageRoutes({ usage: {} } as AdminDeps),
    ].map((r) => `${r.method} ${r.path}`);
    const documented = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.keys(item)
        .filter((k) => k !== 'parameters')
        .map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(documented.sort()).toEqual([...served, 'GET /openapi.json'].sort());
    expect(document.paths['/openapi.json']!.get!.security).toEqual([]);
  });

  it('names only error codes of the registry', () => {
    const text = readFileSync(ADMIN_OPENAPI_FILE, 'utf8');
    const named = [...text.matchAll(/`([a-z]+(?:_[a-z]+)+)`/g)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThan(5);
    for (const code of named) expect(Object.keys(ERRORS), code).toContain(code);
  });
});
