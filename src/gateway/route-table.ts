/**
 * Route rules indexed by method, so a request tests only its own method's patterns; the first
 * matching rule wins. A GET rule also covers HEAD: HEAD is GET without a body (RFC 9110 §9.3.2),
 * so probing a route with HEAD gets what GET would. Shared by the deprecation rules and the costs.
 */
export class RouteTable<T> {
  private readonly byMethod = new Map<string, Array<{ pattern: RegExp; value: T }>>();

  constructor(rules: Iterable<{ method: string; pattern: RegExp; value: T }>) {
    for (const { method, pattern, value } of rules) {
      for (const m of method === 'GET' ? ['GET', 'HEAD'] : [method]) {
        const list = this.byMethod.get(m) ?? [];
        list.push({ pattern, value });
        this.byMethod.set(m, list);
      }
    }
  }

  /** The value of the first rule matching method and path (no query string), or undefined. */
  match(method: string, path: string): T | undefined {
    const candidates = this.byMethod.get(method);
    if (!candidates) return undefined;
    for (const rule of candidates) if (rule.pattern.test(path)) return rule.value;
    return undefined;
  }
}
