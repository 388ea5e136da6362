import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bodyIssues, bodyPlan, OpenApiDocumentError, OpenApiValidator } from '../../src/policies/validate/openapi-validator.js';

// A `validate:` document is checked against the official OpenAPI 3.0 / 3.1 schema at load, its
// `$ref`s into other files are followed, and readOnly properties are refused in request bodies.

function documents(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-openapi-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

function refusal(dir: string, file = 'api.yaml'): OpenApiDocumentError {
  try {
    new OpenApiValidator(file, join(dir, file));
  } catch (err) {
    if (err instanceof OpenApiDocumentError) return err;
    throw err;
  }
  throw new Error('the document was accepted');
}

const header31 = 'openapi: 3.1.0\ninfo: { title: t, version: "1" }\n';
const header30 = 'openapi: 3.0.3\ninfo: { title: t, version: "1" }\n';

function bodyCheck(validator: OpenApiValidator, method: string, path: string, body: unknown) {
  const match = validator.match(method, path);
  if (match.kind !== 'operation') throw new Error(`no operation: ${match.kind}`);
  const plan = bodyPlan(match.operation, 'application/json', true);
  if (plan.kind !== 'json' || !plan.validate) throw new Error(`no JSON body schema: ${plan.kind}`);
  return bodyIssues(plan.validate, body).map((i) => `${i.pointer} ${i.message}`);
}

describe('an OpenAPI document checked against the OpenAPI schema at load', () => {
  it('refuses a 3.1 document whose responses is the number 7, naming the JSON pointer', () => {
    const dir = documents({ 'api.yaml': `${header31}paths:\n  /pets:\n    get:\n      responses: 7\n` });
    const error = refusal(dir);
    expect(error.file).toBe('api.yaml');
    expect(error.pointer).toBe('/paths/~1pets/get/responses');
    expect(error.message).toMatch(/^api\.yaml: \/paths\/~1pets\/get\/responses: .*OpenAPI 3\.1/);
  });

  it('refuses a 3.0 document without info, and a parameter without its `in`', () => {
    expect(refusal(documents({ 'api.yaml': 'openapi: 3.0.3\npaths: {}\n' })).pointer).toBe('');
    const dir = documents({
      'api.yaml': `${header30}paths:\n  /pets:\n    get:\n      parameters: [{ name: limit, schema: { type: integer } }]\n      responses: { "200": { description: ok } }\n`,
    });
    expect(refusal(dir).pointer).toMatch(/^\/paths\/~1pets\/get\/parameters\/0/);
  });

  it('accepts the valid documents it always accepted', () => {
    const dir = documents({
      'api.yaml': `${header30}paths:\n  /pets/{id}:\n    get:\n      parameters: [{ name: id, in: path, required: true, schema: { type: integer, nullable: true } }]\n      responses: { "200": { description: ok } }\n`,
    });
    expect(new OpenApiValidator('api.yaml', join(dir, 'api.yaml')).match('GET', '/pets/3').kind).toBe('operation');
  });
});

describe('$refs into other files', () => {
  const files = {
    'api.yaml': `${header31}paths:\n  /pets:\n    $ref: paths/pets.yaml\n  /trees:\n    post:\n      requestBody:\n        content:\n          application/json:\n            schema: { $ref: "schemas/tree.yaml" }\n      responses: { "200": { description: ok } }\n`,
    'paths/pets.yaml': `post:\n  requestBody:\n    $ref: "../bodies.yaml#/pet"\n  responses: { "200": { description: ok } }\n`,
    'bodies.yaml': `pet:\n  required: true\n  content:\n    application/json:\n      schema: { $ref: "schemas/pet.yaml" }\n`,
    'schemas/pet.yaml': `type: object\nrequired: [id, name]\nproperties:\n  id: { $ref: "#/$defs/id" }\n  name: { $ref: "common.yaml#/Name" }\n  password: { type: string, writeOnly: true }\n$defs:\n  id: { type: integer, readOnly: true }\n`,
    'schemas/common.yaml': `Name: { type: string, minLength: 1 }\n`,
    'schemas/tree.yaml': `type: object\nproperties:\n  label: { type: string }\n  children: { type: array, items: { $ref: "tree.yaml" } }\n`,
  };

  it('follows them, relative to the file that holds each one, through several files', () => {
    const validator = new OpenApiValidator('api.yaml', join(documents(files), 'api.yaml'));
    expect(bodyCheck(validator, 'POST', '/pets', { name: 'Rex', password: 'x' })).toEqual([]);
    expect(bodyCheck(validator, 'POST', '/pets', { name: '' })).toEqual(['/name must NOT have fewer than 1 characters']);
  });

  it('follows a schema that refers to itself across files', () => {
    const validator = new OpenApiValidator('api.yaml', join(documents(files), 'api.yaml'));
    expect(bodyCheck(validator, 'POST', '/trees', { label: 'a', children: [{ label: 'b', children: [] }] })).toEqual([]);
    expect(bodyCheck(validator, 'POST', '/trees', { children: [{ children: [{ label: 7 }] }] })).toEqual([
      '/children/0/children/0/label must be string',
    ]);
  });

  it('refuses a reference to a file that does not exist, naming the pointer of the $ref and the file', () => {
    const dir = documents({ ...files, 'paths/pets.yaml': `post:\n  requestBody:\n    $ref: "../nowhere.yaml#/pet"\n` });
    const error = refusal(dir);
    expect(error.pointer).toBe('/paths/~1pets/post/requestBody/$ref');
    expect(error.reason).toContain('nowhere.yaml');
  });

  it('refuses a reference to a part of a file that is not there, and a reference over the network', () => {
    expect(refusal(documents({ ...files, 'bodies.yaml': 'other: {}\n' })).reason).toContain('points to nothing');
    const remote = documents({ ...files, 'schemas/common.yaml': 'Name: { $ref: "https://example.com/name.json" }\n' });
    expect(refusal(remote).reason).toContain('https://example.com/name.json');
  });
});

describe('readOnly and writeOnly in request bodies', () => {
  const files = {
    'api.yaml': `${header30}paths:\n  /users:\n    post:\n      requestBody:\n        content:\n          application/json:\n            schema: { $ref: "#/components/schemas/User" }\n      responses: { "200": { description: ok } }\ncomponents:\n  schemas:\n    User:\n      type: object\n      required: [id, name, password]\n      properties:\n        id: { type: integer, readOnly: true }\n        name: { type: string }\n        password: { type: string, writeOnly: true }\n`,
  };

  it('a readOnly property required by the schema is not required in a request, and is refused when sent', () => {
    const validator = new OpenApiValidator('api.yaml', join(documents(files), 'api.yaml'));
    expect(bodyCheck(validator, 'POST', '/users', { name: 'a', password: 'p' })).toEqual([]);
    expect(bodyCheck(validator, 'POST', '/users', { id: 4, name: 'a', password: 'p' })).toEqual(['/id is read-only']);
  });

  it('a writeOnly property is a request property like any other: required when the schema says so', () => {
    const validator = new OpenApiValidator('api.yaml', join(documents(files), 'api.yaml'));
    expect(bodyCheck(validator, 'POST', '/users', { name: 'a' })).toEqual(['/password is required']);
  });
});
