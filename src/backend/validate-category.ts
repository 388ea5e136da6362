import type { NewCategory } from './category.js';

// Validation of a createCategory body (openapi.yaml: NewCategory). Decisions where the interface is
// silent, so clients get one predictable answer:
// - The body must be a JSON object; an array, null, a number, a string or a boolean is refused.
// - `id` is assigned by the service (openapi.yaml: NewCategory forbids `id`). A body that sends one, with any
//   value, is refused rather than silently ignored: a client that believes it chose the id would
//   otherwise be surprised later.
// - `name` is required and must be a string. It is stored trimmed (leading and trailing whitespace,
//   Unicode included, is never meaningful in a label and would make " Dog" and "Dog" differ), so a
//   name that is empty or only whitespace is refused. Null counts as present but not a string.
// - `description` is optional; when present it must be a string (null refused) and is stored as
//   sent: it is free text, and an empty string is a legitimate value.
// - No maximum lengths and no uniqueness (none are declared): two categories may share a name.
//   The body size limit (backend.maxBodyBytes) bounds every field.
// - Other fields are ignored and not stored, so future optional fields do not break old services.
// - Problems are reported one at a time, in the order id, name, description; the message names
//   the field.

export type CategoryValidation = { ok: true; category: NewCategory } | { ok: false; message: string };

export function validateNewCategory(body: unknown): CategoryValidation {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return refuse(`The request body must be a JSON object (a NewCategory), not ${describe(body)}.`);
  }
  const fields = body as Record<string, unknown>;
  if (Object.hasOwn(fields, 'id')) {
    return refuse('id is assigned by the service and must not be sent');
  }
  if (!Object.hasOwn(fields, 'name')) {
    return refuse('name is required');
  }
  const { name, description } = fields;
  if (typeof name !== 'string') {
    return refuse(`name must be a non-empty string, not ${describe(name)}`);
  }
  const trimmedName = name.trim();
  if (trimmedName === '') {
    return refuse('name must be a non-empty string (it is empty or only whitespace)');
  }
  if (!Object.hasOwn(fields, 'description')) {
    return { ok: true, category: { name: trimmedName } };
  }
  if (typeof description !== 'string') {
    return refuse(`description must be a string when present, not ${describe(description)}`);
  }
  return { ok: true, category: { name: trimmedName, description } };
}

function refuse(message: string): CategoryValidation {
  return { ok: false, message };
}

/** The JSON type of a value, for messages ("an array", "null", "a number"). */
function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  const type = typeof value;
  return type === 'object' ? 'an object' : `a ${type}`;
}
