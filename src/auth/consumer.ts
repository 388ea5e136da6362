import { hash } from 'node:crypto';
import type { KeyRecord } from '../keys/record.js';

/**
 * The authenticated caller, whichever way it came in (an API key or a JWT): what quota, bans,
 * usage, the networks it may call from, the upstream assertion and the logs read, and all they read. An API key's record is one
 * as it is; a JWT's subject becomes one with the id `jwt:<issuer name>:<subject>` (src/auth/jwt/jwt-authenticator.ts).
 */
export type Consumer = Readonly<
  Pick<
    KeyRecord,
    | 'id'
    | 'plan'
    | 'perMinute'
    | 'perDay'
    | 'perMonth'
    | 'maxConcurrent'
    | 'billingAnchor'
    | 'shadow'
    | 'owner'
    | 'expiresAt'
    | 'allowedCidrs'
    | 'scopes'
  > & {
    /** A caller without a credential, on a route that admits them (anonymous-consumer.ts): limited per client address. */
    anonymous?: true;
    /** A JWT consumer's verified claims (what limit rules' `claim:<name>` read); never sent upstream or logged. */
    claims?: Readonly<Record<string, unknown>>;
  }
>;

/** Subjects kept as they are in consumer ids; anything else is replaced by a digest of it. */
const PLAIN_SUBJECT = /^[A-Za-z0-9._@-]{1,64}$/;

/**
 * The consumer id of a token's subject. Ids go inside Redis hash tags (`tg:quota:{…}`), so a
 * brace would move the tag and split one consumer's keys over Cluster slots; they go into logs
 * and the admin API, so no control characters and a bounded length. A subject outside the plain
 * set becomes `~` and 32 characters of its SHA-256 (base64url): `~` is not in the plain set, so
 * a digest can never collide with a plain subject.
 */
export function jwtConsumerId(issuerName: string, subject: string): string {
  const safe = PLAIN_SUBJECT.test(subject) ? subject : `~${hash('sha256', subject, 'base64url').slice(0, 32)}`;
  return `jwt:${issuerName}:${safe}`;
}
