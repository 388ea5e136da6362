import { describe, expect, it } from 'vitest';
import { BUNDLED_OPENAPI_FILE, loadOpenApiDocument, openApiRouteTemplates } from '../../src/gateway/openapi-document.js';
import { routeLabeler, UNMATCHED_ROUTE } from '../../src/gateway/route-label.js';

describe('metrics route labels', () => {
  const templates = openApiRouteTemplates(loadOpenApiDocument(BUNDLED_OPENAPI_FILE, '.'));

  it('name the OpenAPI route template a path matches, without the query string', () => {
    const label = routeLabeler(templates);
    expect(templates).toContain('/v1/pets/{petId}');
    expect(label('/v1/pets/123?x=1')).toBe('/v1/pets/{petId}');
    expect(label('/v1/categories')).toBe('/v1/categories');
    expect(label(undefined)).toBe(UNMATCHED_ROUTE);
  });

  it('collapse every path that matches no known route into one label', () => {
    const label = routeLabeler(templates);
    const labels = new Set(Array.from({ length: 1000 }, (_, i) => label(`/v1/x${i}/${i}`)));
    expect([...labels]).toEqual([UNMATCHED_ROUTE]);
  });
});
