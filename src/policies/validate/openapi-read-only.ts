import { atPointer } from './json-pointer.js';

/** The keyword a readOnly schema carries in the request copy; Ajv fails it wherever it is met. */
export const READ_ONLY_KEYWORD = 'x-tollgate-read-only';

/**
 * A copy of a (bundled, 2020-12) document whose schemas describe requests: OpenAPI's `readOnly`
 * ("MAY be sent in a response, SHOULD NOT be sent in a request; `required` applies to responses
 * only") becomes a keyword that fails when the property is present, and a readOnly property is
 * dropped from its object's `required`. `writeOnly` needs nothing: it constrains responses,
 * which the gateway does not check. Only a property whose own schema (or the local `$ref` it
 * is) says readOnly is seen; one made readOnly inside an `allOf` branch is not.
 */
export function requestSchemas(document: Record<string, unknown>): Record<string, unknown> {
  const copy = structuredClone(document);
  const readOnly = (schema: unknown): boolean => {
    for (let hops = 0; hops < 20 && schema && typeof schema === 'object'; hops++) {
      const node = schema as Record<string, unknown>;
      if (node.readOnly === true) return true;
      if (typeof node.$ref !== 'string' || !node.$ref.startsWith('#')) return false;
      schema = atPointer(document, node.$ref.slice(1));
    }
    return false;
  };
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!node || typeof node !== 'object') return;
    const schema = node as Record<string, unknown>;
    for (const value of Object.values(schema)) visit(value);
    if (schema.readOnly === true) schema[READ_ONLY_KEYWORD] = true;
    const properties = schema.properties;
    if (Array.isArray(schema.required) && properties && typeof properties === 'object')
      schema.required = schema.required.filter((name) => !readOnly((properties as Record<string, unknown>)[String(name)]));
  };
  visit(copy);
  return copy;
}
