import { basename, dirname } from 'node:path';
import { z } from 'zod';
import { ROLE_NAMES } from '../config/console-schema.js';
import { readYamlSource, validated } from '../config/load.js';
import { OWNER_PATTERN } from '../keys/record.js';

export const ADMIN_TOKENS_FILE_ENV = 'TOLLGATE_ADMIN_TOKENS_FILE';

/**
 * A file of admin tokens kept as SHA-256 digests only (`TOLLGATE_ADMIN_TOKENS_FILE`), for teams
 * that would rather not hold tokens in clear in the environment:
 *
 *   tokens:
 *     - { label: dana, role: viewer, sha256: <hex> }               # printf %s "$TOKEN" | sha256sum
 *     - { label: acme-portal, role: operator, owner: acme, sha256: <hex> }
 *
 * Read at start, like the variable; its entries join the variable's (labels unique across both).
 */
const tokensFileSchema = z.strictObject({
  tokens: z.array(
    z.strictObject({
      label: z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,31}$/, 'must be 1-32 of a-z 0-9 _ . -'),
      role: z.enum(ROLE_NAMES, { error: 'must be viewer, operator or admin' }),
      owner: z.string().regex(OWNER_PATTERN, 'must be 1-64 of a-z 0-9 . _ -, as on keys').optional(),
      sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be the token’s SHA-256 as 64 lowercase hex digits'),
    }),
  ),
});

export type TokensFileEntry = z.infer<typeof tokensFileSchema>['tokens'][number];

export function readTokensFile(path: string): readonly TokensFileEntry[] {
  const file = basename(path);
  const { raw, lineOf } = readYamlSource(dirname(path), file);
  return validated(file, tokensFileSchema, raw, undefined, lineOf).tokens;
}
