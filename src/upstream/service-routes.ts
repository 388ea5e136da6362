import type { Service } from './service.js';

export interface Route {
  service: Service;
  /** The path (and query) the target receives, after `stripPrefix`, without the target's base path. */
  path: string;
}

/**
 * Which service a canonical request path belongs to: the longest configured prefix that matches
 * whole segments (`/v1/cat` does not claim `/v1/categories`), else the default service. Prefixes
 * are matched on the canonical path the edge decided (server.ts), so `/v1/./categories` and
 * `/v1//categories` cannot slip past a service's prefix; and whatever the letters' case, as route
 * rules and costs match (gateway/route-rules.ts): `/V1/STORE/x` is the store service's, and is
 * charged its rules' cost, since many upstreams route case-insensitively and a policy a client
 * could escape by changing case would be a policy in name only. The path the target receives
 * keeps the client's case. (The canonical path is ASCII: lower-casing keeps its length.)
 */
export class ServiceRoutes {
  /** Longest prefix first. */
  private readonly prefixes: Array<{ prefix: string; service: Service }>;

  constructor(
    services: readonly Service[],
    private readonly fallback: Service,
  ) {
    this.prefixes = services
      .flatMap((service) => service.config.paths.map((prefix) => ({ prefix: prefix.toLowerCase(), service })))
      .sort((a, b) => b.prefix.length - a.prefix.length);
  }

  route(target: string): Route {
    const query = target.indexOf('?');
    const path = (query === -1 ? target : target.slice(0, query)).toLowerCase();
    for (const { prefix, service } of this.prefixes) {
      if (!claims(prefix, path)) continue;
      if (!service.config.stripPrefix || prefix === '/') return { service, path: target };
      const rest = target.slice(prefix.length);
      return { service, path: rest.startsWith('/') ? rest : `/${rest}` };
    }
    return { service: this.fallback, path: target };
  }
}

function claims(prefix: string, path: string): boolean {
  if (prefix === '/') return true;
  return path === prefix || (path.startsWith(prefix) && path.charCodeAt(prefix.length) === 47); /* / */
}
