import type { DeprecationRule } from '../config/routes-schema.js';
import { patternProblem } from '../config/routes-schema.js';
import { RouteTable } from './route-table.js';

/** One deprecation rule, compiled once per config load: a regex and the header values it sends. */
export interface CompiledDeprecation {
  /** `GET /v1/pets/{petId}`, for messages and logs. */
  readonly name: string;
  readonly pattern: RegExp;
  readonly sunsetAtMs: number;
  readonly goneAfterSunset: boolean;
  /** Header name → value, lower-case names, ready for `setHeader`. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** The 410 message after sunset. */
  readonly goneMessage: string;
}

/** The compiled rules of one load (route-table.ts: by method, first match wins, GET covers HEAD). */
export class RouteRules {
  private readonly table: RouteTable<CompiledDeprecation>;
  readonly size: number;

  constructor(rules: readonly DeprecationRule[]) {
    this.size = rules.length;
    this.table = new RouteTable(
      rules.map((rule) => {
        const compiled = compileDeprecation(rule);
        return { method: rule.method, pattern: compiled.pattern, value: compiled };
      }),
    );
  }

  /** The first rule matching method and path (no query string), or undefined. */
  match(method: string, path: string): CompiledDeprecation | undefined {
    return this.table.match(method, path);
  }
}

export function compileDeprecation(rule: DeprecationRule): CompiledDeprecation {
  const problem = patternProblem(rule.path);
  if (problem) throw new Error(`route pattern ${rule.path} ${problem}`); // the schema refuses these first
  const deprecatedAtMs = Date.parse(rule.deprecatedAt);
  const sunsetAtMs = Date.parse(rule.sunsetAt);
  const name = `${rule.method} ${rule.path}`;
  const headers: Array<[string, string]> = [
    ['deprecation', deprecationValue(deprecatedAtMs)],
    ['sunset', sunsetValue(sunsetAtMs)],
  ];
  const link = linkValue(rule.link, rule.sunsetLink);
  if (link) headers.push(['link', link]);
  return {
    name,
    pattern: patternToRegExp(rule.path),
    sunsetAtMs,
    goneAfterSunset: rule.goneAfterSunset,
    headers,
    goneMessage:
      `${name} passed its sunset date (${sunsetValue(sunsetAtMs)}) and is gone.` +
      (rule.sunsetLink || rule.link ? ' See the Link header.' : ''),
  };
}

/** The path of a request target, without its query string: what route patterns are matched against. */
export function pathOf(url: string | undefined): string {
  const target = url ?? '/';
  const query = target.indexOf('?');
  return query === -1 ? target : target.slice(0, query);
}

/**
 * `/v1/pets/{petId}` → /^\/v1\/pets\/[^/]+\/?$/i. A parameter matches one non-empty segment; literal
 * segments match whatever their case. The query string is not part of it. Both for the same
 * reason: a rule the upstream's reading escapes would be a rule in name only (docs/security.md).
 * Many upstreams serve `/v1/pets/42/` as `/v1/pets/42`, so one trailing slash is allowed; many
 * route case-insensitively (Express and ASP.NET Core by default, IIS), so `/V1/PETS/42` matches too.
 */
export function patternToRegExp(pattern: string): RegExp {
  if (pattern === '/') return /^\/$/;
  const parts = pattern
    .slice(1)
    .split('/')
    .map((segment) => (segment.startsWith('{') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  return new RegExp(`^/${parts.join('/')}/?$`, 'i');
}

/** RFC 9745 §2.1: a Structured Field Date, `@` and integer Unix seconds. */
export function deprecationValue(ms: number): string {
  return `@${Math.floor(ms / 1000)}`;
}

/** RFC 8594 §3: an HTTP-date in IMF-fixdate form, e.g. `Tue, 30 Jun 2027 00:00:00 GMT`. */
export function sunsetValue(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toUTCString();
}

/**
 * RFC 8288 Link entries: the deprecation notice (RFC 9745 §3, `type="text/html"` as its example)
 * and the sunset policy (RFC 8594 §6). URLs are serialised by the URL parser, which
 * percent-encodes `<`, `>`, `"` and whitespace, so no value can break out of its `<…>`.
 */
export function linkValue(deprecationLink?: string, sunsetLink?: string): string | undefined {
  const entries: string[] = [];
  if (deprecationLink) entries.push(`<${new URL(deprecationLink).href}>; rel="deprecation"; type="text/html"`);
  if (sunsetLink) entries.push(`<${new URL(sunsetLink).href}>; rel="sunset"`);
  return entries.length ? entries.join(', ') : undefined;
}
