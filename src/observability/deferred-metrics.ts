import { Counter, type Registry } from 'prom-client';

// Request-path metrics counted in plain maps, one entry per label set, and handed to prom-client
// only when /metrics is scraped. prom-client's own inc/observe validate the label names and hash
// a sorted copy of the labels on every call; a request counts three or four times (measured:
// issue 14). The /metrics output is the same: the same series, labels, buckets and sums.

type Labels<L extends string> = Record<L, string>;

const ENTRY = Symbol('entry');
/** One level: a label's values to the next level, and ENTRY to the entry of the set ending here. */
type LabelNode = Map<string | typeof ENTRY, unknown>;

/**
 * Label sets to their entries, found by the values in the caller's order (each call site passes
 * one shape), one map level per label: nothing is built or hashed per call but the values
 * themselves, where joining them into one key string cost about 4× as much (165 against 45 ns
 * for three labels, measured).
 */
class LabelSets<T> {
  private readonly root: LabelNode = new Map();
  /** Every entry, in the order its label set was first seen. */
  readonly entries: T[] = [];

  /** `make` is called with the labels the first time a set is seen (a shared function: no closure per call). */
  entryOf<L extends Record<string, string>>(labels: L, make: (labels: L) => T): T {
    let node = this.root;
    for (const name in labels) {
      const value = labels[name]!;
      let next = node.get(value) as LabelNode | undefined;
      if (!next) node.set(value, (next = new Map()));
      node = next;
    }
    let entry = node.get(ENTRY) as T | undefined;
    if (entry === undefined) {
      entry = make(labels);
      node.set(ENTRY, entry);
      this.entries.push(entry);
    }
    return entry;
  }
}

/** A prom-client Counter whose increments wait in a plain map until the next scrape. */
export class DeferredCounter<L extends string> {
  private readonly pending = new LabelSets<{ labels: Labels<L>; n: number }>();

  constructor(config: { name: string; help: string; labelNames: readonly L[]; registers: Registry[] }) {
    const pending = this.pending;
    const counter: Counter<L> = new Counter<L>({
      ...config,
      collect() {
        for (const entry of pending.entries) {
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
    return this.pending.entryOf(labels, newCount);
  }
}

const newCount = <L extends string>(labels: Labels<L>) => ({ labels, n: 0 });

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
  private series = new LabelSets<Series>();

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
    return this.series.entryOf(labels, this.newSeries);
  }

  private readonly newSeries = (labels: Record<string, string>): Series => ({
    labels,
    buckets: new Array<number>(this.upperBounds.length).fill(0),
    sum: 0,
    count: 0,
  });

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
    for (const { labels, buckets, sum, count, exemplars } of this.series.entries) {
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
    this.series = new LabelSets();
  }
}
