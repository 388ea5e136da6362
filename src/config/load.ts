import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { ConfigError } from './config-error.js';
import { gatewayFileSchema, type GatewayFile } from './gateway-schema.js';
import { plansFileSchema, type PlansConfig } from './plans-schema.js';

export const PLANS_FILE = 'plans.yaml';
export const GATEWAY_FILE = 'gateway.yaml';

/** One config file's raw content (a YAML mapping); unreadable or malformed files are ConfigErrors. */
export function readYamlFile(dir: string, file: string): Record<string, unknown> {
  const path = join(dir, file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(file, '', `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text, { prettyErrors: true }) ?? {};
  } catch (err) {
    throw new ConfigError(file, '', `not valid YAML: ${(err as Error).message.split('\n')[0]!.replace(/:$/, '')}`);
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new ConfigError(file, '(top level)', 'must be a mapping of fields');
  return raw as Record<string, unknown>;
}

/**
 * Validates raw config with its schema, frozen. The first issue becomes a ConfigError naming the
 * file and the field, unless `blame` attributes that field to another source (an environment variable).
 */
export function validated<S extends z.ZodType>(
  file: string,
  schema: S,
  raw: unknown,
  blame?: (path: readonly PropertyKey[], reason: string) => ConfigError | undefined,
): Readonly<z.output<S>> {
  const result = schema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    // zod reports a bad record key (a plan name) as invalid_key with the useful reason nested.
    const reason = (issue.code === 'invalid_key' ? issue.issues[0]?.message : undefined) ?? issue.message;
    throw blame?.(issue.path, reason) ?? new ConfigError(file, issue.path.map(String).join('.') || '(top level)', reason);
  }
  return deepFreeze(result.data);
}

export function loadPlans(dir: string): PlansConfig {
  return validated(PLANS_FILE, plansFileSchema, readYamlFile(dir, PLANS_FILE));
}

export function loadGatewayFile(dir: string): GatewayFile {
  return validated(GATEWAY_FILE, gatewayFileSchema, readYamlFile(dir, GATEWAY_FILE));
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
