import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { validateNewCategory } from '../../src/backend/validate-category.js';

describe('validateNewCategory', () => {
  it('accepts a name and stores it trimmed', () => {
    expect(validateNewCategory({ name: '  Dog\t' })).toEqual({ ok: true, category: { name: 'Dog' } });
  });

  it('keeps a description as sent, including an empty one', () => {
    expect(validateNewCategory({ name: 'Dog', description: ' Loyal ' })).toEqual({
      ok: true,
      category: { name: 'Dog', description: ' Loyal ' },
    });
    expect(validateNewCategory({ name: 'Dog', description: '' })).toEqual({ ok: true, category: { name: 'Dog', description: '' } });
  });

  it('drops unknown fields', () => {
    expect(validateNewCategory({ name: 'Dog', tags: ['a'], status: 'x' })).toEqual({ ok: true, category: { name: 'Dog' } });
  });

  it('treats Unicode whitespace as blank', () => {
    expect(validateNewCategory({ name: '\u00a0\u2003\n' })).toMatchObject({ ok: false, message: expect.stringMatching(/^name /) });
  });

  const refusals: Array<[string, unknown, RegExp]> = [
    ['missing name', {}, /^name is required$/],
    ['name a number', { name: 1 }, /^name must be a non-empty string, not a number$/],
    ['name null', { name: null }, /^name must be a non-empty string, not null$/],
    ['name empty', { name: '' }, /^name must be a non-empty string/],
    ['description a boolean', { name: 'Dog', description: true }, /^description must be a string when present, not a boolean$/],
    ['description an array', { name: 'Dog', description: ['x'] }, /^description must be a string when present, not an array$/],
    ['id sent', { id: 1, name: 'Dog' }, /^id is assigned by the service and must not be sent$/],
    ['id sent first even with a bad name', { id: 1 }, /^id /],
    ['an array', [], /JSON object .* not an array/],
    ['null', null, /not null/],
    ['a number', 3, /not a number/],
  ];
  for (const [label, body, message] of refusals) {
    it(`refuses ${label}`, () => {
      const result = validateNewCategory(body);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.message).toMatch(message);
    });
  }

  it('ignores a name inherited from the prototype (only own fields count)', () => {
    expect(validateNewCategory(Object.create({ name: 'Dog' }))).toEqual({ ok: false, message: 'name is required' });
    expect(validateNewCategory(JSON.parse('{"__proto__": {"name": "Dog"}}'))).toEqual({ ok: false, message: 'name is required' });
  });

  it('never throws, and every answer is either a trimmed non-empty name or a message naming a field', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.jsonValue(), fc.record({ name: fc.jsonValue(), description: fc.jsonValue() }, { requiredKeys: [] })),
        (body) => {
          const result = validateNewCategory(body);
          if (result.ok) {
            expect(result.category.name).toBe(result.category.name.trim());
            expect(result.category.name).not.toBe('');
          } else {
            expect(result.message).toMatch(/^(id|name|description) |JSON object/);
          }
        },
      ),
    );
  });
});
