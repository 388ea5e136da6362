import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { PLANS_FILE, validated } from '../../src/config/load.js';
import { plansWithKnownServices, servicesKeepingPlanned } from '../../src/config/plan-services.js';
import { plansFileSchema, type PlansConfig } from '../../src/config/plans-schema.js';
import { servicesSchema } from '../../src/config/services-schema.js';

// The rule across plans.yaml and gateway.yaml (plan-services.ts): a plan's services are defined in
// gateway.yaml or `default`; blamed on plans.yaml when it loads, on gateway.yaml when it drops one.

const ban = { afterRejections: 20, window: 60, duration: 900 };
const plans = (services?: string[]): PlansConfig =>
  validated(PLANS_FILE, plansFileSchema, { plans: { all: { perMinute: 1, perDay: 1 }, some: { perMinute: 1, perDay: 1, services } }, ban });
const defined = (...names: string[]) =>
  servicesSchema.parse(names.map((name) => ({ name, paths: [`/${name}`], targets: ['http://127.0.0.1:1'] })));

function thrown(f: () => unknown): ConfigError {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('accepted');
}

describe('plans per service across the two files', () => {
  it('accept defined services, `default` with none defined, and plans without services', () => {
    expect(plansWithKnownServices(plans(['cats', 'default']), defined('cats', 'dogs')).plans.some!.services).toEqual(['cats', 'default']);
    expect(() => plansWithKnownServices(plans(['default']), [])).not.toThrow();
    expect(() => plansWithKnownServices(plans(), [])).not.toThrow();
    expect(servicesKeepingPlanned(defined('cats'), plans(['cats']))).toHaveLength(1);
  });

  it('blame plans.yaml for a service gateway.yaml does not define, naming plan and index', () => {
    const err = thrown(() => plansWithKnownServices(plans(['cats', 'dogs']), defined('cats')));
    expect([err.file, err.field]).toEqual(['plans.yaml', 'plans.some.services.1']);
    expect(err.reason).toContain('"dogs" is not defined in gateway.yaml');
  });

  it('blame gateway.yaml for dropping a service a plan still names', () => {
    const err = thrown(() => servicesKeepingPlanned(defined('dogs'), plans(['cats'])));
    expect([err.file, err.field]).toEqual(['gateway.yaml', 'services']);
    expect(err.reason).toBe('service "cats" is named by plan "some" in plans.yaml; remove it from the plan first');
  });
});
