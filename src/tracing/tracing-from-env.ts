import type { Logger } from '../observability/log.js';
import type { Tracing } from './tracing.js';

type Env = Readonly<Record<string, string | undefined>>;

export interface TracingOptions {
  /** service.name unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names one. */
  defaultServiceName: string;
  logger: Logger;
  /** Spans lost (full queue, failed export): tollgate_trace_spans_dropped_total. */
  dropped?: (spans: number, reason: 'queue_full' | 'export_failed') => void;
}

export const PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type Protocol = (typeof PROTOCOLS)[number];

/**
 * Tracing as the standard OpenTelemetry variables configure it, or undefined — no SDK object at
 * all, so no cost on the request path — when no OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT
 * or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), when OTEL_TRACES_EXPORTER is `none`, or when
 * OTEL_SDK_DISABLED is true. The exporters read the endpoint, OTEL_EXPORTER_OTLP_HEADERS and
 * _TIMEOUT themselves; the SDK reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default
 * parentbased_always_on). OTLP over gRPC is not shipped: that protocol is refused with an error
 * and tracing stays off. The SDK and its exporters (otlp-tracing.ts) are imported only when tracing
 * is on: loading them costs a process a fifth of a second at start.
 */
export async function tracingFromEnv(env: Env = process.env, options: TracingOptions): Promise<Tracing | undefined> {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint || env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  if (env.OTEL_TRACES_EXPORTER !== undefined && env.OTEL_TRACES_EXPORTER.trim() === 'none') return undefined;
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf').trim();
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    options.logger.error({ protocol, supported: PROTOCOLS }, 'tracing off: unsupported OTEL_EXPORTER_OTLP_PROTOCOL');
    return undefined;
  }
  const { otlpTracing } = await import('./otlp-tracing.js');
  return otlpTracing(env, protocol as Protocol, options);
}
