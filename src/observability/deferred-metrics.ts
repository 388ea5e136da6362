import { Counter, type Registry } from 'prom-client';

// Request-path metrics counted in plain maps, one entry per label set, and handed to prom-client
// only when /metrics is scraped. prom-client's own inc/observe validate the label names and hash
// a sorted copy of the labels on every call; a request counts three or four times (measured:
// issue 14). The /metrics output is the same: the same series, labels, buckets and sums.

type Labels<L extends string> = Record<L, string>;

/** The key of a label set: its values in the caller's order (each call site passes one shape). */
function keyOf(labels: Record<string, string>): string {
  let key = '';
  for (const name in labels) key += `${labels[name]}\u0000`;
  return key;
}

/** A prom-client Counter whose increments wait in a plain map until the next scrape. */
export class DeferredCounter<L extends string> {
  private readonly pending = new Map<string, { labels: Labels<L>; n: number }>();

  constructor(config: { name: string; help: string; labelNames: readonly L[]; registers: Registry[] }) {
    const pending = this.pending;
    const counter: Counter<L> = new Counter<L>({
      ...config,
      collect() {
        for (const entry of pending.values()) {
          if (entry.n === 0) continue;
          counter.inc(entry.labels, entry.n);
          entry.n = 0;
        }
      },
    });
  }

  inc(labels: Labels<L>, n = 1): void {
    this.child(labels).n += n;
  }

  /**
   * The count of one label set, to add to directly (`child.n++`): for a caller that counts the
   * same labels on every request and keeps the handle, so nothing is keyed per call.
   */
  child(labels: Labels<L>): { n: number } {
    const key = keyOf(labels);
    let entry = this.pending.get(key);
    if (!entry) this.pending.set(key, (entry = { labels, n: 0 }));
    return entry;
  }
}

/** One label set of a PlainHistogram, as `child` returns it (opaque to callers). */
export type HistogramSeries = Series;

interface Series {
  labels: Record<string, string>;
  /** Observations per bucket (not cumulative), one per upper bound. */
  buckets: number[];
  sum: number;
  count: number;
  /** The last sampled trace seen in each bucket (the +Inf bucket last), when any. */
  exemplars?: Array<Exemplar | undefined>;
}

/** An OpenMetrics exemplar: the trace of one observation, and when it was made (seconds). */
interface Exemplar {
  labelSet: { trace_id: string };
  value: number;
  timestamp: number;
}

/**
 * A histogram kept in plain arrays and served to the registry in prom-client's own form (what
 * its Histogram's `get()` returns: `_bucket` series with `le` first, then `_sum` and `_count`),
 * so /metrics prints it exactly as a prom-client Histogram would. Sums are added in the order
 * of observation, as prom-client adds them. An observation may name its trace: the last one per
 * bucket is kept and printed as the bucket's exemplar when the scrape is OpenMetrics (prom-client
 * prints exemplars only in that format), so a latency spike in a dashboard links to a trace.
 */
export class PlainHistogram<L extends string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly upperBounds: number[];
  private series = new Map<string, Series>();

  constructor(config: { name: string; help: string; labelNames: readonly L[]; buckets: number[]; registers: Registry[] }) {
    this.name = config.name;
    this.help = config.help;
    this.upperBounds = [...config.buckets].sort((a, b) => a - b);
    for (const registry of config.registers) registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  observe(labels: Labels<L>, value: number, traceId?: string): void {
    this.observeOn(this.child(labels), value, traceId);
  }

  /** One label set's series, for a caller that keeps it and observes with `observeOn`. */
  child(labels: Labels<L>): HistogramSeries {
    const key = keyOf(labels);
    let series = this.series.get(key);
    if (!series) {
      series = { labels, buckets: new Array<number>(this.upperBounds.length).fill(0), sum: 0, count: 0 };
      this.series.set(key, series);
    }
    return series;
  }

  /** `observe` on a series `child` gave (after a `reset`, a kept series is no longer served). */
  observeOn(series: HistogramSeries, value: number, traceId?: string): void {
    const bounds = this.upperBounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    if (i < bounds.length) series.buckets[i]!++;
    series.sum += value;
    series.count++;
    if (traceId !== undefined) {
      series.exemplars ??= new Array<Exemplar | undefined>(bounds.length + 1);
      series.exemplars[i] = { labelSet: { trace_id: traceId }, value, timestamp: Date.now() / 1000 };
    }
  }

  async get() {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string; exemplar?: Exemplar }> = [];
    for (const { labels, buckets, sum, count, exemplars } of this.series.values()) {
      let cumulative = 0;
      this.upperBounds.forEach((le, i) => {
        cumulative += buckets[i]!;
        values.push({ labels: { le, ...labels }, value: cumulative, metricName: `${this.name}_bucket`, exemplar: exemplars?.[i] });
      });
      const inf = exemplars?.[this.upperBounds.length];
      values.push({ labels: { le: '+Inf', ...labels }, value: count, metricName: `${this.name}_bucket`, exemplar: inf });
      values.push({ labels: { ...labels }, value: sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...labels }, value: count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  reset(): void {
    this.series = new Map();
  }
}
