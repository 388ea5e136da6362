import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { ConfigError } from './config-error.js';
import { gatewayFileSchema, type GatewayFile } from './gateway-schema.js';
import { plansFileSchema, type PlansConfig } from './plans-schema.js';

export const PLANS_FILE = 'plans.yaml';
export const GATEWAY_FILE = 'gateway.yaml';

/** Reads one YAML file and validates it; every failure is a ConfigError naming file and field. */
export function loadYamlFile<S extends z.ZodType>(path: string, schema: S): Readonly<z.output<S>> {
  const file = basename(path);
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
  const result = schema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const field = issue.path.map(String).join('.');
    // zod reports a bad record key (a plan name) as invalid_key with the useful reason nested.
    const nested = issue.code === 'invalid_key' ? issue.issues[0]?.message : undefined;
    throw new ConfigError(file, field || '(top level)', nested ?? issue.message);
  }
  return deepFreeze(result.data);
}

export function loadPlans(dir: string): PlansConfig {
  return loadYamlFile(join(dir, PLANS_FILE), plansFileSchema);
}

export function loadGatewayFile(dir: string): GatewayFile {
  return loadYamlFile(join(dir, GATEWAY_FILE), gatewayFileSchema);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
