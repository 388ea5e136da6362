import { ERRORS } from '../../errors/registry.js';
import { definePolicy } from '../../plugins/policy-definition.js';
import type { IpRulesConfig } from './ip-rules-schema.js';
import { IpRules } from './ip-rules.js';

// `ipRules` on the policy interface (docs/policies.md, "IP rules"): an address the rules do not
// admit is refused 403 ip_not_allowed. The gateway runs each where it stands in the chain, before
// authentication, and counts its refusals (gateway/policies/ip-rules.ts).

const compile = (options: IpRulesConfig) => new IpRules(options);
const errors = { ip_not_allowed: ERRORS.ip_not_allowed };

/** gateway.yaml's top-level `ipRules`, on every path. */
export const globalIpRulesPolicy = definePolicy({
  name: 'ip-rules',
  compile,
  errors,
  access: (ctx, rules) => (rules.admits(ctx.clientAddress) ? undefined : { refuse: 'ip_not_allowed' }),
});

/** A service's `ipRules`, on its paths. */
export const serviceIpRulesPolicy = definePolicy({
  name: 'service-ip-rules',
  compile,
  errors,
  access: (ctx, rules) =>
    rules.admits(ctx.clientAddress)
      ? undefined
      : { refuse: 'ip_not_allowed', message: `Requests from this network are not allowed to the service "${ctx.service}".` },
});
