/**
 * Tollgate targets that differ from `tollgate` only in tracing (docs/tracing.md): OpenTelemetry
 * on, exporting over OTLP/HTTP (http/protobuf, the default) to a sink on loopback that discards
 * what it gets (bench/peers/otlp-sink.ts), with parent-based ratio sampling at 1% and 100% (the
 * benchmark's requests carry no traceparent: the ratio decides). `tollgate` itself runs with no
 * endpoint, tracing off: the three side by side in one run are the cost of off / 1% / 100%.
 */
export const TRACE_TARGETS = {
  'tollgate-trace-1': '0.01',
  'tollgate-trace-100': '1',
} as const;

export type TraceTarget = keyof typeof TRACE_TARGETS;
export const TRACE_TARGET_NAMES = Object.keys(TRACE_TARGETS) as TraceTarget[];

/** The gateway's OTEL_* for one tracing target, exporting to `sinkUrl`. */
export function traceEnv(name: TraceTarget, sinkUrl: string): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: TRACE_TARGETS[name],
  };
}
