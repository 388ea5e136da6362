import { z } from 'zod';
import { httpsOrLoopback } from './jwt-schema.js';

// Schema of the `console` section of gateway.yaml: how people sign in to the operator console
// (src/console/). Absent: sign-in with an admin token only. Reloaded with the file.

/** The admin API's roles, weakest first (src/admin/access/roles.ts says what each may do). */
export const ROLE_NAMES = ['viewer', 'operator', 'admin'] as const;

const claimName = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be a claim name like groups or tollgate_role');

/**
 * Sign-in with the team's OpenID provider (authorization code with PKCE): the console's own
 * session follows, with the role the ID token's `roleClaim` maps to. No mapped role: no access.
 */
export const consoleOidcSchema = z.strictObject({
  /** Must equal the discovery document's `issuer` and the ID token's `iss` exactly. */
  issuer: httpsOrLoopback,
  clientId: z.string().min(1).max(256),
  /** The environment variable holding the client secret (never the secret itself, in a file). */
  clientSecretEnv: z.string().regex(/^[A-Z_][A-Z0-9_]{0,127}$/, 'must be an environment variable name like TOLLGATE_OIDC_SECRET'),
  /** This console's callback, as registered at the provider: …/admin/console/oidc/callback. */
  redirectUri: httpsOrLoopback.refine((u) => new URL(u).pathname === '/admin/console/oidc/callback', {
    message: 'must end in /admin/console/oidc/callback',
  }),
  /** The ID token claim naming the person's group or role (a string or a list of strings). */
  roleClaim: claimName.default('groups'),
  /** Claim value → console role; the strongest role any value maps to wins. */
  roles: z
    .record(z.string().min(1).max(256), z.enum(ROLE_NAMES, { error: 'must be viewer, operator or admin' }))
    .refine((roles) => Object.keys(roles).length > 0, 'must map at least one claim value to a role'),
  /** The claim naming the one owner whose keys the person may manage; absent or unset: every owner. */
  ownerClaim: claimName.optional(),
  /** Scopes asked for besides openid. */
  scopes: z.array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]{1,64}$/, 'must be a scope token')).default(['email', 'profile']),
});

export const consoleSchema = z
  .strictObject({
    oidc: consoleOidcSchema.optional(),
  })
  .prefault({});

export type ConsoleOidcConfig = z.infer<typeof consoleOidcSchema>;
