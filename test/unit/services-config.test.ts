import { describe, expect, it } from 'vitest';
import { serviceSchema } from '../../src/config/services-schema.js';

describe('services config: target URLs', () => {
  const parse = (target: string) => serviceSchema.safeParse({ name: 's', paths: ['/v1/s'], targets: [target] });

  it('refuses credentials in a target URL (never sent, but shown in the admin API, metrics and logs)', () => {
    expect(parse('http://user:secret@127.0.0.1:8081').success).toBe(false);
    expect(parse('http://token@10.0.0.1').success).toBe(false);
    expect(parse('http://127.0.0.1:8081/base').success).toBe(true);
    // An @ in the path is no userinfo.
    expect(parse('http://127.0.0.1:8081/a@b').success).toBe(true);
  });

  it('refuses a query or fragment in a target URL', () => {
    expect(parse('http://127.0.0.1:8081/base?x=1').success).toBe(false);
    expect(parse('http://127.0.0.1:8081/#f').success).toBe(false);
  });
});

describe('services config: path prefixes', () => {
  const parse = (prefix: string) => serviceSchema.safeParse({ name: 's', paths: [prefix], targets: ['http://127.0.0.1:8081'] });

  it('refuses a prefix no canonical path can carry (it would claim nothing; its paths would go to default)', () => {
    expect(parse('/v1/%41pi').success).toBe(false);
    expect(parse('/v1/caf%c3%a9').success).toBe(false);
    expect(parse('/v1/a%2Fb').success).toBe(false);
    expect(parse('/v1/caf%C3%A9').success).toBe(true);
    expect(parse('/v1/categories').success).toBe(true);
  });
});
