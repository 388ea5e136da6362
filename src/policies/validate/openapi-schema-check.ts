import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import { ajv2020WithFormats, ajvDraft04WithFormats } from '../../plugins/ajv.js';

/**
 * The official JSON Schemas of OpenAPI 3.0 (draft 4) and 3.1 (2020-12), as
 * @seriousme/openapi-schema-validator ships them (the contract tests check openapi.yaml with the
 * same package). Each is compiled once per process, on first use.
 */
const SCHEMA_FILES = {
  '3.0': '@seriousme/openapi-schema-validator/schemas/v3.0/schema.json',
  '3.1': '@seriousme/openapi-schema-validator/schemas/v3.1/schema.json',
} as const;

export type OpenApiLine = keyof typeof SCHEMA_FILES;

const compiled = new Map<OpenApiLine, ValidateFunction>();

function validatorFor(line: OpenApiLine): ValidateFunction {
  let validate = compiled.get(line);
  if (!validate) {
    const schema = JSON.parse(readFileSync(createRequire(import.meta.url).resolve(SCHEMA_FILES[line]), 'utf8')) as object;
    // Both schemas use keywords Ajv's strict mode does not know; formats are checked (uri, email…).
    const ajv =
      line === '3.0' ? ajvDraft04WithFormats({ strict: false, logger: false }) : ajv2020WithFormats({ strict: false, logger: false });
    validate = ajv.compile(schema);
    compiled.set(line, validate);
  }
  return validate;
}

/**
 * Where a document departs from the OpenAPI schema of its line, or undefined when it does not:
 * the deepest place Ajv reports (a `oneOf` of a Parameter or a Reference fails at both; the
 * deeper reason is the one an author fixes).
 */
export function openApiSchemaIssue(document: unknown, line: OpenApiLine): { pointer: string; message: string } | undefined {
  const validate = validatorFor(line);
  if (validate(document)) return undefined;
  const errors = validate.errors ?? [];
  const deepest = errors.reduce<ErrorObject | undefined>(
    (best, error) => (!best || depth(error.instancePath) > depth(best.instancePath) ? error : best),
    undefined,
  );
  if (!deepest) return { pointer: '', message: `does not match the OpenAPI ${line} schema` };
  const extra = (deepest.params as { additionalProperty?: string }).additionalProperty;
  const detail = extra === undefined ? (deepest.message ?? 'is invalid') : `has "${extra}", which OpenAPI ${line} does not define here`;
  return { pointer: deepest.instancePath, message: `does not match the OpenAPI ${line} schema: ${detail}` };
}

function depth(pointer: string): number {
  return pointer === '' ? 0 : pointer.split('/').length;
}
