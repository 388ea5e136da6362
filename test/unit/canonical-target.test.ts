import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalTarget, removeDotSegments } from '../../src/http/canonical-target.js';

const target = (raw: string) => {
  const result = canonicalTarget(raw);
  return result.ok ? result.target : `400: ${result.reason}`;
};

describe('canonical request target', () => {
  it.each([
    ['/v1/pets/42', '/v1/pets/42'],
    ['/v1/./pets/42', '/v1/pets/42'],
    ['/v1/x/../pets/42', '/v1/pets/42'],
    ['/v1/%2e/pets/42', '/v1/pets/42'],
    ['/v1/%2E%2e/v1/pets/42', '/v1/pets/42'],
    ['/../../v1', '/v1'],
    ['/v1/pets/42/.', '/v1/pets/42/'],
    ['/v1/pets/42/..', '/v1/pets/'],
    ['//v1///pets//42', '/v1/pets/42'],
    ['/v1/pets/%34%32', '/v1/pets/42'],
    ['/v1/caf%c3%a9', '/v1/caf%C3%A9'],
    ['/v1/a%7eb', '/v1/a~b'],
    ['/v1/pets/42?a=%2F..&b=/./', '/v1/pets/42?a=%2F..&b=/./'],
    ['http://h.test/v1/./x?q=1', '/v1/x?q=1'],
    ['HTTP://h.test', '/'],
    ['http://h.test?q', '/?q'],
  ])('%s → %s', (raw, canonical) => {
    expect(target(raw)).toBe(canonical);
  });

  it.each([
    '/v1\\x',
    '/v1/a%2Fb',
    '/v1/a%2fb',
    '/v1/a%5Cb',
    '/v1/%00',
    '/v1/%1f',
    '/v1/a;b',
    '/v1/%4',
    '/v1/%zz',
    '/v1/x#f',
    '*',
    'ftp://h/x',
    'http://user@h/x',
    'http:///x',
    '/v1/é',
    '/v1/a b',
    '/v1/x?a b',
  ])('%s cannot be normalised safely (400)', (raw) => {
    expect(target(raw)).toMatch(/^400: /);
  });

  it('remembers the authority of an absolute-form target', () => {
    expect(canonicalTarget('http://api.test:8080/v1')).toEqual({ ok: true, target: '/v1', authority: 'api.test:8080' });
  });

  it('is idempotent and leaves no dot segment, empty segment or decodable escape (property)', () => {
    const segment = fc.constantFrom('v1', 'pets', '42', '.', '..', '', '%2e', '%2E%2e', '%41', '%c3%a9', 'a~b', '%7E');
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 8 }), (segments) => {
        const result = canonicalTarget('/' + segments.join('/'));
        expect(result.ok).toBe(true);
        if (!result.ok) return;
        expect(canonicalTarget(result.target)).toEqual(result);
        expect(result.target).not.toMatch(/\/\.{1,2}(\/|$)|\/\/|%(2[eE]|4[1-9a-fA-F]|7[eE])/);
      }),
      { numRuns: 2000 },
    );
  });

  it('removes dot segments as RFC 3986 §5.2.4 examples do', () => {
    expect(removeDotSegments('/a/b/c/./../../g')).toBe('/a/g');
    expect(removeDotSegments('/mid/content=5/../6')).toBe('/mid/6');
  });
});
