import { z } from 'zod';

/** A bound on a request body read whole, in bytes: 1 B to 10 MiB, 64 KiB unless set (validation's and the bundled backend's). */
export const maxBodyBytesSchema = z
  .number()
  .int()
  .min(1)
  .max(10 * 1024 * 1024)
  .default(65536);

// Schema of a service's `validate`: requests checked against an OpenAPI 3.0 or 3.1 document
// (openapi-validator.ts) before they are forwarded. The document is compiled at load.

export const validateSchema = z
  .strictObject({
    /** A YAML or JSON OpenAPI 3.x document, relative to the config directory (or absolute). */
    openapi: z.string().min(1, 'must name an OpenAPI document file'),
    /** enforce: refuse what does not match (400/404/405/415); shadow: forward it, log it and count it. */
    mode: z.enum(['enforce', 'shadow']).default('enforce'),
    /** Largest JSON body read for validation, in bytes (the bundled backend's default); larger: 413. */
    maxBodyBytes: maxBodyBytesSchema,
  })
  .optional();

export type ValidateConfig = z.infer<typeof validateSchema>;
