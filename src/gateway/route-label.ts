import { patternToRegExp } from './route-rules.js';

/** The one label for every path that matches no known route: random paths cannot grow the metrics. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * A bounded metrics label for a canonical request path: the known route template it matches
 * (`/v1/pets/42` → `/v1/pets/{petId}`), else `unmatched`. Known routes are the API's OpenAPI
 * paths (openapi-document.ts) and the route rules; the label set is therefore fixed at start.
 */
export function routeLabeler(templates: readonly string[]): (url: string | undefined) => string {
  const compiled = [...new Set(templates)].map((template) => ({ template, pattern: patternToRegExp(template) }));
  // Most requests repeat a few paths: remember their labels (bounded; cleared when full).
  const byPath = new Map<string, string>();
  return (url = '/') => {
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    const known = byPath.get(path);
    if (known !== undefined) return known;
    const label = compiled.find(({ pattern }) => pattern.test(path))?.template ?? UNMATCHED_ROUTE;
    if (byPath.size >= 1000) byPath.clear();
    byPath.set(path, label);
    return label;
  };
}
