import type { CorsConfig } from './cors-schema.js';

/**
 * Every response header the gateway adds that a page needs to read: without them listed in
 * Access-Control-Expose-Headers, a script sees none of them (only the CORS-safelisted ones).
 */
export const DEFAULT_EXPOSED = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit',
  'RateLimit-Policy',
  'Retry-After',
  'X-Request-Id',
  'Deprecation',
  'Sunset',
  'Link',
];

export type Headers = Record<string, string>;

/**
 * One `cors:` section made ready to answer with: the origin test and the header values, built
 * once per config object (a reload makes new objects, so the cache below never goes stale).
 */
export class CorsRules {
  private readonly exact: ReadonlySet<string>;
  /** `https://*.example.org:8443` → scheme `https://`, suffix `.example.org:8443`. */
  private readonly wildcards: ReadonlyArray<{ scheme: string; suffix: string }>;
  private readonly anyOrigin: boolean;
  private readonly allowedHeaders: ReadonlySet<string>;
  private readonly methods: string;
  private readonly exposed: string;

  constructor(private readonly config: CorsConfig) {
    this.anyOrigin = config.origins.includes('*');
    this.exact = new Set(config.origins.filter((o) => o !== '*' && !o.includes('://*.')));
    this.wildcards = config.origins
      .filter((o) => o.includes('://*.'))
      .map((o) => {
        const at = o.indexOf('://*.');
        return { scheme: o.slice(0, at + 3), suffix: o.slice(at + 4) };
      });
    this.allowedHeaders = new Set(config.headers);
    this.methods = config.methods.join(', ');
    const exposed = [...DEFAULT_EXPOSED];
    for (const name of config.exposeHeaders) if (!exposed.some((e) => e.toLowerCase() === name)) exposed.push(name);
    this.exposed = exposed.join(', ');
  }

  /**
   * The request's `Origin` is one this section allows. `null` (sandboxed frames, file: pages,
   * cross-origin redirects) never is, nor a list or anything that is not one serialised origin.
   * A wildcard stands for exactly one DNS label: `https://*.example.org` allows
   * `https://app.example.org`, not `https://a.b.example.org` nor `https://example.org`.
   */
  allows(origin: string | undefined): origin is string {
    if (origin === undefined || origin === 'null' || origin.length > 2048 || /[\s,]/.test(origin)) return false;
    if (this.exact.has(origin)) return true;
    for (const { scheme, suffix } of this.wildcards) {
      if (!origin.startsWith(scheme) || !origin.endsWith(suffix)) continue;
      const label = origin.slice(scheme.length, origin.length - suffix.length);
      if (/^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/.test(label)) return true;
    }
    // "*" last: an origin it admits must still look like one (checked above for spaces and commas).
    return this.anyOrigin && /^https?:\/\/[^/]+$/.test(origin);
  }

  /** Fields for an actual (non-preflight) request from an allowed origin. */
  actualHeaders(origin: string): Headers {
    const headers: Headers = {
      'access-control-allow-origin': origin,
      'access-control-expose-headers': this.exposed,
    };
    if (this.config.credentials) headers['access-control-allow-credentials'] = 'true';
    return headers;
  }

  /**
   * Fields for a preflight from an allowed origin. Access-Control-Allow-Headers names only the
   * requested headers this section allows: a header left out makes the browser refuse the request
   * itself, and the page's console says which one.
   */
  preflightHeaders(origin: string, requestedHeaders: string | undefined): Headers {
    const headers: Headers = {
      'access-control-allow-origin': origin,
      'access-control-allow-methods': this.methods,
      'access-control-max-age': String(this.config.maxAgeSeconds),
    };
    const allowed = (requestedHeaders ?? '')
      .split(',')
      .map((name) => name.trim().toLowerCase())
      .filter((name, i, all) => name !== '' && this.allowedHeaders.has(name) && all.indexOf(name) === i);
    if (allowed.length > 0) headers['access-control-allow-headers'] = allowed.join(', ');
    if (this.config.credentials) headers['access-control-allow-credentials'] = 'true';
    return headers;
  }
}

const compiled = new WeakMap<CorsConfig, CorsRules>();

/** The rules of a (frozen) config section, built on first use. */
export function corsRulesOf(config: CorsConfig): CorsRules {
  let rules = compiled.get(config);
  if (!rules) {
    rules = new CorsRules(config);
    compiled.set(config, rules);
  }
  return rules;
}
