import { createHash, randomBytes } from 'node:crypto';
import { ConfigError } from '../config/config-error.js';
import type { Logger } from '../observability/log.js';

// The HS256 secret shared by the gateway (signs) and the backend (verifies). It comes from the
// environment only, never from a config file, so config can be committed and secrets cannot.

export const SECRET_ENV = 'TOLLGATE_ASSERTION_SECRET';
/** Rotation: the backend also accepts assertions signed with this one (the gateway never signs with it). */
export const PREVIOUS_SECRET_ENV = 'TOLLGATE_ASSERTION_SECRET_PREVIOUS';
/**
 * `TOLLGATE_DEV=1` says "this is a development machine": only then do `gateway` and `backend` run
 * without a secret (on the public development default, with a loud warning). Anywhere else an
 * unset secret refuses to start, so a production deployment that forgets it cannot be called
 * around the gateway with a forged assertion.
 */
export const DEVELOPMENT_ENV = 'TOLLGATE_DEV';
/** RFC 7518 §3.2: an HS256 key must be at least as long as the hash output (256 bits). */
export const MIN_SECRET_BYTES = 32;
/**
 * Used when the variable is unset in development (TOLLGATE_DEV=1). It is in the source, so anyone
 * can forge assertions with it: the process logs a loud warning whenever it is in force.
 */
export const DEVELOPMENT_SECRET = 'tollgate-development-assertion-secret-NOT-FOR-PRODUCTION';

export interface AssertionSecret {
  /** `kid` of the tokens it signs: a fingerprint, so the backend picks the right key during a rotation. */
  readonly kid: string;
  readonly bytes: Uint8Array;
}

export interface AssertionSecrets {
  readonly current: AssertionSecret;
  readonly previous?: AssertionSecret;
  /** Where `current` came from; `development-default` is insecure and logged as such. */
  readonly source: 'environment' | 'generated' | 'development-default';
}

/**
 * Reads the secrets from the environment. Unset: with `generate` (`tollgate up`, where gateway and
 * backend share one process) a random per-process secret nobody else knows; in development
 * (TOLLGATE_DEV=1, or `allowDevelopment` for check-config's warning) the public development
 * default; otherwise a ConfigError naming the variable, as for a secret shorter than 32 bytes.
 * The public default set explicitly is refused outside development as well.
 */
export function assertionSecretsFromEnv(
  env: NodeJS.ProcessEnv,
  opts: { generate?: boolean; allowDevelopment?: boolean } = {},
): AssertionSecrets {
  const raw = env[SECRET_ENV];
  const previousRaw = env[PREVIOUS_SECRET_ENV];
  const previous = previousRaw ? secretFrom(PREVIOUS_SECRET_ENV, previousRaw) : undefined;
  const development = opts.allowDevelopment === true || env[DEVELOPMENT_ENV] === '1';
  if (raw && raw !== DEVELOPMENT_SECRET) return { current: secretFrom(SECRET_ENV, raw), previous, source: 'environment' };
  if (!raw && opts.generate) return { current: secret(randomBytes(MIN_SECRET_BYTES)), previous, source: 'generated' };
  if (!development) {
    throw new ConfigError(
      'environment',
      SECRET_ENV,
      `${raw ? 'is the public development default' : 'is unset'}: set it to at least ${MIN_SECRET_BYTES} random bytes, the same on every gateway and backend ` +
        `(e.g. \`openssl rand -base64 48\`), or set ${DEVELOPMENT_ENV}=1 on a development machine to run with a public secret`,
    );
  }
  return { current: secret(Buffer.from(DEVELOPMENT_SECRET)), previous, source: 'development-default' };
}

/** The startup line about the secret: a loud warning for the development default. */
export function logSecretSource(secrets: AssertionSecrets, logger: Logger, role: 'gateway' | 'backend' | 'up'): void {
  if (secrets.source === 'development-default') {
    logger.warn(
      { env: SECRET_ENV, role },
      `INSECURE: ${SECRET_ENV} is unset (or the development default), so gateway assertions use a public secret. ` +
        'Anyone can forge them and call the backend around the gateway. ' +
        `Set ${SECRET_ENV} (at least ${MIN_SECRET_BYTES} random bytes, the same on every gateway and backend) outside development.`,
    );
  } else if (secrets.source === 'generated') {
    logger.info({ env: SECRET_ENV, role }, 'gateway assertions use a random secret generated for this process');
  } else {
    logger.info({ env: SECRET_ENV, kid: secrets.current.kid, previousKid: secrets.previous?.kid, role }, 'gateway assertion secret loaded');
  }
}

function secretFrom(name: string, value: string): AssertionSecret {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length < MIN_SECRET_BYTES) {
    throw new ConfigError(
      'environment',
      name,
      `must be at least ${MIN_SECRET_BYTES} bytes (got ${bytes.length}); e.g. \`openssl rand -base64 48\``,
    );
  }
  return secret(bytes);
}

function secret(bytes: Uint8Array): AssertionSecret {
  // 48 bits of the secret's SHA-256: tells keys apart, reveals nothing usable about them.
  const kid = createHash('sha256').update(bytes).digest('base64url').slice(0, 8);
  return { kid, bytes: new Uint8Array(bytes) };
}
