import { hash, timingSafeEqual } from 'node:crypto';
import { ConfigError } from '../config/config-error.js';
import { OWNER_PATTERN } from '../keys/record.js';
import { ROLES, type Principal, type Role } from './access/roles.js';
import { ADMIN_TOKENS_FILE_ENV, readTokensFile, type TokensFileEntry } from './admin-tokens-file.js';

export const ADMIN_TOKENS_ENV = 'TOLLGATE_ADMIN_TOKENS';
const MIN_TOKEN_BYTES = 32;
/** A label names the token's holder in the audit and logs: short, plain, no secret in it. */
const LABEL = /^[a-z0-9][a-z0-9_.-]{0,31}$/;

interface AdminToken {
  principal: Principal;
  digest: Buffer;
}

/**
 * The admin tokens of TOLLGATE_ADMIN_TOKENS: comma-separated entries, each `label:token` (role
 * admin; the token is everything after the first colon) or `label:role:token` or
 * `label:role:owner:token` (role viewer, operator or admin; owner limits the token to that
 * owner's keys; the token has no colon in these forms). The label is the audit's actor; the token
 * is at least 32 bytes. Several entries let a token be rotated: add the new one, move the
 * clients, remove the old one.
 * Only SHA-256 digests are kept, and a presented token is compared with every one of them in
 * constant time, so neither timing nor the order of entries tells anything about a token.
 */
export class AdminTokens {
  private constructor(private readonly tokens: readonly AdminToken[]) {}

  /** The tokens of TOLLGATE_ADMIN_TOKENS and of the file TOLLGATE_ADMIN_TOKENS_FILE names, if any. */
  static fromEnvironment(env: NodeJS.ProcessEnv): AdminTokens {
    const file = env[ADMIN_TOKENS_FILE_ENV];
    return AdminTokens.parse(env[ADMIN_TOKENS_ENV], file ? readTokensFile(file) : []);
  }

  /** Refusals name the entry by position or label, never by its token. */
  static parse(value: string | undefined, hashed: readonly TokensFileEntry[] = []): AdminTokens {
    const entries = (value ?? '')
      .split(',')
      .map((entry) => entry.trim())
      .filter(Boolean);
    const tokens: AdminToken[] = [];
    entries.forEach((entry, index) => {
      const colon = entry.indexOf(':');
      const label = colon > 0 ? entry.slice(0, colon) : '';
      const where = `entry ${index + 1}`;
      if (!LABEL.test(label)) {
        throw new ConfigError(
          'environment',
          ADMIN_TOKENS_ENV,
          `${where} must be label:token or label:role[:owner]:token, the label 1-32 of a-z 0-9 _ . - (e.g. ops-portal:viewer:<token>)`,
        );
      }
      const { role, owner, token } = roleAndToken(entry.slice(colon + 1), `${where} (${label})`);
      if (Buffer.byteLength(token) < MIN_TOKEN_BYTES) {
        throw new ConfigError(
          'environment',
          ADMIN_TOKENS_ENV,
          `${where} (${label}): the token must be at least ${MIN_TOKEN_BYTES} bytes (e.g. openssl rand -base64 32)`,
        );
      }
      if (tokens.some((t) => t.principal.actor === label))
        throw new ConfigError('environment', ADMIN_TOKENS_ENV, `${where}: label ${label} is used twice`);
      tokens.push({ principal: { actor: label, role, ...(owner !== undefined && { owner }) }, digest: digest(token) });
    });
    for (const { label, role, owner, sha256 } of hashed) {
      if (tokens.some((t) => t.principal.actor === label))
        throw new ConfigError(
          'environment',
          ADMIN_TOKENS_FILE_ENV,
          `label ${label} is used twice (in the file, or there and in ${ADMIN_TOKENS_ENV})`,
        );
      tokens.push({ principal: { actor: label, role, ...(owner !== undefined && { owner }) }, digest: Buffer.from(sha256, 'hex') });
    }
    return new AdminTokens(tokens);
  }

  /** False when none is configured: the admin API is then absent (404). */
  get configured(): boolean {
    return this.tokens.length > 0;
  }

  /** Who holds the matching token (its label, role and owner), or null. */
  principalOf(presented: string): Principal | null {
    const presentedDigest = digest(presented);
    let principal: Principal | null = null;
    for (const token of this.tokens) {
      if (timingSafeEqual(presentedDigest, token.digest)) principal = token.principal;
    }
    return principal;
  }
}

/** What follows the label: a role (and owner) before the token, or the token alone (role admin, as before roles). */
function roleAndToken(rest: string, where: string): { role: Role; owner?: string; token: string } {
  const parts = rest.split(':');
  const role = parts[0] as Role;
  if (parts.length < 2 || !ROLES.includes(role)) return { role: 'admin', token: rest };
  if (parts.length > 3)
    throw new ConfigError('environment', ADMIN_TOKENS_ENV, `${where}: in label:role[:owner]:token the token cannot contain ":"`);
  if (parts.length === 2) return { role, token: parts[1]! };
  if (!OWNER_PATTERN.test(parts[1]!))
    throw new ConfigError('environment', ADMIN_TOKENS_ENV, `${where}: the owner must be 1-64 of a-z 0-9 . _ -, as on keys`);
  return { role, owner: parts[1]!, token: parts[2]! };
}

function digest(token: string): Buffer {
  return hash('sha256', token, 'buffer');
}
