import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { BasicTracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BoundedSpanProcessor } from '../../src/tracing/bounded-span-processor.js';

// The span queue between the request path and the OTLP exporter: bounded, one export at a time,
// and every span it loses counted.

class FakeExporter implements SpanExporter {
  batches: ReadableSpan[][] = [];
  pending: Array<(result: ExportResult) => void> = [];
  constructor(private readonly mode: 'ok' | 'hang' | 'fail') {}
  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.batches.push(spans);
    if (this.mode === 'ok') done({ code: ExportResultCode.SUCCESS });
    else if (this.mode === 'fail') done({ code: ExportResultCode.FAILED });
    else this.pending.push(done);
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

function setup(mode: 'ok' | 'hang' | 'fail', options: Partial<ConstructorParameters<typeof BoundedSpanProcessor>[1]> = {}) {
  const exporter = new FakeExporter(mode);
  const dropped = { queue_full: 0, export_failed: 0 };
  const processor = new BoundedSpanProcessor(exporter, {
    maxQueueSize: 10,
    maxExportBatchSize: 4,
    scheduledDelayMs: 10,
    exportTimeoutMs: 50,
    dropped: (n, reason) => (dropped[reason] += n),
    ...options,
  });
  const tracer = new BasicTracerProvider({ spanProcessors: [processor] }).getTracer('test');
  const spans = (n: number) => {
    for (let i = 0; i < n; i++) tracer.startSpan(`s${i}`).end();
  };
  return { exporter, dropped, processor, spans };
}

// The processor's timers run on a clock the test moves: what it asserts after "100 ms" is what the
// processor does in 100 ms of its own time, however slowly the machine runs them.
const sleep = (ms: number) => vi.advanceTimersByTimeAsync(ms);

describe('BoundedSpanProcessor', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('exports ended spans in batches of at most maxExportBatchSize', async () => {
    const { exporter, dropped, spans } = setup('ok');
    spans(9);
    await sleep(100);
    expect(exporter.batches.map((b) => b.length)).toEqual([4, 4, 1]);
    expect(dropped).toEqual({ queue_full: 0, export_failed: 0 });
  });

  it('a stuck exporter: one export in flight, the queue fills, every span past it is counted dropped', async () => {
    const { exporter, dropped, spans } = setup('hang', { exportTimeoutMs: 60_000 });
    spans(4);
    await sleep(20);
    spans(30);
    await sleep(20);
    expect(exporter.batches).toHaveLength(1);
    expect(dropped.queue_full).toBe(30 - 10);
  });

  it('an export that fails or never answers within exportTimeoutMs counts its spans dropped, and the next one goes', async () => {
    const failing = setup('fail');
    failing.spans(4);
    await sleep(30);
    expect(failing.dropped.export_failed).toBe(4);
    const hanging = setup('hang');
    hanging.spans(8);
    await sleep(200);
    expect(hanging.exporter.batches.length).toBe(2);
    expect(hanging.dropped.export_failed).toBe(8);
  });

  it('unsampled spans never enter the queue', async () => {
    const exporter = new FakeExporter('ok');
    const processor = new BoundedSpanProcessor(exporter, {
      maxQueueSize: 10,
      maxExportBatchSize: 4,
      scheduledDelayMs: 10,
      exportTimeoutMs: 50,
      dropped: () => undefined,
    });
    const { AlwaysOffSampler } = await import('@opentelemetry/sdk-trace-base');
    const tracer = new BasicTracerProvider({ sampler: new AlwaysOffSampler(), spanProcessors: [processor] }).getTracer('t');
    tracer.startSpan('x').end();
    await processor.forceFlush();
    expect(exporter.batches).toEqual([]);
  });

  it('shutdown exports what is queued', async () => {
    const { exporter, processor, spans } = setup('ok', { scheduledDelayMs: 60_000 });
    spans(3);
    await processor.shutdown();
    expect(exporter.batches.flat()).toHaveLength(3);
  });
});
