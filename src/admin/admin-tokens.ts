import { hash, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '../config/config-error.js';

export const ADMIN_TOKENS_ENV = 'TOLLGATE_ADMIN_TOKENS';
const MIN_TOKEN_BYTES = 32;
/** A label names the token's holder in the audit and logs: short, plain, no secret in it. */
const LABEL = /^[a-z0-9][a-z0-9_.-]{0,31}$/;

interface AdminToken {
  label: string;
  digest: Buffer;
}

/**
 * The admin tokens of TOLLGATE_ADMIN_TOKENS: comma-separated `label:token` entries (the label is
 * the audit's actor; the token, everything after the first colon, at least 32 bytes). Several
 * entries let a token be rotated: add the new one, move the clients, remove the old one.
 * Only SHA-256 digests are kept, and a presented token is compared with every one of them in
 * constant time, so neither timing nor the order of entries tells anything about a token.
 */
export class AdminTokens {
  private constructor(private readonly tokens: readonly AdminToken[]) {}

  /** Refusals name the entry by position or label, never by its token. */
  static parse(value: string | undefined): AdminTokens {
    const entries = (value ?? '')
      .split(',')
      .map((entry) => entry.trim())
      .filter(Boolean);
    const tokens: AdminToken[] = [];
    entries.forEach((entry, index) => {
      const colon = entry.indexOf(':');
      const label = colon > 0 ? entry.slice(0, colon) : '';
      const token = entry.slice(colon + 1);
      const where = `entry ${index + 1}`;
      if (!LABEL.test(label)) {
        throw new ConfigError(
          'environment',
          ADMIN_TOKENS_ENV,
          `${where} must be label:token, the label 1-32 of a-z 0-9 _ . - (e.g. ops-portal:<token>)`,
        );
      }
      if (Buffer.byteLength(token) < MIN_TOKEN_BYTES) {
        throw new ConfigError(
          'environment',
          ADMIN_TOKENS_ENV,
          `${where} (${label}): the token must be at least ${MIN_TOKEN_BYTES} bytes (e.g. openssl rand -base64 32)`,
        );
      }
      if (tokens.some((t) => t.label === label))
        throw new ConfigError('environment', ADMIN_TOKENS_ENV, `${where}: label ${label} is used twice`);
      tokens.push({ label, digest: digest(token) });
    });
    return new AdminTokens(tokens);
  }

  /** False when none is configured: the admin API is then absent (404). */
  get configured(): boolean {
    return this.tokens.length > 0;
  }

  /** The label of the matching token, or null. */
  labelOf(presented: string): string | null {
    const presentedDigest = digest(presented);
    let label: string | null = null;
    for (const token of this.tokens) {
      if (timingSafeEqual(presentedDigest, token.digest)) label = token.label;
    }
    return label;
  }
}

function digest(token: string): Buffer {
  return hash('sha256', token, 'buffer');
}
