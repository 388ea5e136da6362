import type { ServerResponse } from 'node:http';
import type { HeaderRules } from '../../policies/header-rules/header-rules.js';
import type { HeaderValues } from '../../policies/header-rules/template.js';
import { CONTINUE, type Policy } from '../context.js';

/** Each service's compiled requestHeaders / responseHeaders (gateway.yaml, hot); services without rules are absent. */
export type HeaderRulesInForce = ReadonlyMap<string, { request?: HeaderRules; response?: HeaderRules }>;

/**
 * Last in the chain, once every policy has admitted the request and the client's identity fields
 * were replaced (upstream-identity.ts): the service's requestHeaders rules change what its targets
 * receive, and its responseHeaders rules are handed to the proxy, which applies them to the
 * target's response head as it relays it. A refused request never reaches here: the gateway's own
 * Error bodies are not touched by either.
 */
export function headerRules(rules: () => HeaderRulesInForce): Policy {
  return (ctx) => {
    const all = rules();
    if (all.size === 0 || !ctx.route) return CONTINUE;
    const service = all.get(ctx.route.service.name);
    if (!service) return CONTINUE;
    const values: HeaderValues = {
      'consumer.id': ctx.consumer?.id ?? '',
      'consumer.plan': ctx.consumer?.plan ?? '',
      'request.id': ctx.requestId,
    };
    if (service.request) {
      const headers = ctx.req.headers;
      // Assigned undefined rather than deleted: the proxy skips undefined fields, and a delete would
      // turn the headers object into a slow dictionary (upstream-headers.ts).
      service.request.apply({ set: (name, value) => (headers[name] = value), remove: (name) => (headers[name] = undefined) }, values);
    }
    const response = service.response;
    if (response) {
      ctx.responseRules = (res: ServerResponse) => {
        const set: string[] = [];
        response.apply(
          {
            set: (name, value) => {
              res.setHeader(name, value);
              set.push(name);
            },
            remove: (name) => res.removeHeader(name),
          },
          values,
        );
        return set;
      };
    }
    return CONTINUE;
  };
}
