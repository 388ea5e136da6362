import type { IncomingMessage } from 'node:http';
import type { Tracer } from '@opentelemetry/api';
import type { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { GatewayTrace } from './gateway-trace.js';
import { ServerTrace } from './server-trace.js';

/** One process's tracer (tracing-from-env.ts makes it): a server span per request, and shutdown. */
export class Tracing {
  private readonly tracer: Tracer;

  constructor(private readonly provider: BasicTracerProvider) {
    this.tracer = provider.getTracer('tollgate');
  }

  /** The gateway's span of a request, with its children (key lookup, quota decision, upstream tries). */
  gatewayRequest(req: IncomingMessage, scheme: 'http' | 'https'): GatewayTrace {
    return new GatewayTrace(this.tracer, req, scheme);
  }

  /** A plain server span (the bundled backend). */
  serverRequest(req: IncomingMessage, scheme: 'http' | 'https'): ServerTrace {
    return new ServerTrace(this.tracer, req, scheme);
  }

  /** Exports what is queued, waiting at most `timeoutMs` (a dead receiver must not hold up shutdown). */
  async shutdown(timeoutMs = 2000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    await Promise.race([this.provider.shutdown().catch(() => undefined), late]);
    clearTimeout(timer);
  }
}
