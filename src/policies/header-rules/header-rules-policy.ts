import { definePolicy } from '../../plugins/policy-definition.js';
import type { PolicyContext } from '../../plugins/policy-context.js';
import type { HeaderRulesConfig } from './header-rules-schema.js';
import { HeaderRules } from './header-rules.js';
import type { HeaderValues } from './template.js';

/** A service's `requestHeaders` and `responseHeaders`, as gateway.yaml's schema checked them. */
export interface HeaderRulesOptions {
  request?: HeaderRulesConfig;
  response?: HeaderRulesConfig;
}

/**
 * A service's header rules on the policy interface (docs/policies.md, "Header rules"): before the
 * forward, its requestHeaders change what the targets receive; on the relayed response head, its
 * responseHeaders change what the client receives (never the gateway's own Error bodies).
 */
export const headerRulesPolicy = definePolicy({
  name: 'header-rules',
  compile: (options: HeaderRulesOptions) => ({
    request: options.request && new HeaderRules(options.request),
    response: options.response && new HeaderRules(options.response),
  }),
  beforeForward(ctx, rules) {
    rules.request?.apply(
      { set: (name, value) => ctx.setRequestHeader(name, value), remove: (name) => ctx.removeRequestHeader(name) },
      valuesOf(ctx),
    );
  },
  responseHead(ctx, rules) {
    rules.response?.apply(
      { set: (name, value) => ctx.setResponseHeader(name, value), remove: (name) => ctx.removeResponseHeader(name) },
      valuesOf(ctx),
    );
  },
});

function valuesOf(ctx: PolicyContext): HeaderValues {
  return { 'consumer.id': ctx.consumer?.id ?? '', 'consumer.plan': ctx.consumer?.plan ?? '', 'request.id': ctx.requestId };
}
