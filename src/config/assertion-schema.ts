import { z } from 'zod';

// Schema of the `assertion` section of gateway.yaml: the signed identity (a JWT in
// X-Tollgate-Assertion) the gateway adds to every proxied request and the backend verifies.
// The signing secret is never in a file: it comes from TOLLGATE_ASSERTION_SECRET (src/identity/).

const name = z.string().min(1).max(256);

export const assertionSchema = z.strictObject({
  /** `iss` of every assertion; the backend accepts no other issuer. */
  issuer: name.default('tollgate'),
  /** `aud` of every assertion; the backend accepts no other audience. */
  audience: name.default('tollgate-backend'),
  /** Lifetime of one assertion. The gateway reuses each one for half of it (signing is not free). */
  ttlSeconds: z.number().int().min(10).max(3600).default(60),
  /** Backend side: clock skew allowed when checking `exp` and `iat` (gateway and backend hosts differ). */
  clockToleranceSeconds: z.number().int().min(0).max(300).default(5),
});

export type AssertionSettings = z.output<typeof assertionSchema>;
