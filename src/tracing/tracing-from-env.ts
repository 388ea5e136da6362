import { createRequire } from 'node:module';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { Logger } from '../observability/log.js';
import { BoundedSpanProcessor } from './bounded-span-processor.js';
import { Tracing } from './tracing.js';

/** service.version: the package's (dist/tracing/ and src/tracing/ both sit two folders below it). */
const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

type Env = Readonly<Record<string, string | undefined>>;

export interface TracingOptions {
  /** service.name unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names one. */
  defaultServiceName: string;
  logger: Logger;
  /** Spans lost (full queue, failed export): tollgate_trace_spans_dropped_total. */
  dropped?: (spans: number, reason: 'queue_full' | 'export_failed') => void;
}

const PROTOCOLS = ['http/protobuf', 'http/json'] as const;

/**
 * Tracing as the standard OpenTelemetry variables configure it, or undefined — no SDK object at
 * all, so no cost on the request path — when no OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT
 * or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), when OTEL_TRACES_EXPORTER is `none`, or when
 * OTEL_SDK_DISABLED is true. The exporters read the endpoint, OTEL_EXPORTER_OTLP_HEADERS and
 * _TIMEOUT themselves; the SDK reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default
 * parentbased_always_on). OTLP over gRPC is not shipped: that protocol is refused with an error
 * and tracing stays off.
 */
export function tracingFromEnv(env: Env = process.env, options: TracingOptions): Tracing | undefined {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint || env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  if (env.OTEL_TRACES_EXPORTER !== undefined && env.OTEL_TRACES_EXPORTER.trim() === 'none') return undefined;
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf').trim();
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    options.logger.error({ protocol, supported: PROTOCOLS }, 'tracing off: unsupported OTEL_EXPORTER_OTLP_PROTOCOL');
    return undefined;
  }
  const exporter = protocol === 'http/json' ? new JsonExporter() : new ProtobufExporter();
  const processor = new BoundedSpanProcessor(exporter, {
    maxQueueSize: positive(env.OTEL_BSP_MAX_QUEUE_SIZE, 2048),
    maxExportBatchSize: positive(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512),
    scheduledDelayMs: positive(env.OTEL_BSP_SCHEDULE_DELAY, 5000),
    exportTimeoutMs: positive(env.OTEL_BSP_EXPORT_TIMEOUT, 30_000),
    dropped: options.dropped ?? (() => undefined),
  });
  const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: options.defaultServiceName, [ATTR_SERVICE_VERSION]: VERSION }).merge(
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the defaults.
    detectResources({ detectors: [envDetector] }),
  );
  const provider = new BasicTracerProvider({ resource, spanProcessors: [processor] });
  const sampler = env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on';
  options.logger.info({ protocol, sampler, samplerArg: env.OTEL_TRACES_SAMPLER_ARG }, 'tracing on (OTLP/HTTP)');
  return new Tracing(provider);
}

function positive(value: string | undefined, fallback: number): number {
  const n = Number(value);
  return value !== undefined && Number.isFinite(n) && n > 0 ? n : fallback;
}
