import { CONTINUE, type Policy } from '../context.js';
import { CONSUMER_ID_HEADER, CONSUMER_PLAN_HEADER, stripClientHeaders } from '../upstream-headers.js';

/**
 * Last policy before the proxy: the client's credentials and any identity headers it sent are
 * removed, and the consumer the gateway authenticated is named instead.
 */
export const upstreamIdentity: Policy = (ctx) => {
  const headers = ctx.req.headers;
  stripClientHeaders(headers);
  if (ctx.consumer) {
    headers[CONSUMER_ID_HEADER] = ctx.consumer.id;
    headers[CONSUMER_PLAN_HEADER] = ctx.consumer.plan;
  }
  return CONTINUE;
};
