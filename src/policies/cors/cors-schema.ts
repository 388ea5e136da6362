import { z } from 'zod';

// Schema of `cors:` (gateway.yaml, top level or in one service): which web origins a browser may
// call the API from. Kept beside the rules that apply it (cors-rules.ts); gateway/policies/cors.ts
// answers with them.

/** An origin as a browser serialises it: lower case, no path, no default port. */
const ORIGIN = /^(https?):\/\/(\*\.)?([a-z0-9-]+(?:\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$/;

const originPattern = z.string().superRefine((value, ctx) => {
  if (value === '*') return;
  if (value.toLowerCase() === 'null')
    return ctx.addIssue({
      code: 'custom',
      message: '"null" is never allowed: sandboxed frames, file: pages and redirects all send it, so it names no one',
    });
  const match = ORIGIN.exec(value);
  if (!match)
    return ctx.addIssue({
      code: 'custom',
      message: 'must be an origin like https://app.example or https://*.example.org (lower case, scheme and host, no path)',
    });
  const [, scheme, wildcard, host, port] = match;
  if (wildcard && (host!.startsWith('[') || host!.split('.').length < 2))
    ctx.addIssue({ code: 'custom', message: '"*." must be followed by a domain of at least two labels (https://*.example.org)' });
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) ctx.addIssue({ code: 'custom', message: 'port must be 1-65535' });
  if ((scheme === 'http' && port === '80') || (scheme === 'https' && port === '443'))
    ctx.addIssue({ code: 'custom', message: `leave out the default port: browsers send ${scheme}://${host} without it` });
});

// RFC 9110 §5.1 field names and §9.1 method names: tokens.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const headerName = z
  .string()
  .regex(TOKEN, 'must be a header field name')
  .transform((name) => name.toLowerCase());
const method = z
  .string()
  .regex(TOKEN, 'must be a method name')
  .refine((m) => m === m.toUpperCase(), 'must be upper case (methods are case-sensitive: GET, not get)');

export const corsSchema = z
  .strictObject({
    /** Exact origins (https://app.example), one leading "*." label (https://*.example.org), or "*" (any, without credentials). */
    origins: z.array(originPattern).min(1, 'at least one origin'),
    /** Methods a page may use (Access-Control-Allow-Methods of a preflight). */
    methods: z.array(method).min(1).default(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']),
    /** Request headers a page may send beyond the CORS-safelisted ones (Access-Control-Allow-Headers). */
    headers: z.array(headerName).default(['authorization', 'content-type', 'idempotency-key']),
    /** Response headers a page may read, added to the gateway's own list (cors-rules.ts DEFAULT_EXPOSED). */
    exposeHeaders: z.array(headerName).default([]),
    /** Access-Control-Allow-Credentials: true (cookies, TLS client certificates). Never with origin "*". */
    credentials: z.boolean().default(false),
    /** How long a browser may cache a preflight's answer (Chromium caps it at 7200). */
    maxAgeSeconds: z.number().int().min(0).max(86_400).default(600),
    /**
     * Preflights per client address a minute, then 429 too_many_preflights: a budget apart from the
     * failed-authentication limit, so that many browsers behind one NAT address neither run out of
     * it nor lock out that address's 401s (gateway/policies/limit-preflights.ts).
     */
    preflightsPerMinute: z.number().int().min(1).max(1_000_000).default(600),
  })
  .superRefine((cors, ctx) => {
    const star = cors.origins.indexOf('*');
    if (star !== -1 && cors.credentials)
      ctx.addIssue({
        code: 'custom',
        path: ['origins', star],
        message: '"*" is allowed only with credentials: false (any site could then act with the user\'s cookies)',
      });
  });

export type CorsConfig = z.infer<typeof corsSchema>;
