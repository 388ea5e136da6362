import { describe, expect, it } from 'vitest';
import { ACTIONS, allowedActions, refusal, type Action, type Principal } from '../../src/admin/access/roles.js';

const viewer: Principal = { actor: 'support', role: 'viewer' };
const operator: Principal = { actor: 'billing', role: 'operator' };
const admin: Principal = { actor: 'ops', role: 'admin' };
const partner: Principal = { actor: 'acme', role: 'operator', owner: 'acme' };

describe('the role table', () => {
  it('lets each role take its own actions and those of weaker roles only', () => {
    for (const action of Object.keys(ACTIONS) as Action[]) {
      const needed = ACTIONS[action].role;
      expect(refusal(admin, action), action).toBeNull();
      expect(refusal(operator, action) === null, action).toBe(needed !== 'admin');
      expect(refusal(viewer, action) === null, action).toBe(needed === 'viewer');
    }
  });

  it('says which role is needed, in the refusal', () => {
    expect(refusal(viewer, 'keys.revoke')).toBe('keys.revoke needs the operator role; support acts as viewer.');
  });

  it('limits an owner-scoped principal to its owner: another owner, no owner and every owner are refused', () => {
    expect(refusal(partner, 'keys.update', 'acme')).toBeNull();
    expect(refusal(partner, 'keys.update', 'globex')).toMatch(/limited to the keys of acme/);
    expect(refusal(partner, 'keys.update', undefined)).toMatch(/limited to the keys of acme/);
    expect(refusal(partner, 'services.read', 'global')).toMatch(/covers every owner/);
  });

  it('lists what a principal may do, for the console', () => {
    expect(allowedActions(viewer)).toEqual([
      'keys.list',
      'keys.read',
      'keys.usage',
      'audit.read',
      'plans.read',
      'services.read',
      'traffic.read',
      'bans.read',
      'usage.read',
    ]);
    expect(allowedActions(partner)).not.toContain('services.read');
    expect(allowedActions(partner)).toContain('keys.create');
    expect(allowedActions(admin)).toContain('cache.purge');
  });
});
