import type { Ajv2020, ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import { ajv2020WithFormats } from '../../plugins/ajv.js';
import { atPointer, escapePointer } from './json-pointer.js';
import { asJsonSchema2020 } from './openapi-3-0.js';
import { bundleDocument } from './openapi-bundle.js';
import { OpenApiDocumentError } from './openapi-document-error.js';
import { READ_ONLY_KEYWORD, requestSchemas } from './openapi-read-only.js';
import { openApiSchemaIssue } from './openapi-schema-check.js';

export { OpenApiDocumentError } from './openapi-document-error.js';

/** One reason a request does not match its operation, as the 400 body lists it. */
export interface Issue {
  in: 'path' | 'query' | 'header' | 'body';
  /** JSON pointer into the parameter or body (`/name`, `/items/0/id`); "" for the whole. */
  pointer: string;
  message: string;
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
const LOCATIONS = ['path', 'query', 'header'] as const;
type Location = (typeof LOCATIONS)[number];
/** OpenAPI: header parameters with these names are ignored (they are described elsewhere). */
const IGNORED_HEADERS = new Set(['accept', 'content-type', 'authorization']);

interface Parameter {
  name: string;
  /** Query arrays are read with every value; the rest with the first. */
  array: boolean;
}

interface Operation {
  /** Per location: the parameters, and one object schema over them (types coerced from strings). */
  params: Partial<Record<Location, { list: Parameter[]; validate: ValidateFunction }>>;
  body?: { required: boolean; mediaTypes: string[]; json?: ValidateFunction; jsonTypes: string[] };
}

interface PathEntry {
  template: string;
  pattern: RegExp;
  names: string[];
  operations: Map<string, Operation>;
}

export type Match =
  | { kind: 'operation'; operation: Operation; pathParams: Record<string, string> }
  | { kind: 'no_path' }
  | { kind: 'no_method'; allow: string[] };

/**
 * An OpenAPI 3.0 or 3.1 document compiled once (at load) into per-operation validators: every
 * schema a request can meet is compiled by Ajv (JSON Schema 2020-12, with ajv-formats), so a
 * request costs a path match and compiled checks, never a schema walk. At load the document is
 * read with the files its `$ref`s name (openapi-bundle.ts) and checked against the official
 * OpenAPI schema of its version (openapi-schema-check.ts); request bodies are checked with
 * `readOnly` honoured (openapi-read-only.ts).
 */
export class OpenApiValidator {
  private readonly paths: PathEntry[] = [];
  /** The path of the first server URL (`/v1`), before every path of the document. */
  readonly basePath: string;

  constructor(
    readonly file: string,
    path: string,
  ) {
    const doc = bundleDocument(file, path);
    const version = doc.openapi;
    if (typeof version !== 'string' || !/^3\.[01]\.\d+/.test(version))
      throw new OpenApiDocumentError(file, '/openapi', 'must be an OpenAPI 3.0.x or 3.1.x document');
    const issue = openApiSchemaIssue(doc, version.startsWith('3.0') ? '3.0' : '3.1');
    if (issue) throw new OpenApiDocumentError(file, issue.pointer, issue.message);
    if (version.startsWith('3.0')) asJsonSchema2020(doc);
    const servers = doc.servers as Array<{ url?: unknown }> | undefined;
    const serverUrl = typeof servers?.[0]?.url === 'string' ? servers[0].url.replace(/\{[^}]*\}/g, 'x') : '/';
    this.basePath = new URL(serverUrl, 'http://x').pathname.replace(/\/$/, '');
    const paths = doc.paths;
    if (!paths || typeof paths !== 'object' || Array.isArray(paths))
      throw new OpenApiDocumentError(file, '/paths', 'must be an object of paths');

    const ajv = (coerceTypes: false | 'array', schemas: Record<string, unknown>) => {
      const instance = ajv2020WithFormats({ strict: false, allErrors: true, coerceTypes, logger: false, validateFormats: true });
      instance.addKeyword({ keyword: READ_ONLY_KEYWORD, schemaType: 'boolean', validate: (readOnly: boolean) => !readOnly });
      instance.addSchema(schemas, DOC_ID);
      return instance;
    };
    const bodies = ajv(false, requestSchemas(doc));
    const params = ajv('array', doc);
    const compile = (instance: Ajv2020, schema: object, pointer: string): ValidateFunction => {
      try {
        return instance.compile(schema);
      } catch (err) {
        throw new OpenApiDocumentError(file, pointer, `schema does not compile: ${(err as Error).message.split('\n')[0]}`);
      }
    };
    const resolve = (value: unknown, pointer: string): { value: Record<string, unknown>; pointer: string } => {
      let current = { value, pointer };
      for (let hops = 0; hops < 20; hops++) {
        const ref = (current.value as { $ref?: unknown } | undefined)?.$ref;
        if (typeof ref !== 'string') break;
        if (!ref.startsWith('#/'))
          throw new OpenApiDocumentError(file, `${current.pointer}/$ref`, `only local references (#/...) are supported, got "${ref}"`);
        const target = atPointer(doc, ref.slice(1));
        if (target === undefined) throw new OpenApiDocumentError(file, `${current.pointer}/$ref`, `"${ref}" points to nothing`);
        current = { value: target, pointer: ref.slice(1) };
      }
      if (!current.value || typeof current.value !== 'object') throw new OpenApiDocumentError(file, current.pointer, 'must be an object');
      return current as { value: Record<string, unknown>; pointer: string };
    };

    for (const [template, item] of Object.entries(paths as Record<string, unknown>)) {
      const itemPointer = `/paths/${escapePointer(template)}`;
      if (!template.startsWith('/')) throw new OpenApiDocumentError(file, itemPointer, 'a path must start with "/"');
      const pathItem = resolve(item, itemPointer).value;
      const shared = Array.isArray(pathItem.parameters) ? pathItem.parameters : [];
      const operations = new Map<string, Operation>();
      for (const method of METHODS) {
        const op = pathItem[method] as Record<string, unknown> | undefined;
        if (op === undefined) continue;
        const opPointer = `${itemPointer}/${method}`;
        if (!op || typeof op !== 'object') throw new OpenApiDocumentError(file, opPointer, 'must be an object');
        // Operation parameters override path-item ones of the same name and location.
        const declared = new Map<string, { param: Record<string, unknown>; pointer: string }>();
        const own = Array.isArray(op.parameters) ? op.parameters : [];
        [
          ...shared.map((p, i) => [p, `${itemPointer}/parameters/${i}`] as const),
          ...own.map((p, i) => [p, `${opPointer}/parameters/${i}`] as const),
        ].forEach(([raw, pointer]) => {
          const { value: param, pointer: at } = resolve(raw, pointer);
          if (typeof param.name !== 'string' || !['path', 'query', 'header', 'cookie'].includes(param.in as string))
            throw new OpenApiDocumentError(file, at, 'a parameter needs a name and `in` (path, query, header or cookie)');
          declared.set(`${param.in as string}:${param.in === 'header' ? param.name.toLowerCase() : param.name}`, { param, pointer: at });
        });
        const operation: Operation = { params: {} };
        for (const location of LOCATIONS) {
          const list: Parameter[] = [];
          const properties: Record<string, unknown> = {};
          const required: string[] = [];
          for (const { param, pointer } of declared.values()) {
            if (param.in !== location) continue;
            const name = location === 'header' ? (param.name as string).toLowerCase() : (param.name as string);
            if (location === 'header' && IGNORED_HEADERS.has(name)) continue;
            const schema = param.schema ?? firstMediaSchema(param.content) ?? {};
            properties[name] = { $ref: `${DOC_ID}#${param.schema ? `${pointer}/schema` : pointer}` };
            if (!param.schema) properties[name] = typeof schema === 'object' ? schema : {};
            if (param.required === true || location === 'path') required.push(name);
            const type = (schema as { type?: unknown }).type;
            list.push({ name, array: location === 'query' && (type === 'array' || (Array.isArray(type) && type.includes('array'))) });
          }
          if (list.length === 0) continue;
          const validate = compile(params, { type: 'object', properties, required }, `${opPointer}/parameters`);
          operation.params[location] = { list, validate };
        }
        if (op.requestBody !== undefined) {
          const { value: body, pointer } = resolve(op.requestBody, `${opPointer}/requestBody`);
          const content = (body.content ?? {}) as Record<string, { schema?: unknown }>;
          const mediaTypes = Object.keys(content).map((t) => t.toLowerCase());
          const jsonType = Object.keys(content).find((t) => isJsonMediaType(t.toLowerCase()));
          const json =
            jsonType && content[jsonType]?.schema !== undefined
              ? compile(
                  bodies,
                  { $ref: `${DOC_ID}#${pointer}/content/${escapePointer(jsonType)}/schema` },
                  `${pointer}/content/${escapePointer(jsonType)}/schema`,
                )
              : undefined;
          operation.body = { required: body.required === true, mediaTypes, json, jsonTypes: mediaTypes.filter(isJsonMediaType) };
        }
        operations.set(method.toUpperCase(), operation);
      }
      const names: string[] = [];
      const pattern = new RegExp(
        `^${escapeRegExp(this.basePath)}${template
          .split(/(\{[^}]+\})/)
          .map((part) => {
            const name = /^\{([^}]+)\}$/.exec(part)?.[1];
            if (name === undefined) return escapeRegExp(part);
            names.push(name);
            return '([^/]+)';
          })
          .join('')}/?$`,
      );
      this.paths.push({ template, pattern, names, operations });
    }
    // OpenAPI: a concrete path wins over a templated one that also matches (fewer templates first).
    this.paths.sort((a, b) => a.names.length - b.names.length);
  }

  /** The operation for a method and a path (no query), or why there is none. */
  match(method: string, path: string): Match {
    const allow = new Set<string>();
    for (const entry of this.paths) {
      const found = entry.pattern.exec(path);
      if (!found) continue;
      const operation = entry.operations.get(method) ?? (method === 'HEAD' ? entry.operations.get('GET') : undefined);
      if (operation) {
        const pathParams: Record<string, string> = {};
        entry.names.forEach((name, i) => (pathParams[name] = found[i + 1]!));
        return { kind: 'operation', operation, pathParams };
      }
      for (const m of entry.operations.keys()) allow.add(m);
    }
    if (allow.size === 0) return { kind: 'no_path' };
    if (allow.has('GET')) allow.add('HEAD');
    return { kind: 'no_method', allow: [...allow].sort() };
  }
}

export const MAX_ISSUES = 10;

/** Path, query and header parameters against their schemas (strings coerced to the declared types). */
export function checkParameters(
  operation: Operation,
  pathParams: Record<string, string>,
  query: URLSearchParams,
  headers: Record<string, string | string[] | undefined>,
): Issue[] {
  const issues: Issue[] = [];
  for (const location of LOCATIONS) {
    const entry = operation.params[location];
    if (!entry) continue;
    const values: Record<string, unknown> = {};
    for (const { name, array } of entry.list) {
      if (location === 'path') {
        const raw = pathParams[name];
        if (raw === undefined) continue;
        try {
          values[name] = decodeURIComponent(raw);
        } catch {
          issues.push({ in: 'path', pointer: `/${escapePointer(name)}`, message: 'is not valid percent-encoding' });
        }
      } else if (location === 'query') {
        const all = query.getAll(name);
        if (all.length > 0) values[name] = array ? all : all[0];
      } else {
        const value = headers[name];
        if (value !== undefined) values[name] = Array.isArray(value) ? value.join(', ') : value;
      }
    }
    if (!entry.validate(values)) issues.push(...issuesOf(location, entry.validate.errors ?? []));
  }
  return issues.slice(0, MAX_ISSUES);
}

/** What to do with the request's body: its media type against the operation's. */
export function bodyPlan(
  operation: Operation,
  contentType: string | undefined,
  hasBody: boolean,
): { kind: 'none' } | { kind: 'json'; validate?: ValidateFunction } | { kind: 'unsupported'; accepted: string[] } | { kind: 'missing' } {
  const body = operation.body;
  if (!hasBody) return body?.required ? { kind: 'missing' } : { kind: 'none' };
  if (!body) return { kind: 'none' };
  const mediaType = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  const accepted = body.mediaTypes;
  const matches = (declared: string) =>
    declared === mediaType || declared === '*/*' || (declared.endsWith('/*') && mediaType.startsWith(declared.slice(0, -1)));
  if (!mediaType || !accepted.some(matches)) return { kind: 'unsupported', accepted };
  if (isJsonMediaType(mediaType)) return { kind: 'json', validate: body.json };
  return { kind: 'none' };
}

export function bodyIssues(validate: ValidateFunction, value: unknown): Issue[] {
  return validate(value) ? [] : issuesOf('body', validate.errors ?? []).slice(0, MAX_ISSUES);
}

function issuesOf(location: Issue['in'], errors: ErrorObject[]): Issue[] {
  return errors.slice(0, MAX_ISSUES).map((error) => {
    let pointer = error.instancePath;
    // A missing property is reported on its parent: point at the property itself.
    if (error.keyword === 'required') pointer += `/${escapePointer(String((error.params as { missingProperty: string }).missingProperty))}`;
    if (error.keyword === 'additionalProperties')
      pointer += `/${escapePointer(String((error.params as { additionalProperty: string }).additionalProperty))}`;
    const message =
      error.keyword === READ_ONLY_KEYWORD
        ? 'is read-only'
        : error.keyword === 'required'
          ? 'is required'
          : error.keyword === 'additionalProperties'
            ? 'is not allowed'
            : error.keyword === 'enum'
              ? `must be one of ${JSON.stringify((error.params as { allowedValues: unknown[] }).allowedValues).slice(0, 200)}`
              : (error.message ?? 'is invalid');
    return { in: location, pointer, message };
  });
}

const DOC_ID = 'openapi:document';

function firstMediaSchema(content: unknown): unknown {
  if (!content || typeof content !== 'object') return undefined;
  return (Object.values(content)[0] as { schema?: unknown } | undefined)?.schema;
}

function isJsonMediaType(type: string): boolean {
  return type === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(type);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
