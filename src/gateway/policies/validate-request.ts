import { readBody } from '../../http/read-body.js';
import type { Logger } from '../../observability/log.js';
import type { Metrics } from '../../observability/metrics.js';
import {
  bodyIssues,
  bodyPlan,
  checkParameters,
  MAX_ISSUES,
  type Issue,
  type OpenApiValidator,
} from '../../policies/validate/openapi-validator.js';
import { CONTINUE, reject, type Decision, type Policy, type RequestContext, type Rejection } from '../context.js';

/** Each service's compiled `validate` (gateway.yaml, hot); services without one are absent. */
export type ValidationInForce = ReadonlyMap<string, { validator: OpenApiValidator; mode: 'enforce' | 'shadow'; maxBodyBytes: number }>;

export interface ValidateDeps {
  rules: () => ValidationInForce;
  metrics: Metrics;
  logger: Logger;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The request against its service's OpenAPI document (docs/policies.md, "OpenAPI validation"):
 * operation (path template and method: 404, 405 with Allow), path, query and header parameters,
 * Content-Type (415) and a JSON body (400 request_invalid with up to 10 `{in, pointer, message}`).
 *
 * It runs after the quota (enforce-quota.ts): an invalid request is charged like any other, so a
 * flood of them cannot skip the quota, and it is refused before the proxy, so it costs the
 * backend nothing. A JSON body is read here once, within maxBodyBytes, and those bytes are what the
 * proxy forwards. In `shadow` mode nothing is refused: the would-be refusal is logged and counted,
 * and a body is only read when its declared length fits (one that does not is forwarded unchecked).
 */
export function validateRequest(deps: ValidateDeps): Policy {
  return (ctx) => {
    const all = deps.rules();
    if (all.size === 0 || !ctx.route) return CONTINUE;
    const service = ctx.route.service.name;
    const rules = all.get(service);
    if (!rules) return CONTINUE;
    const outcome = judge(ctx, rules);
    return outcome instanceof Promise
      ? outcome.then((d) => settle(ctx, deps, service, rules.mode, d))
      : settle(ctx, deps, service, rules.mode, outcome);
  };
}

function settle(ctx: RequestContext, deps: ValidateDeps, service: string, mode: 'enforce' | 'shadow', refusal: Rejection | null): Decision {
  if (!refusal) {
    deps.metrics.requestValidations.inc({ service, result: 'valid' });
    return CONTINUE;
  }
  if (mode === 'enforce' || refusal.code === 'payload_too_large' || refusal.code === 'bad_request') {
    deps.metrics.requestValidations.inc({ service, result: 'refused' });
    return refusal;
  }
  deps.metrics.requestValidations.inc({ service, result: 'shadow_refused' });
  deps.logger.warn(
    { reqId: ctx.requestId, service, method: ctx.req.method, code: refusal.code, errors: refusal.details?.errors },
    'request does not match the OpenAPI document (shadow: forwarded)',
  );
  return CONTINUE;
}

function judge(
  ctx: RequestContext,
  rules: { validator: OpenApiValidator; mode: 'enforce' | 'shadow'; maxBodyBytes: number },
): Rejection | null | Promise<Rejection | null> {
  const { req } = ctx;
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const method = req.method ?? 'GET';
  const match = rules.validator.match(method, path);
  if (match.kind === 'no_path') return reject('not_found', 'No operation of the API description matches this path.');
  if (match.kind === 'no_method')
    return reject('method_not_allowed', `The API description allows ${match.allow.join(', ')} on this path.`, {
      allow: match.allow.join(', '),
    });
  const issues = checkParameters(match.operation, match.pathParams, new URLSearchParams(q === -1 ? '' : url.slice(q + 1)), req.headers);
  const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  const plan = bodyPlan(match.operation, req.headers['content-type'], hasBody);
  if (plan.kind === 'unsupported')
    return reject(
      'unsupported_media_type',
      `The request body must be one of: ${plan.accepted.join(', ') || '(none: this operation takes no body)'}.`,
    );
  if (plan.kind === 'missing') issues.push({ in: 'body', pointer: '', message: 'a request body is required' });
  if (plan.kind !== 'json' || !plan.validate) return invalid(issues);
  const validate = plan.validate;
  if (
    rules.mode === 'shadow' &&
    !(Number(req.headers['content-length'] ?? 0) <= rules.maxBodyBytes && req.headers['transfer-encoding'] === undefined)
  )
    return invalid(issues);
  // The client may wait for 100 Continue before sending the body it is now asked for.
  if (!ctx.continued && typeof req.headers.expect === 'string' && req.headers.expect.toLowerCase() === '100-continue') {
    ctx.res.writeContinue();
    ctx.continued = true;
  }
  return readBody(req, rules.maxBodyBytes).then((read) => {
    if (!read.ok) return reject(read.code, read.message);
    ctx.body = read.bytes;
    let value: unknown;
    try {
      value = JSON.parse(UTF8.decode(read.bytes));
    } catch (err) {
      issues.push({ in: 'body', pointer: '', message: `is not valid JSON: ${(err as Error).message.slice(0, 200)}` });
      return invalid(issues);
    }
    issues.push(...bodyIssues(validate, value));
    return invalid(issues);
  });
}

function invalid(issues: Issue[]): Rejection | null {
  return issues.length === 0 ? null : reject('request_invalid', undefined, undefined, { errors: issues.slice(0, MAX_ISSUES) });
}
