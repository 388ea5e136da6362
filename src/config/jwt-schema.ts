import { z } from 'zod';

// Schema of the `jwt` section of gateway.yaml: identity providers whose access tokens (JWTs) the
// gateway admits besides API keys (src/auth/jwt/). Absent: API keys only. Reloaded with the file.

/** Names an issuer inside consumer ids (`jwt:<name>:<subject>`), logs and Redis keys: short, plain. */
export const ISSUER_NAME = /^[a-z0-9_-]{1,32}$/;

/**
 * Asymmetric algorithms only. HMAC (HS*) would need a secret shared with the IdP and opens the
 * algorithm-confusion attack (a token "signed" with a public key's bytes); `none` is no signature.
 */
export const JWT_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

export const httpsOrLoopback = z
  .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
  // Keys fetched in clear could be swapped on the way: plain http only for a local IdP.
  .refine((u) => u.startsWith('https://') || /^http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(\/|$)/.test(u), {
    message: 'must be https:// (plain http:// only for 127.0.0.1, localhost or [::1])',
  });

const claimName = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be a claim name like sub or plan');

const algorithm = z.string().superRefine((alg, ctx) => {
  if ((JWT_ALGORITHMS as readonly string[]).includes(alg)) return;
  const why = /^HS/i.test(alg)
    ? 'HMAC algorithms are refused (a shared secret, and the algorithm-confusion attack)'
    : alg.toLowerCase() === 'none'
      ? '"none" is refused (no signature)'
      : `unknown algorithm; use one of ${JWT_ALGORITHMS.join(', ')}`;
  ctx.addIssue({ code: 'custom', message: `"${alg}": ${why}` });
});

const issuerSchema = z
  .strictObject({
    /** 1-32 of a-z 0-9 _ -: consumer ids of this issuer's tokens read `jwt:<name>:<subject>`. */
    name: z.string().regex(ISSUER_NAME, 'must be 1-32 of a-z, 0-9, _ and -'),
    /** Must equal the token's `iss` exactly (and the discovery document's `issuer`). */
    issuer: z.string().min(1).max(512),
    /** Where the issuer publishes its keys (JWKS); or set `discovery: true` instead. */
    jwksUri: httpsOrLoopback.optional(),
    /** Read jwks_uri from `{issuer}/.well-known/openid-configuration` (OpenID Connect Discovery). */
    discovery: z.boolean().default(false),
    /** The token's `aud` must hold one of these. */
    audiences: z.array(z.string().min(1).max(512)).min(1),
    /** Accepted `alg` values; each must match the type of the key it names. */
    algorithms: z.array(algorithm).min(1).default(['RS256', 'ES256', 'EdDSA']),
    /** The claim naming the caller: its quota, bans and usage belong to this subject. */
    subject: claimName.default('sub'),
    /** Which plan a token is on: the claim's value mapped through `map` (a missing or unmapped value: `default`). */
    plan: z
      .strictObject({
        claim: claimName.optional(),
        map: z.record(z.string().min(1).max(128), z.string().min(1)).default({}),
        default: z.string().min(1),
      })
      .refine((p) => p.claim !== undefined || Object.keys(p.map).length === 0, { message: 'map needs a claim to read', path: ['map'] }),
    /** Seconds of clock difference allowed when checking exp and nbf. */
    clockSkewSeconds: z.number().int().min(0).max(300).default(30),
    /** true: the client's token also goes upstream (Authorization); false: only the gateway's assertion. */
    forwardToken: z.boolean().default(false),
  })
  .superRefine((issuer, ctx) => {
    if (Boolean(issuer.jwksUri) === issuer.discovery)
      ctx.addIssue({ code: 'custom', path: ['jwksUri'], message: 'set either jwksUri or discovery: true (exactly one)' });
    if (issuer.discovery && !httpsOrLoopback.safeParse(issuer.issuer).success)
      ctx.addIssue({
        code: 'custom',
        path: ['issuer'],
        message: 'with discovery: true, must be an https:// URL (http:// only for loopback)',
      });
  });

export const jwtSchema = z
  .strictObject({
    issuers: z.array(issuerSchema).min(1),
  })
  .superRefine((jwt, ctx) => {
    // A token is routed to its issuer by `iss`: two entries for one `iss` would be ambiguous.
    const names = new Set<string>();
    const issuers = new Set<string>();
    jwt.issuers.forEach((issuer, i) => {
      if (names.has(issuer.name))
        ctx.addIssue({ code: 'custom', path: ['issuers', i, 'name'], message: `"${issuer.name}" is named twice` });
      if (issuers.has(issuer.issuer))
        ctx.addIssue({ code: 'custom', path: ['issuers', i, 'issuer'], message: `"${issuer.issuer}" is configured twice` });
      names.add(issuer.name);
      issuers.add(issuer.issuer);
    });
  });

export type JwtSettings = z.output<typeof jwtSchema>;
export type JwtIssuerSettings = JwtSettings['issuers'][number];
