import { TraceFlags, type Context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, Span, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';

export interface BoundedProcessorOptions {
  /** Ended spans waiting for export; one more is dropped (OTEL_BSP_MAX_QUEUE_SIZE). */
  maxQueueSize: number;
  /** Spans per export request (OTEL_BSP_MAX_EXPORT_BATCH_SIZE). */
  maxExportBatchSize: number;
  /** How long a partial batch waits before it is sent (OTEL_BSP_SCHEDULE_DELAY). */
  scheduledDelayMs: number;
  /** An export not answered by then counts as failed; its spans are dropped (OTEL_BSP_EXPORT_TIMEOUT). */
  exportTimeoutMs: number;
  /** Spans lost: the queue was full, or their export failed or timed out. */
  dropped: (spans: number, reason: 'queue_full' | 'export_failed') => void;
}

/**
 * The SDK's BatchSpanProcessor drops spans past its queue silently (a diag log nobody sees), and
 * its drop count is private. This one keeps its own bounded queue and says what it drops. The
 * request path only pushes a finished span onto an array (or counts it dropped): serialising and
 * sending happen in a timer, one export at a time, so a slow or dead receiver fills the queue and
 * loses spans, never delays or fails a request.
 */
export class BoundedSpanProcessor implements SpanProcessor {
  private queue: ReadableSpan[] = [];
  private exporting?: Promise<void>;
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly options: BoundedProcessorOptions,
  ) {}

  onStart(_span: Span, _parentContext: Context): void {}

  onEnd(span: ReadableSpan): void {
    if (this.stopped || (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queue.length >= this.options.maxQueueSize) return this.options.dropped(1, 'queue_full');
    this.queue.push(span);
    if (this.queue.length >= this.options.maxExportBatchSize) this.schedule(0);
    else if (!this.timer) this.schedule(this.options.scheduledDelayMs);
  }

  private schedule(delayMs: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(this.tick, delayMs);
    // A process with nothing else to do exits; shutdown() flushes what is left.
    this.timer.unref();
  }

  private readonly tick = (): void => {
    this.timer = undefined;
    if (this.exporting) return; // the running export reschedules when it ends
    void this.exportBatch().then(() => {
      if (this.queue.length > 0) this.schedule(this.queue.length >= this.options.maxExportBatchSize ? 0 : this.options.scheduledDelayMs);
    });
  };

  /** Sends the oldest batch; resolves once answered or timed out (never rejects). */
  private exportBatch(): Promise<void> {
    if (this.exporting) return this.exporting;
    const batch = this.queue.splice(0, this.options.maxExportBatchSize);
    if (batch.length === 0) return Promise.resolve();
    const done = new Promise<void>((resolve) => {
      let answered = false;
      const finish = (ok: boolean) => {
        if (answered) return;
        answered = true;
        clearTimeout(timeout);
        if (!ok) this.options.dropped(batch.length, 'export_failed');
        resolve();
      };
      const timeout = setTimeout(() => finish(false), this.options.exportTimeoutMs);
      timeout.unref();
      try {
        this.exporter.export(batch, (result: ExportResult) => finish(result.code === ExportResultCode.SUCCESS));
      } catch {
        finish(false);
      }
    });
    this.exporting = done.finally(() => (this.exporting = undefined));
    return this.exporting;
  }

  async forceFlush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.exporting) await this.exporting;
    while (this.queue.length > 0) await this.exportBatch();
  }

  async shutdown(): Promise<void> {
    if (this.stopped) return;
    await this.forceFlush();
    this.stopped = true;
    await this.exporter.shutdown();
  }
}
