import { describe, expect, it } from 'vitest';
import { routeLabeler } from '../../src/gateway/route-label.js';

describe('metrics route labels', () => {
  it('turn ids and odd segments into {param} and drop the query string', () => {
    const label = routeLabeler();
    expect(label('/v1/pets/123?x=1')).toBe('/v1/pets/{param}');
    expect(label('/v1/categories')).toBe('/v1/categories');
    expect(label('/v1/pets/%2e%2e/x')).toBe('/v1/pets/{param}/x');
    expect(label('/a/b/c/d/e/f')).toBe('/a/b/c/d');
    expect(label(undefined)).toBe('/');
  });

  it('stay a bounded set whatever paths clients send', () => {
    const label = routeLabeler(5);
    const labels = new Set(Array.from({ length: 1000 }, (_, i) => label(`/${'abcdefghij'[i % 10]}${'klmnopqrst'[Math.floor(i / 10) % 10]}`)));
    expect(labels.size).toBeLessThanOrEqual(6);
    expect(labels.has('other')).toBe(true);
  });
});
