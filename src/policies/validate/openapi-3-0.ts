/**
 * An OpenAPI 3.0 document's schemas made JSON Schema 2020-12 (what OpenAPI 3.1 uses), in place on
 * a copy: `nullable: true` → the type list with "null" (or an anyOf with null), and the draft-4
 * boolean `exclusiveMinimum`/`exclusiveMaximum` → their numeric form. Every object of the document
 * is visited; the changes apply only where the keyword has the OpenAPI 3.0 shape (a boolean), so a
 * property that happens to be named `nullable` is left alone.
 */
export function asJsonSchema2020(node: unknown): void {
  if (Array.isArray(node)) {
    for (const item of node) asJsonSchema2020(item);
    return;
  }
  if (!node || typeof node !== 'object') return;
  const schema = node as Record<string, unknown>;
  for (const value of Object.values(schema)) asJsonSchema2020(value);
  if (schema.nullable === true) {
    delete schema.nullable;
    if (typeof schema.type === 'string') schema.type = [schema.type, 'null'];
    else if (Array.isArray(schema.type)) schema.type = [...(schema.type as unknown[]), 'null'];
    else if (schema.$ref !== undefined || schema.allOf || schema.oneOf || schema.anyOf) {
      const inner = { ...schema };
      for (const key of Object.keys(schema)) delete schema[key];
      schema.anyOf = [inner, { type: 'null' }];
    }
    if (Array.isArray(schema.enum) && !schema.enum.includes(null)) schema.enum = [...(schema.enum as unknown[]), null];
  } else if (schema.nullable === false) delete schema.nullable;
  for (const [exclusive, bound] of [
    ['exclusiveMinimum', 'minimum'],
    ['exclusiveMaximum', 'maximum'],
  ] as const) {
    if (schema[exclusive] === true && typeof schema[bound] === 'number') {
      schema[exclusive] = schema[bound];
      delete schema[bound];
    } else if (typeof schema[exclusive] === 'boolean') delete schema[exclusive];
  }
}
