// `node --import tsx bench/policy-runner.ts`: the policy interface's own cost, in one process, on
// fake requests (no sockets, no proxy): the access and forward phases, the response head and the
// after-answer turn, with no policy configured and with one no-op policy hooking every phase
// (bench/policies/no-op.js's shape), in alternating passes. It isolates the runner from what the
// throughput phase's `tollgate-policies` beside `tollgate` measures with everything else.
import { EventEmitter } from 'node:events';
import { accessPhase, forwardPhase, type PhaseDeps } from '../src/gateway/user-policies/phases.js';
import { bindBuiltIn, policiesInForce, PoliciesInForce } from '../src/gateway/user-policies/policies-in-force.js';
import { policyToolsFactory } from '../src/gateway/user-policies/policy-tools.js';
import { definePolicy } from '../src/index.js';
import type { Logger } from '../src/observability/log.js';
import { createMetrics } from '../src/observability/metrics.js';
import { MemoryPolicyKv } from '../src/store/memory/memory-policy-kv.js';
import { ProxyTrust } from '../src/http/proxy-trust.js';
import type { RequestContext } from '../src/gateway/context.js';

const REQUESTS = 200_000;
const PASSES = 5;

const noOp = definePolicy({
  name: 'bench-no-op',
  access: () => undefined,
  beforeForward: () => undefined,
  responseHead: () => undefined,
  afterAnswer: () => undefined,
});
const metrics = createMetrics();
const silent = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;
const deps = (inForce: PoliciesInForce): PhaseDeps => ({
  inForce: () => inForce,
  tools: policyToolsFactory(new MemoryPolicyKv(), silent, metrics),
  proxyTrust: new ProxyTrust({ trustProxyHops: 0, trustedProxies: [] }),
  metrics,
  logger: silent,
});

/** Main-thread CPU µs per request of `REQUESTS` fake requests through both phases. */
async function pass(phases: PhaseDeps): Promise<number> {
  const access = accessPhase(phases);
  const forward = forwardPhase(phases);
  const started = process.cpuUsage();
  for (let i = 0; i < REQUESTS; i++) {
    const res = Object.assign(new EventEmitter(), {
      statusCode: 200,
      headersSent: false,
      writableEnded: true,
      writableFinished: true,
      setHeader() {},
      removeHeader() {},
      getHeader: () => undefined,
    });
    const req = { url: '/v1/categories', method: 'GET', headers: { host: 'bench' }, socket: { remoteAddress: '127.0.0.1' } };
    const ctx = { req, res, startedAtMs: 0, requestId: 'r', consumer: { id: 'tg_bench', plan: 'enterprise' } } as unknown as RequestContext;
    void access(ctx);
    void forward(ctx);
    ctx.responseRules?.applyTo(ctx.res);
    res.emit('close');
    // Let the after-answer turns run, as the event loop would between requests.
    if (i % 1000 === 999) await new Promise((resolve) => setImmediate(resolve));
  }
  await new Promise((resolve) => setImmediate(resolve));
  const used = process.cpuUsage(started);
  return (used.user + used.system) / REQUESTS;
}

const none = deps(PoliciesInForce.empty);
const configured = deps(policiesInForce([bindBuiltIn(noOp, undefined)], new Map()));
for (let i = 0; i < PASSES; i++) {
  const [without, withNoOp] = [await pass(none), await pass(configured)];
  process.stdout.write(
    `pass ${i + 1}: no policy ${without.toFixed(3)} µs/request, a no-op policy in every phase ${withNoOp.toFixed(3)} µs/request (+${(withNoOp - without).toFixed(3)})\n`,
  );
}
