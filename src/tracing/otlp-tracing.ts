import { createRequire } from 'node:module';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { BoundedSpanProcessor } from './bounded-span-processor.js';
import type { Protocol, TracingOptions } from './tracing-from-env.js';
import { Tracing } from './tracing.js';

/** service.version: the package's (dist/tracing/ and src/tracing/ both sit two folders below it). */
const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

type Env = Readonly<Record<string, string | undefined>>;

/** The OpenTelemetry SDK exporting over OTLP/HTTP, as tracing-from-env.ts decided to turn it on. */
export function otlpTracing(env: Env, protocol: Protocol, options: TracingOptions): Tracing {
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
