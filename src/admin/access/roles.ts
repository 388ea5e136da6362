import { ROLE_NAMES } from '../../config/console-schema.js';

/** Roles, weakest first: each may do everything the one before it may. */
export const ROLES = ROLE_NAMES;
export type Role = (typeof ROLES)[number];

/**
 * Who calls the admin API: an admin token (its label) or a person signed in to the console with
 * the team's OpenID provider (its subject and email). `owner`, when set, limits it to the keys of
 * that one owner (a partner team managing its own keys).
 */
export interface Principal {
  /** The audit's actor: the token's label, or the OpenID subject. */
  actor: string;
  role: Role;
  owner?: string;
  /** OpenID sign-ins only. */
  email?: string;
}

/**
 * Where the owner a call touches comes from:
 * - `key`: the key named by the path's `{id}`;
 * - `new-key`: the body's `owner` (a key being created; an owner-scoped principal's own when absent);
 * - `list`: a listing, filtered to the principal's owner rather than refused;
 * - `global`: everything at once (all services, all traffic): never for an owner-scoped principal;
 * - `none`: nobody's (the plans on offer).
 */
export type OwnerRule = 'key' | 'new-key' | 'list' | 'global' | 'none';

/**
 * Every action of the admin API: the weakest role allowed to take it and where its owner comes
 * from. A route names its action (admin-route.ts); a new kind of change is one line here.
 */
export const ACTIONS = {
  'keys.list': { role: 'viewer', owner: 'list' },
  'keys.read': { role: 'viewer', owner: 'key' },
  'keys.usage': { role: 'viewer', owner: 'key' },
  'audit.read': { role: 'viewer', owner: 'list' },
  'plans.read': { role: 'viewer', owner: 'none' },
  'services.read': { role: 'viewer', owner: 'global' },
  'traffic.read': { role: 'viewer', owner: 'global' },
  'bans.read': { role: 'viewer', owner: 'list' },
  'usage.read': { role: 'viewer', owner: 'list' },
  'keys.create': { role: 'operator', owner: 'new-key' },
  'keys.update': { role: 'operator', owner: 'key' },
  'keys.rotate': { role: 'operator', owner: 'key' },
  'keys.revoke': { role: 'operator', owner: 'key' },
  'keys.unban': { role: 'operator', owner: 'key' },
  'keys.credits': { role: 'operator', owner: 'key' },
  'cache.purge': { role: 'admin', owner: 'global' },
} as const satisfies Record<string, { role: Role; owner: OwnerRule }>;
export type Action = keyof typeof ACTIONS;

/**
 * The one decision: may `principal` take `action` on something of `owner` (undefined: a key of
 * no owner; `global`: every owner's at once)? Null when allowed, else why not (for the 403).
 */
export function refusal(principal: Principal, action: Action, owner?: string | 'global'): string | null {
  const needed = ACTIONS[action].role;
  if (ROLES.indexOf(principal.role) < ROLES.indexOf(needed))
    return `${action} needs the ${needed} role; ${principal.actor} acts as ${principal.role}.`;
  if (principal.owner === undefined || owner === principal.owner) return null;
  return owner === 'global'
    ? `${action} covers every owner; ${principal.actor} is limited to the keys of ${principal.owner}.`
    : `${principal.actor} is limited to the keys of ${principal.owner}.`;
}

/** The actions a principal may take at all (the console shows only these). */
export function allowedActions(principal: Principal): Action[] {
  return (Object.keys(ACTIONS) as Action[]).filter((action) => {
    const rule = ACTIONS[action].owner;
    return refusal(principal, action, rule === 'global' ? 'global' : principal.owner) === null;
  });
}
