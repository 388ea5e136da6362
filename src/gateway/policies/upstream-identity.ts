import { ANONYMOUS_HEADER, ASSERTION_HEADER } from '../../identity/assertion.js';
import type { AssertionSigner } from '../assertion-signer.js';
import { CONTINUE, type Decision, type Policy } from '../context.js';
import { CONSUMER_ID_HEADER, CONSUMER_PLAN_HEADER, withoutClientHeaders } from '../upstream-headers.js';

/**
 * Last policy before the proxy: the client's credentials and any identity headers it sent
 * (including a forged X-Tollgate-Assertion) are removed, and the consumer the gateway
 * authenticated is named instead, with a short-lived signed assertion the upstream can verify.
 * An anonymous caller is named by nobody: X-Tollgate-Anonymous and the signed anonymous marker.
 * The assertion is a cache hit or signed on the spot (AssertionSigner): this stays synchronous.
 */
export function upstreamIdentity(assertions: AssertionSigner): Policy {
  return (ctx) => {
    const headers = withoutClientHeaders(ctx.req.headers);
    ctx.req.headers = headers;
    const consumer = ctx.consumer;
    if (!consumer) return CONTINUE;
    if (consumer.anonymous) {
      headers[ANONYMOUS_HEADER] = 'true';
      return withAssertion(headers, assertions.anonymousToken());
    }
    // Only where the issuer asked for it (jwt.issuers[].forwardToken): the upstream then checks the token itself too.
    if (ctx.forwardToken !== undefined) headers.authorization = `Bearer ${ctx.forwardToken}`;
    headers[CONSUMER_ID_HEADER] = consumer.id;
    headers[CONSUMER_PLAN_HEADER] = consumer.plan;
    return withAssertion(headers, assertions.token(consumer.id, consumer.plan, consumer.scopes));
  };
}

function withAssertion(headers: Record<string, unknown>, token: string): Decision {
  headers[ASSERTION_HEADER] = token;
  return CONTINUE;
}
