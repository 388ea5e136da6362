import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { observeWhenDone } from '../../src/gateway/access-log.js';
import type { RequestContext } from '../../src/gateway/context.js';
import { createLogger } from '../../src/observability/log.js';
import { createMetrics } from '../../src/observability/metrics.js';

// The access line is written as one prebuilt string (src/observability/log.ts, infoLineWriter).
// It must be the line pino itself would write for the same fields: same bytes, same order.

function capture() {
  const lines: string[] = [];
  return { lines, logger: createLogger('info', 'tollgate-gateway', 'json', { write: (line: string) => void lines.push(line) }) };
}

function requestEnding(fields: {
  method?: string;
  url?: string;
  status: number;
  finished: boolean;
  consumer?: boolean;
  degraded?: boolean;
  requestId: string;
}) {
  const res = Object.assign(new EventEmitter(), {
    statusCode: fields.status,
    writableEnded: fields.finished,
    writableFinished: fields.finished,
  });
  const req = { method: fields.method, url: fields.url };
  const ctx: RequestContext = {
    req: req as IncomingMessage,
    res: res as unknown as ServerResponse,
    startedAtMs: performance.now(),
    requestId: fields.requestId,
    consumer: fields.consumer ? { id: 'abcdefghijkl', plan: 'pro' } : undefined,
    degraded: fields.degraded,
  };
  return { ctx, end: () => res.emit('close') };
}

/** What pino writes for the object the access log used to pass to `logger.info`. */
function pinoLine(ctx: RequestContext, ms: number): string {
  const { lines, logger } = capture();
  logger.info(
    {
      reqId: ctx.requestId,
      method: ctx.req.method,
      path: ctx.req.url ? ctx.req.url.split('?', 1)[0] : '',
      status: ctx.res.statusCode,
      ms,
      keyId: ctx.consumer?.id,
      plan: ctx.consumer?.plan,
      degraded: ctx.degraded || undefined,
      aborted: !ctx.res.writableFinished || undefined,
    },
    'request',
  );
  return lines[0]!;
}

const withoutTime = (line: string) => line.replace(/,"time":"[^"]+"/, '');

describe('the access line', () => {
  const cases = [
    {
      name: 'an identified request',
      method: 'GET',
      url: '/v1/categories?secret=1',
      status: 200,
      finished: true,
      consumer: true,
      requestId: 'r-1',
    },
    { name: 'an anonymous 401', method: 'GET', url: '/v1/pets', status: 401, finished: true, requestId: 'r-2' },
    {
      name: 'an aborted, degraded request',
      method: 'POST',
      url: '/v1/pets',
      status: 200,
      finished: false,
      consumer: true,
      degraded: true,
      requestId: 'r-3',
    },
    { name: 'odd characters to escape', method: 'GET', url: '/v1/"q\\u\u0001\u2028', status: 404, finished: true, requestId: 'id"\\' },
    { name: 'no method, no url', status: 400, finished: true, requestId: 'r-5' },
  ];
  for (const c of cases) {
    it(`is the line pino writes for the same fields: ${c.name}`, () => {
      const { lines, logger } = capture();
      const { ctx, end } = requestEnding(c);
      observeWhenDone(ctx, logger, createMetrics(), () => '/v1/x');
      end();
      expect(lines).toHaveLength(1);
      const ms = JSON.parse(lines[0]!).ms as number;
      expect(withoutTime(lines[0]!)).toBe(withoutTime(pinoLine(ctx, ms)));
      expect(lines[0]).toMatch(/^\{"level":30,"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z","pid":\d+,"name":"tollgate-gateway",/);
    });
  }

  it('carries the bindings of a child logger (tollgate up names the role)', () => {
    const { lines, logger } = capture();
    const { ctx, end } = requestEnding({ method: 'GET', url: '/', status: 200, finished: true, requestId: 'r' });
    observeWhenDone(ctx, logger.child({ role: 'gateway' }), createMetrics(), () => '/');
    end();
    expect(JSON.parse(lines[0]!)).toMatchObject({ role: 'gateway', msg: 'request', reqId: 'r' });
  });

  it('is not written below the info level', () => {
    const lines: string[] = [];
    const logger = createLogger('warn', 'tollgate-gateway', 'json', { write: (line: string) => void lines.push(line) });
    const { ctx, end } = requestEnding({ method: 'GET', url: '/', status: 200, finished: true, requestId: 'r' });
    observeWhenDone(ctx, logger, createMetrics(), () => '/');
    end();
    expect(lines).toEqual([]);
  });
});
