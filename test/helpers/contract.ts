import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { Validator } from '@seriousme/openapi-schema-validator';
import { OpenAPIBackend, SetMatchType, type Operation } from 'openapi-backend';
import { parse as parseYaml } from 'yaml';
import { REPO_ROOT } from './processes.js';

// Checks real HTTP answers against openapi.yaml with openapi-backend (routing, response body and
// header validation, Ajv underneath), adapted to OpenAPI 3.1 in two places:
// - its own definition check uses an OpenAPI 3.0 meta-schema, which refuses 3.1 documents, so the
//   document is checked against the official 3.1 schema with @seriousme/openapi-schema-validator;
// - it compiles schemas with Ajv's draft-07 dialect, while 3.1 schemas are JSON Schema 2020-12, so
//   Ajv2020 is swapped in.
// Two checks the library leaves out are added here: that the status is documented at all
// (openapi-backend passes an undocumented status silently) and that headers the document marks
// `required` are present (it only checks the values of those that are).

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

export interface Observed {
  method: string;
  /** As requested, e.g. /v1/pets/42?x=1. */
  path: string;
  status: number;
  headers: Headers;
  body: unknown;
}

interface HeaderObject {
  required?: boolean;
  schema?: object;
}
interface ResponseObject {
  headers?: Record<string, HeaderObject>;
  content?: Record<string, { schema?: object }>;
}

/** openapi-backend with its OpenAPI 3.0 definition check replaced (the 3.1 check runs before init). */
class OpenAPI31Backend extends OpenAPIBackend {
  override validateDefinition() {
    return this.document;
  }
}

export class Contract {
  private constructor(
    readonly api: OpenAPIBackend,
    private readonly components: { responses: Record<string, ResponseObject> },
  ) {}

  /** `file` at the repository root, its paths below `apiRoot` (openapi-admin.yaml: /admin/v1). */
  static async load(file = 'openapi.yaml', apiRoot = '/v1'): Promise<Contract> {
    const definition = parseYaml(readFileSync(join(REPO_ROOT, file), 'utf8'));
    const valid = await new Validator().validate(definition);
    if (!valid.valid) throw new Error(`${file} is not a valid OpenAPI 3.1 document: ${JSON.stringify(valid.errors)}`);
    const api = new OpenAPI31Backend({
      definition,
      apiRoot,
      strict: true,
      // Validators are compiled for requests too (unused here): `validate: false` would skip them all.
      ignoreTrailingSlashes: false,
      customizeAjv: (_draft07, options) => addFormats(new Ajv2020({ ...options, strict: false })),
    });
    await api.init();
    const dereferenced = api.document as unknown as { components: { responses: Record<string, ResponseObject> } };
    return new Contract(api, dereferenced.components);
  }

  /** The documented operation the request maps to (throws if none: the request itself is off-contract). */
  operation(method: string, path: string): Operation {
    const operation = this.api.router.matchOperation({ method, path, headers: {} });
    if (!operation) throw new Error(`${method} ${path} is not an operation of openapi.yaml`);
    return operation;
  }

  /** Every way the answer departs from the operation's documented response; [] when it conforms. */
  check(observed: Observed): string[] {
    const operation = this.operation(observed.method, observed.path);
    const responses = (operation.responses ?? {}) as Record<string, ResponseObject>;
    const response = responses[String(observed.status)] ?? responses[`${Math.floor(observed.status / 100)}XX`] ?? responses.default;
    const where = `${operation.operationId} ${observed.status}`;
    if (!response) return [`${where}: status not documented (documented: ${Object.keys(responses).join(', ')})`];
    const problems = this.checkContent(where, response, observed);
    const body = this.api.validator.validateResponse(observed.body, operation, observed.status);
    if (!body.valid) problems.push(...(body.errors ?? []).map((e) => `${where}: body${e.instancePath} ${e.message}`));
    const headers = this.api.validator.validateResponseHeaders(headerObject(observed.headers), operation, {
      statusCode: observed.status,
      setMatchType: SetMatchType.Any,
    });
    if (!headers.valid)
      problems.push(...(headers.errors ?? []).map((e) => `${where}: header ${e.instancePath.replace('/headers/', '')} ${e.message}`));
    return [...problems, ...missingHeaders(where, response, observed.headers)];
  }

  /**
   * For answers to requests outside any operation (an unknown path → 404, a wrong method → 405):
   * checked against the named component response (`NotFound`, `MethodNotAllowed`).
   */
  checkComponentResponse(name: string, observed: Observed): string[] {
    const response = this.components.responses[name];
    if (!response) return [`no component response ${name}`];
    const where = `${name} ${observed.status}`;
    const problems = this.checkContent(where, response, observed);
    const ajv = this.api.validator.getAjv('responseValidator' as never, { coerceTypes: true });
    const schema = response.content?.['application/json']?.schema;
    if (schema) {
      const validate = ajv.compile(schema);
      if (!validate(observed.body)) problems.push(...(validate.errors ?? []).map((e) => `${where}: body${e.instancePath} ${e.message}`));
    }
    const headers = headerObject(observed.headers);
    for (const [header, spec] of Object.entries(response.headers ?? {})) {
      const value = headers[header.toLowerCase()];
      if (value === undefined || !spec.schema) continue;
      const holder = { value };
      const validate = ajv.compile({ type: 'object', properties: { value: spec.schema } });
      if (!validate(holder)) problems.push(`${where}: header ${header} ${validate.errors?.[0]?.message}`);
    }
    return [...problems, ...missingHeaders(where, response, observed.headers)];
  }

  private checkContent(where: string, response: ResponseObject, observed: Observed): string[] {
    if (!response.content) return observed.body === undefined ? [] : [`${where}: a body where none is documented`];
    const type = (observed.headers.get('content-type') ?? '').split(';')[0]!.trim();
    return Object.hasOwn(response.content, type) ? [] : [`${where}: content-type ${type || '(none)'} not documented`];
  }
}

function headerObject(headers: Headers): Record<string, string> {
  return Object.fromEntries([...headers.entries()].map(([name, value]) => [name.toLowerCase(), value]));
}

function missingHeaders(where: string, response: ResponseObject, headers: Headers): string[] {
  return Object.entries(response.headers ?? {})
    .filter(([name, spec]) => spec.required && !headers.has(name))
    .map(([name]) => `${where}: required header ${name} missing`);
}
