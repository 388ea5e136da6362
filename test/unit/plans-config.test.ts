import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { PLANS_FILE, validated } from '../../src/config/load.js';
import { plansFileSchema } from '../../src/config/plans-schema.js';

// plans.yaml's quota features (shadow, algorithm, burst, scope): refused with file and field named.

const ban = { afterRejections: 20, window: 60, duration: 900 };

function refusal(plan: Record<string, unknown>): { field: string; reason: string } {
  try {
    validated(PLANS_FILE, plansFileSchema, { plans: { p: plan }, ban });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    const { file, field, reason } = err as ConfigError;
    expect(file).toBe('plans.yaml');
    return { field, reason };
  }
  throw new Error('accepted');
}

const accepted = (plan: Record<string, unknown>) => validated(PLANS_FILE, plansFileSchema, { plans: { p: plan }, ban }).plans.p;

describe('plan fields', () => {
  it('accept shadow and gcra with a burst up to perMinute; fixed stays the default', () => {
    expect(accepted({ perMinute: 60, perDay: 1000 })).toEqual({ perMinute: 60, perDay: 1000 });
    expect(accepted({ perMinute: 60, perDay: 1000, shadow: true })).toMatchObject({ shadow: true });
    expect(accepted({ perMinute: 60, perDay: 1000, algorithm: 'gcra', burst: 60 })).toMatchObject({ algorithm: 'gcra', burst: 60 });
    expect(accepted({ perMinute: 60, perDay: 1000, algorithm: 'gcra' })).toMatchObject({ algorithm: 'gcra' });
    expect(accepted({ perMinute: 60, perDay: 1000, scope: 'owner' })).toMatchObject({ scope: 'owner' });
  });

  it('refuse an unknown algorithm, a burst without gcra, and a burst above perMinute', () => {
    expect(refusal({ perMinute: 60, perDay: 1000, algorithm: 'sliding' })).toEqual({
      field: 'plans.p.algorithm',
      reason: expect.stringContaining('"gcra"'),
    });
    expect(refusal({ perMinute: 60, perDay: 1000, burst: 5 })).toEqual({
      field: 'plans.p.burst',
      reason: expect.stringContaining('only to algorithm: gcra'),
    });
    expect(refusal({ perMinute: 60, perDay: 1000, algorithm: 'gcra', burst: 61 })).toEqual({
      field: 'plans.p.burst',
      reason: expect.stringContaining('cannot exceed perMinute'),
    });
    expect(refusal({ perMinute: 60, perDay: 1000, algorithm: 'gcra', burst: 0 }).field).toBe('plans.p.burst');
    expect(refusal({ perMinute: 60, perDay: 1000, scope: 'team' })).toEqual({
      field: 'plans.p.scope',
      reason: 'scope must be "key" or "owner"',
    });
    expect(refusal({ perMinute: 60, perDay: 1000, shadow: 'yes' })).toEqual({
      field: 'plans.p.shadow',
      reason: 'shadow must be true or false',
    });
  });
});
