import { createHash } from 'node:crypto';
import { SignJWT } from 'jose';

/**
 * The assertion secret every test process gets (TollgateProcess.spawn and runCli pass it), so
 * gateways and backends started by tests trust each other as in production, without the
 * development default. Tests that talk to a backend directly sign with it here, independently of
 * the gateway's signer: this is what any other trusted caller would have to do.
 */
export const TEST_ASSERTION_SECRET = 'tollgate-test-assertion-secret-0123456789abcdef';

/** The `kid` tollgate derives from a secret: the first 8 base64url characters of its SHA-256. */
export function kidOf(secret: string): string {
  return createHash('sha256').update(secret).digest('base64url').slice(0, 8);
}

export interface TestAssertion {
  sub?: string;
  plan?: string;
  issuer?: string;
  audience?: string;
  /** Unix seconds; default now. */
  iat?: number;
  /** Seconds after iat; default 60. */
  ttlSeconds?: number;
  secret?: string;
  kid?: string | null;
  /** The anonymous marker's claims instead: `anonymous: true`, no sub, no plan (unless `sub` is given too). */
  anonymous?: boolean;
}

/** An HS256 assertion as the gateway would sign it with the shipped config, with any part overridden. */
export async function signTestAssertion(opts: TestAssertion = {}): Promise<string> {
  const secret = opts.secret ?? TEST_ASSERTION_SECRET;
  const iat = opts.iat ?? Math.floor(Date.now() / 1000);
  const kid = opts.kid === undefined ? kidOf(secret) : opts.kid;
  const jwt = new SignJWT(opts.anonymous ? { anonymous: true } : { plan: opts.plan ?? 'free' })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT', ...(kid !== null && { kid }) })
    .setIssuer(opts.issuer ?? 'tollgate')
    .setAudience(opts.audience ?? 'tollgate-backend')
    .setIssuedAt(iat)
    .setExpirationTime(iat + (opts.ttlSeconds ?? 60));
  if (!opts.anonymous || opts.sub !== undefined) jwt.setSubject(opts.sub ?? 'testkey00001');
  return jwt.sign(new TextEncoder().encode(secret));
}

/** The three headers the gateway adds for the upstream, for a test calling the backend directly. */
export async function gatewayIdentity(opts: TestAssertion = {}): Promise<Record<string, string>> {
  return {
    'x-tollgate-consumer-id': opts.sub ?? 'testkey00001',
    'x-tollgate-plan': opts.plan ?? 'free',
    'x-tollgate-assertion': await signTestAssertion(opts),
  };
}
