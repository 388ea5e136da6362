import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../observability/log.js';
import type { Policy } from './context.js';

/**
 * Fault injection for the test suite (test/integration/fault-containment.test.ts), off unless
 * TOLLGATE_TEST_FAULTS=1. Armed, a request whose `x-test-fault` names a stage throws there,
 * so the suite can prove that a fault anywhere on the request path gets one 500 (or a closed
 * connection), never a hang or two answers. Disarmed, nothing is wrapped: the request path is the
 * same code as without this file. Never arm it in production: any client could pick a fault.
 *
 * Stages: `edge` (the edge decision), `policy:<i>` and `policy:<i>:async` (the i-th policy of the
 * chain throws, or rejects a turn later), `forward` and `tunnel` (the proxy's and the WebSocket
 * tunnel's entry), `relay-head` and `relay-body` (the proxy's relay of the upstream's response
 * head, or its first body chunk), `log` (the access log, once the response has closed), `admin`
 * (the admin listener's request handler).
 */
export const TEST_FAULTS_ENV = 'TOLLGATE_TEST_FAULTS';
export const TEST_FAULT_HEADER = 'x-test-fault';

export class InjectedFault extends Error {
  constructor(stage: string) {
    super(`fault injected at ${stage}`);
    this.name = 'InjectedFault';
  }
}

export interface TestFaults {
  /** `fn`, throwing first when the request (its first argument's `req`, or itself) names `stage`. */
  wrap<A extends unknown[], R>(stage: string, fn: (...args: A) => R, requestOf: (...args: A) => IncomingMessage): (...args: A) => R;
  chain(policies: readonly Policy[]): Policy[];
  /**
   * Arms the stages after the hand-over on this response: its next setHeader (`relay-head`) or
   * write (`relay-body`) throws once, or its close listeners (the access log's among them) meet a
   * throw (`log`).
   */
  armResponse(req: IncomingMessage, res: ServerResponse): void;
}

export function testFaultsFromEnv(env: NodeJS.ProcessEnv, logger: Logger): TestFaults | undefined {
  if (env[TEST_FAULTS_ENV] !== '1') return undefined;
  const stageOf = (req: IncomingMessage) => req.headers[TEST_FAULT_HEADER];
  const faults: TestFaults = {
    wrap:
      (stage, fn, requestOf) =>
      (...args) => {
        if (stageOf(requestOf(...args)) === stage) throw new InjectedFault(stage);
        return fn(...args);
      },
    chain: (policies) => {
      logger.warn({ policies: policies.length }, 'test faults armed on the policy chain');
      return policies.map((policy, i) => (ctx) => {
        const stage = stageOf(ctx.req);
        if (stage === `policy:${i}`) throw new InjectedFault(stage);
        if (stage === `policy:${i}:async`) return Promise.resolve().then(() => Promise.reject(new InjectedFault(stage)));
        return policy(ctx);
      });
    },
    armResponse(req, res) {
      const stage = stageOf(req);
      if (stage === 'log')
        res.once('close', () => {
          throw new InjectedFault('log');
        });
      const method = stage === 'relay-head' ? 'setHeader' : stage === 'relay-body' ? 'write' : undefined;
      if (!method) return;
      const patched = res as unknown as Record<string, unknown>;
      const original = patched[method];
      // One throw, then the method as it was: the 500 (or the cut) that follows must be writable.
      patched[method] = () => {
        patched[method] = original;
        throw new InjectedFault(String(stage));
      };
    },
  };
  logger.warn({ env: TEST_FAULTS_ENV }, 'test fault injection is armed: never in production');
  return faults;
}
