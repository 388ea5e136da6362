import { z } from 'zod';

// Scopes: what a credential may do, named by the operator (`categories:read`). A key carries its
// own (tollgate keys create --scope), a JWT brings its `scope`/`scp` claim, and a service or route
// requires some (access-schema.ts). Shared by the config, the key lifecycle and the gateway.

/**
 * RFC 6749 §3.3 scope-token: printable ASCII without space, `"` or `\`, so a list joins with
 * spaces (the `scope` claim, the Redis field) and fits unescaped in an RFC 6750 `scope="…"`.
 */
export const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/;

/** Most scopes one key holds, or one token brings (the rest of a longer claim is ignored). */
export const MAX_SCOPES = 64;

export const scopeSchema = z
  .string({ error: 'must be a scope name' })
  .regex(SCOPE_TOKEN, 'must be a scope name (RFC 6749: 1 to 128 printable ASCII characters, no space, " or \\)');

export const scopeListSchema = z
  .array(scopeSchema, { error: 'must be a list of scope names' })
  .min(1, 'must list at least one scope')
  .max(MAX_SCOPES, `must list at most ${MAX_SCOPES} scopes`);

/** The scopes of `required` that `held` lacks (empty: every one is held). */
export function missingScopes(required: readonly string[], held: readonly string[] | undefined): string[] {
  return required.filter((scope) => !held?.includes(scope));
}
