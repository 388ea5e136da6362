import type { JWTPayload } from 'jose';
import { ROLE_NAMES, type ConsoleOidcConfig } from '../../config/console-schema.js';
import type { SessionPrincipal } from '../sessions.js';

/**
 * The console principal an ID token's claims give: the OpenID subject (the audit's actor) and
 * email, the strongest role any value of `roleClaim` maps to, and the owner of `ownerClaim` (a
 * person without that claim is not limited to one owner). Null when no value maps to a role: no
 * role, no access.
 */
export function consolePrincipal(claims: JWTPayload, config: ConsoleOidcConfig): SessionPrincipal | null {
  const raw = claims[config.roleClaim];
  const values = (Array.isArray(raw) ? raw : [raw]).filter((v): v is string => typeof v === 'string');
  const ranks = values.map((v) => (Object.hasOwn(config.roles, v) ? ROLE_NAMES.indexOf(config.roles[v]!) : -1));
  const best = Math.max(-1, ...ranks);
  if (best < 0 || typeof claims.sub !== 'string') return null;
  const owner = config.ownerClaim === undefined ? undefined : claims[config.ownerClaim];
  if (owner !== undefined && (typeof owner !== 'string' || !/^[a-z0-9][a-z0-9._-]{0,63}$/.test(owner))) return null;
  const email = typeof claims.email === 'string' ? claims.email : undefined;
  return {
    actor: claims.sub,
    role: ROLE_NAMES[best]!,
    ...(owner !== undefined && { owner }),
    ...(email !== undefined && { email }),
  };
}
