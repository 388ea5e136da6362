import type { ServerResponse } from 'node:http';
import type { ProxyTrust } from '../../http/proxy-trust.js';
import { DEFAULT_SERVICE } from '../../config/services-schema.js';
import { ERRORS, type ErrorCode } from '../../errors/registry.js';
import { declaredErrorBody } from '../../errors/render.js';
import type { Logger } from '../../observability/log.js';
import type { Metrics } from '../../observability/metrics.js';
import type { AccessVerdict } from '../../plugins/policy-definition.js';
import { CONTINUE, reject, type Decision, type Policy, type RequestContext, type ResponseRules } from '../context.js';
import type { BoundPolicy, PhaseLists, PoliciesInForce } from './policies-in-force.js';
import { checkedField, PolicyRequestContext, PolicyRequestView, type PolicyTools } from './policy-context.js';

// The configured policies' phases (docs/plugins.md), as two steps of the chain: `access` before
// the quota, `forward` last (it also hooks the response head and the end of the answer). Each hook
// is contained: a throw or a rejection is that request's 500 (counted by policy and phase), a hook
// past its budget that request's 503 policy_timeout; nothing a hook does reaches another request.

export interface PhaseDeps {
  inForce: () => PoliciesInForce;
  tools: (name: string) => PolicyTools;
  proxyTrust: ProxyTrust;
  metrics: Metrics;
  logger: Logger;
}

type Phase = 'access' | 'beforeForward' | 'responseHead' | 'afterAnswer';

/** A hook's throw or rejection, answered once by the server as 500 internal_error. */
export class PolicyFault extends Error {
  constructor(policy: string, phase: Phase, cause: unknown) {
    super(`policy "${policy}" failed in ${phase}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'PolicyFault';
  }
}

const TIMED_OUT = Symbol('timed out');

/** After authentication and routing, before the quota: each policy's `access` may refuse or add a cost. */
export function accessPhase(deps: PhaseDeps): Policy {
  return (ctx) => {
    const lists = listsOf(ctx, deps);
    if (!lists.any) return CONTINUE;
    const view = viewOf(ctx, deps);
    if (lists.afterAnswer.length > 0) afterTheAnswer(ctx, view, lists.afterAnswer, deps);
    return runHooks(ctx, view, lists.access, 'access', 0, deps);
  };
}

/** Last in the chain: `beforeForward` hooks change the request, `responseHead` hooks are handed to the proxy. */
export function forwardPhase(deps: PhaseDeps): Policy {
  return (ctx) => {
    const lists = listsOf(ctx, deps);
    if (!lists.any) return CONTINUE;
    const view = viewOf(ctx, deps);
    view.fieldsChanged();
    if (lists.responseHead.length > 0) onResponseHead(ctx, view, lists.responseHead, deps);
    return runHooks(ctx, view, lists.beforeForward, 'beforeForward', 0, deps);
  };
}

/**
 * One of the gateway's own policies where it stands in the chain (before authentication): the
 * `access` hooks of `bound` (bound at load; empty: nothing to do, at no cost), contained like the rest.
 */
export function builtInStep(bound: (ctx: RequestContext) => readonly BoundPolicy[], deps: PhaseDeps): Policy {
  return (ctx) => {
    const list = bound(ctx);
    return list.length === 0 ? CONTINUE : runHooks(ctx, viewOf(ctx, deps), list, 'access', 0, deps);
  };
}

function listsOf(ctx: RequestContext, deps: PhaseDeps): PhaseLists {
  return deps.inForce().of(ctx.route?.service.name ?? DEFAULT_SERVICE);
}

function viewOf(ctx: RequestContext, deps: PhaseDeps): PolicyRequestView {
  return (ctx.policyView ??= new PolicyRequestView(ctx, deps.proxyTrust));
}

function applies(bound: BoundPolicy, ctx: RequestContext): boolean {
  if (!bound.routes) return true;
  const url = ctx.req.url ?? '/';
  const q = url.indexOf('?');
  return bound.routes.match(ctx.req.method ?? 'GET', q < 0 ? url : url.slice(0, q)) === true;
}

function contextFor(view: PolicyRequestView, bound: BoundPolicy, deps: PhaseDeps): PolicyRequestContext {
  return new PolicyRequestContext(view, deps.tools(bound.definition.name));
}

/** The `access` or `beforeForward` hooks from `from` on; the first refusal (or a hook past its budget) ends them. */
function runHooks(
  ctx: RequestContext,
  view: PolicyRequestView,
  list: readonly BoundPolicy[],
  phase: 'access' | 'beforeForward',
  from: number,
  deps: PhaseDeps,
): Decision | Promise<Decision> {
  for (let i = from; i < list.length; i++) {
    const bound = list[i]!;
    if (!applies(bound, ctx)) continue;
    let result: unknown;
    // Inline rather than through `called`: no closure per hook on the request path.
    try {
      const policyCtx = contextFor(view, bound, deps);
      result =
        phase === 'access' ? bound.definition.access!(policyCtx, bound.options) : bound.definition.beforeForward!(policyCtx, bound.options);
    } catch (err) {
      throw fault(bound, phase, err, deps);
    }
    if (isThenable(result))
      return withinBudget(result, bound, phase, deps).then((verdict) =>
        verdict === TIMED_OUT
          ? reject('policy_timeout')
          : (decided(ctx, bound, phase, verdict, deps) ?? runHooks(ctx, view, list, phase, i + 1, deps)),
      );
    const decision = decided(ctx, bound, phase, result, deps);
    if (decision) return decision;
  }
  return CONTINUE;
}

/** The service's responseHead hooks, handed to the proxy, which runs them on the target's head (after its header rules). */
function onResponseHead(ctx: RequestContext, view: PolicyRequestView, list: readonly BoundPolicy[], deps: PhaseDeps): void {
  ctx.responseRules = new ResponseHeadHooks(ctx, view, list, deps);
}

/** An object, not a closure on `ctx`: context.ts (ResponseRules) says why. */
class ResponseHeadHooks implements ResponseRules {
  constructor(
    private readonly ctx: RequestContext,
    private readonly view: PolicyRequestView,
    private readonly list: readonly BoundPolicy[],
    private readonly deps: PhaseDeps,
  ) {}

  applyTo(res: ServerResponse): string[] {
    const { ctx, view, deps } = this;
    view.response = res;
    for (const bound of this.list) {
      if (!applies(bound, ctx)) continue;
      let result: unknown;
      try {
        result = bound.definition.responseHead!(contextFor(view, bound, deps), bound.options);
      } catch (err) {
        throw fault(bound, 'responseHead', err, deps);
      }
      if (isThenable(result)) throw fault(bound, 'responseHead', new TypeError('responseHead must not return a promise'), deps);
    }
    return view.responseFieldsSet;
  }
}

/** Once the response has closed, the next turn: each afterAnswer hook, whose faults are only logged and counted. */
function afterTheAnswer(ctx: RequestContext, view: PolicyRequestView, list: readonly BoundPolicy[], deps: PhaseDeps): void {
  ctx.res.on('close', () =>
    setImmediate(() => {
      view.closed = true;
      view.response = ctx.res;
      for (const bound of list) {
        if (!applies(bound, ctx)) continue;
        try {
          const result = bound.definition.afterAnswer!(contextFor(view, bound, deps), bound.options);
          if (isThenable(result)) result.then(undefined, (err: unknown) => afterAnswerFault(bound, err, deps));
        } catch (err) {
          afterAnswerFault(bound, err, deps);
        }
      }
    }),
  );
}

function afterAnswerFault(bound: BoundPolicy, err: unknown, deps: PhaseDeps): void {
  deps.metrics.policyFaults.inc({ policy: bound.definition.name, phase: 'afterAnswer' });
  deps.logger.error({ err, policy: bound.definition.name }, 'policy failed after the answer');
}

/** The hook's result, or its synchronous throw as a counted PolicyFault. */
function called<T>(bound: BoundPolicy, phase: Phase, deps: PhaseDeps, hook: () => T): T {
  try {
    return hook();
  } catch (err) {
    throw fault(bound, phase, err, deps);
  }
}

function fault(bound: BoundPolicy, phase: Phase, err: unknown, deps: PhaseDeps): PolicyFault {
  if (err instanceof PolicyFault) return err;
  deps.metrics.policyFaults.inc({ policy: bound.definition.name, phase });
  return new PolicyFault(bound.definition.name, phase, err);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}

/** The hook's promise, or TIMED_OUT once its budget has passed (it is then abandoned: its outcome only logged). */
function withinBudget<T>(pending: PromiseLike<T>, bound: BoundPolicy, phase: Phase, deps: PhaseDeps): Promise<T | typeof TIMED_OUT> {
  const policy = bound.definition.name;
  return new Promise((resolve, rejectWith) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      deps.metrics.policyTimeouts.inc({ policy, phase });
      deps.logger.warn({ policy, phase, budgetMs: bound.budgetMs }, 'policy past its budget: answered 503 policy_timeout');
      resolve(TIMED_OUT);
    }, bound.budgetMs);
    pending.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        if (late) deps.logger.warn({ err, policy, phase }, 'policy failed after it was abandoned');
        else rejectWith(fault(bound, phase, err, deps));
      },
    );
  });
}

/** An access verdict as the chain's decision: a declared refusal, an added cost (and go on), or go on. */
function decided(ctx: RequestContext, bound: BoundPolicy, phase: Phase, verdict: unknown, deps: PhaseDeps): Decision {
  if (phase !== 'access' || verdict === undefined || verdict === null) return CONTINUE;
  const { definition } = bound;
  const given = verdict as Exclude<AccessVerdict<string>, void | undefined>;
  if ('addCost' in given) {
    if (!Number.isSafeInteger(given.addCost) || given.addCost < 0)
      throw fault(bound, 'access', new TypeError(`addCost must be a whole number ≥ 0, not ${String(given.addCost)}`), deps);
    ctx.addedCost = (ctx.addedCost ?? 0) + given.addCost;
    return CONTINUE;
  }
  if ('refuse' in given) {
    const declared = definition.errors?.[given.refuse];
    // A registry code: the gateway's own policies (plugins/load-policy-code.ts refuses them to loaded code).
    if (declared && given.refuse in ERRORS) return reject(given.refuse as ErrorCode, given.message, given.headers);
    if (!declared)
      throw fault(bound, 'access', new TypeError(`refused with "${String(given.refuse)}", which it does not declare in errors`), deps);
    const headers: Record<string, string> = {};
    // A refusal's fields obey the rules of any other write: none of the gateway's own (rate limits, …).
    for (const [name, value] of Object.entries(given.headers ?? {}))
      headers[called(bound, 'access', deps, () => checkedField(name, value))] = value;
    const message = typeof given.message === 'string' && given.message ? given.message : declared.message;
    const body = Buffer.from(declaredErrorBody(given.refuse, message, declared.status));
    return {
      status: declared.status,
      headers: {
        ...headers,
        'content-type': 'application/json; charset=utf-8',
        'content-length': body.length,
        'cache-control': 'no-store',
      },
      body,
    };
  }
  throw fault(bound, 'access', new TypeError('access must return undefined, { refuse } or { addCost }'), deps);
}
