import { randomUUID } from 'node:crypto';
import { CONTINUE, type Policy } from '../context.js';

// A client's own id is kept only when it is short and plain, so it cannot inject into logs or
// headers downstream; anything else is replaced by a fresh UUID.
const WELL_FORMED = /^[A-Za-z0-9._:-]{8,128}$/;

export const requestId: Policy = (ctx) => {
  const sent = ctx.req.headers['x-request-id'];
  ctx.requestId = typeof sent === 'string' && WELL_FORMED.test(sent) ? sent : randomUUID();
  ctx.req.headers['x-request-id'] = ctx.requestId;
  ctx.res.setHeader('x-request-id', ctx.requestId);
  return CONTINUE;
};
