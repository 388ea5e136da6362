import { createRequire } from 'node:module';
import { isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ERRORS } from '../errors/registry.js';
import type { PolicyDefinition } from './policy-definition.js';

export type AnyPolicy = PolicyDefinition<unknown, unknown, string>;

const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const CODE = /^[a-z][a-z0-9_]{0,63}$/;
const HOOKS = ['access', 'beforeForward', 'responseHead', 'afterAnswer'] as const;

/**
 * The file a `use:` names: `./x.js` or `../x.js` relative to the config directory, an absolute
 * path, or an npm package name resolved from the config directory, then from the working directory.
 */
export function resolvePolicyPath(use: string, configDir: string): string {
  if (use.startsWith('./') || use.startsWith('../')) return resolve(configDir, use);
  if (isAbsolute(use)) return use;
  const tried: string[] = [];
  for (const from of [resolve(configDir), process.cwd()]) {
    try {
      return createRequire(join(from, 'noop.js')).resolve(use);
    } catch (err) {
      tried.push(`${from}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  throw new Error(`cannot find the package "${use}" (looked from ${tried.join('; ')})`);
}

/**
 * Imports a policy's code once, at start (code does not reload: docs/plugins.md): its default
 * export, or its export named `policy`, checked to be a policy definition.
 */
export async function loadPolicyCode(use: string, configDir: string): Promise<AnyPolicy> {
  const path = resolvePolicyPath(use, configDir);
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`cannot load ${path}: ${(err as Error).message}`, { cause: err });
  }
  const candidate = module.default ?? module.policy;
  const problem = definitionProblem(candidate);
  if (problem) throw new Error(`${path} does not export a policy (default or \`policy\`): ${problem}`);
  return candidate as AnyPolicy;
}

/** Why `value` is not a usable policy definition, or undefined when it is. */
export function definitionProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return 'not an object made by definePolicy';
  const definition = value as Record<string, unknown>;
  if (typeof definition.name !== 'string' || !NAME.test(definition.name)) return 'its name must be 1-64 of a-z 0-9 . _ -';
  if (!HOOKS.some((hook) => definition[hook] !== undefined)) return `it hooks no phase (${HOOKS.join(', ')})`;
  for (const hook of HOOKS)
    if (definition[hook] !== undefined && typeof definition[hook] !== 'function') return `${hook} must be a function`;
  if (definition.compile !== undefined && typeof definition.compile !== 'function') return 'compile must be a function';
  if (definition.options !== undefined && (typeof definition.options !== 'object' || definition.options === null))
    return 'options must be a schema (zod or JSON Schema)';
  const errors = (definition.errors ?? {}) as Record<string, { status?: unknown; message?: unknown }>;
  for (const [code, error] of Object.entries(errors)) {
    if (!CODE.test(code)) return `error code "${code}" must be lower_snake_case`;
    if (code in ERRORS) return `error code "${code}" is one of the gateway's own`;
    if (typeof error?.status !== 'number' || !Number.isInteger(error.status) || error.status < 400 || error.status > 499)
      return `error "${code}" needs a status from 400 to 499`;
    if (typeof error.message !== 'string' || error.message.length === 0) return `error "${code}" needs a message`;
  }
  return undefined;
}
