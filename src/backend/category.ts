/** A category as a client sends it for creation (openapi.yaml: NewCategory). */
export interface NewCategory {
  name: string;
  description?: string;
}

/** A category as the service returns it: NewCategory plus the service-assigned int64 `id`. */
export interface Category extends NewCategory {
  id: number;
}

/** The wire shape, with a fixed key order (id, name, description) and no `description` when absent. */
export function categoryOf(id: number, input: NewCategory): Category {
  return input.description === undefined ? { id, name: input.name } : { id, name: input.name, description: input.description };
}
