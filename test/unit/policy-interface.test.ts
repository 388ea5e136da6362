import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { definePolicy } from '../../src/index.js';
import { checkOptions } from '../../src/plugins/check-options.js';
import { definitionProblem } from '../../src/plugins/load-policy-code.js';
import { MemoryPolicyKv } from '../../src/store/memory/memory-policy-kv.js';
import { kvArgumentProblem } from '../../src/store/policy-kv-store.js';

// The policy interface's pure parts (docs/plugins.md): the definition check, options checked by a
// zod schema or a JSON Schema, and the embedded KV's expiry on an injected clock.

describe('definePolicy and the definition check', () => {
  it('types hooks from the schema and passes the definition through as it is', () => {
    const policy = definePolicy({
      name: 'typed',
      options: z.strictObject({ header: z.string() }),
      errors: { nope: { status: 403, message: 'No.' } },
      access: (ctx, options) => (ctx.request.headers[options.header] ? { refuse: 'nope' } : undefined),
    });
    expect(definitionProblem(policy)).toBeUndefined();
  });

  it.each([
    [{ name: 'Bad Name', access: () => undefined }, 'name'],
    [{ name: 'nothing' }, 'hooks no phase'],
    [{ name: 'x', access: 'no' }, 'access must be a function'],
    [{ name: 'x', access: () => undefined, errors: { internal_error: { status: 403, message: 'm' } } }, "gateway's own"],
    [{ name: 'x', access: () => undefined, errors: { mine: { status: 500, message: 'm' } } }, '400 to 499'],
    [{ name: 'x', access: () => undefined, errors: { 'Bad-Code': { status: 400, message: 'm' } } }, 'lower_snake_case'],
  ] as Array<[unknown, string]>)('refuses %j', (definition, reason) => {
    expect(definitionProblem(definition)).toContain(reason);
  });
});

describe('policy options', () => {
  const withZod = definePolicy({
    name: 'zod',
    options: z.strictObject({ limit: z.number().int().min(1).default(3) }),
    compile: (o) => ({ twice: o.limit * 2 }),
    access: () => undefined,
  });
  const withJsonSchema = definePolicy<{ tag: string }>({
    name: 'json',
    options: { type: 'object', properties: { tag: { type: 'string', default: 'a' } }, additionalProperties: false },
    access: () => undefined,
  });

  it('checks with a zod schema, defaults applied, then compiles', () => {
    expect(checkOptions(withZod as never, undefined)).toEqual({ ok: true, value: { twice: 6 } });
    expect(checkOptions(withZod as never, { limit: 0 })).toMatchObject({ ok: false, path: 'limit' });
    expect(checkOptions(withZod as never, { other: 1 })).toMatchObject({ ok: false });
  });

  it('checks with a JSON Schema, defaults applied, naming the field', () => {
    expect(checkOptions(withJsonSchema as never, {})).toEqual({ ok: true, value: { tag: 'a' } });
    expect(checkOptions(withJsonSchema as never, { tag: 7 })).toMatchObject({ ok: false, path: 'tag' });
    expect(checkOptions(withJsonSchema as never, { typo: 1 })).toMatchObject({ ok: false, reason: expect.stringContaining('typo') });
  });

  it('refuses options for a policy that takes none', () => {
    const bare = definePolicy({ name: 'bare', access: () => undefined });
    expect(checkOptions(bare as never, undefined)).toEqual({ ok: true, value: undefined });
    expect(checkOptions(bare as never, { a: 1 })).toMatchObject({ ok: false, reason: expect.stringContaining('takes no options') });
  });
});

describe('the embedded policy KV', () => {
  it('keeps namespaces apart, expires on the clock, adds only when absent', async () => {
    let now = 1_000_000;
    const kv = new MemoryPolicyKv(10, () => now);
    await kv.set('a', 'k', 'one', 10);
    expect(await kv.get('a', 'k')).toBe('one');
    expect(await kv.get('b', 'k')).toBeUndefined();
    expect(await kv.add('a', 'k', 'two', 10)).toBe(false);
    now += 10_000;
    expect(await kv.get('a', 'k')).toBeUndefined();
    expect(await kv.add('a', 'k', 'two', 10)).toBe(true);
    expect(await kv.get('a', 'k')).toBe('two');
    await kv.delete('a', 'k');
    expect(await kv.get('a', 'k')).toBeUndefined();
  });

  it('stays bounded, dropping the oldest', async () => {
    const kv = new MemoryPolicyKv(3);
    for (const key of ['1', '2', '3', '4']) await kv.set('n', key, key, 60);
    expect(await kv.get('n', '1')).toBeUndefined();
    expect(await kv.get('n', '4')).toBe('4');
  });

  it('refuses keys, values and TTLs out of bounds', () => {
    expect(kvArgumentProblem('')).toBeDefined();
    expect(kvArgumentProblem('a\nb')).toBeDefined();
    expect(kvArgumentProblem('k', 'v', 0)).toBeDefined();
    expect(kvArgumentProblem('k', 'v', 1.5)).toBeDefined();
    expect(kvArgumentProblem('k', 'v', 60)).toBeUndefined();
  });
});
