// The package's public API (`import { definePolicy } from 'tollgate'`): the policy interface only.
// Everything else in dist/ is the gateway's own and may change without notice.
export { definePolicy } from './plugins/policy-definition.js';
export type {
  AccessVerdict,
  AddedCost,
  DeclaredError,
  JsonSchemaObject,
  OptionsSchema,
  PolicyDefinition,
  Refusal,
  SafeParseSchema,
} from './plugins/policy-definition.js';
export type {
  AnswerContext,
  ForwardContext,
  PolicyConsumer,
  PolicyContext,
  PolicyHeaders,
  PolicyKv,
  PolicyLogger,
  PolicyMetrics,
  PolicyRequest,
  ResponseHeadContext,
} from './plugins/policy-context.js';
