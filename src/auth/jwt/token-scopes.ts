import type { JWTPayload } from 'jose';
import { MAX_SCOPES, SCOPE_TOKEN } from '../../policies/access/scope.js';

/**
 * The scopes an access token grants: its `scope` claim (RFC 9068 §2.2.3, RFC 8693 §4.2: one
 * space-separated string) and `scp` (Entra ID and Okta: a string like `scope`, or an array).
 * Anything that is not a well-formed scope name is left out, as are names past the first 64:
 * they could never match a requirement, and the list travels in the assertion.
 */
export function tokenScopes(payload: JWTPayload): string[] | undefined {
  const names = new Set<string>();
  for (const claim of [payload.scope, payload.scp]) {
    const listed = typeof claim === 'string' ? claim.split(' ') : Array.isArray(claim) ? claim : [];
    for (const name of listed) {
      if (names.size === MAX_SCOPES) break;
      if (typeof name === 'string' && SCOPE_TOKEN.test(name)) names.add(name);
    }
  }
  return names.size > 0 ? [...names] : undefined;
}
