import type { Ajv2020, ValidateFunction } from 'ajv/dist/2020.js';
import { ajv2020WithFormats } from './ajv.js';
import type { OptionsSchema, PolicyDefinition, SafeParseSchema } from './policy-definition.js';

/** The options as the policy reads them, or the first problem: the path inside `options` and why. */
export type CheckedOptions = { ok: true; value: unknown } | { ok: false; path: string; reason: string };

/**
 * Checks a policy entry's `options` against its definition's schema (a zod-like schema, or a JSON
 * Schema object compiled by Ajv), then compiles them with its `compile`. A policy without a schema
 * takes no options: any given are refused, so a typo cannot pass silently.
 */
export function checkOptions(definition: PolicyDefinition<unknown, unknown, string>, raw: unknown): CheckedOptions {
  const schema = definition.options;
  let value: unknown;
  if (!schema) {
    if (raw !== undefined && !(isPlainObject(raw) && Object.keys(raw).length === 0))
      return { ok: false, path: '', reason: `the policy "${definition.name}" takes no options` };
    value = undefined;
  } else if (isSafeParse(schema)) {
    const result = schema.safeParse(raw ?? {});
    if (!result.success) {
      const issue = result.error.issues[0];
      return { ok: false, path: (issue?.path ?? []).map(String).join('.'), reason: issue?.message ?? 'invalid' };
    }
    value = result.data;
  } else {
    const validate = compiledJsonSchema(schema);
    value = structuredClone(raw ?? {});
    if (!validate(value)) {
      const error = validate.errors?.[0];
      const path = (error?.instancePath ?? '').split('/').filter(Boolean).join('.');
      const extra = error?.keyword === 'additionalProperties' ? ` (${String(error.params.additionalProperty)})` : '';
      return { ok: false, path, reason: `${error?.message ?? 'invalid'}${extra}` };
    }
  }
  try {
    return { ok: true, value: definition.compile ? definition.compile(value) : value };
  } catch (err) {
    return { ok: false, path: '', reason: `the policy "${definition.name}" refused its options: ${(err as Error).message}` };
  }
}

function isSafeParse(schema: OptionsSchema<unknown>): schema is SafeParseSchema<unknown> {
  return typeof (schema as { safeParse?: unknown }).safeParse === 'function';
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Made on the first JSON Schema: a gateway whose policies use zod (or none) never builds it. */
let ajv: Ajv2020 | undefined;
const compiled = new WeakMap<object, ValidateFunction>();

/** One compile per schema object: a reload checks new options against the schema compiled at start. */
function compiledJsonSchema(schema: object): ValidateFunction {
  let validate = compiled.get(schema);
  if (!validate) {
    if (!ajv) {
      ajv = ajv2020WithFormats({ strict: false, allErrors: false, useDefaults: true, logger: false });
    }
    compiled.set(schema, (validate = ajv.compile(schema)));
  }
  return validate;
}
