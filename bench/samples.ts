/**
 * Latency samples in milliseconds, kept exactly (a run records at most a few hundred thousand).
 * autocannon's own histogram has a resolution of 1 ms, too coarse for a 0.5 ms target, so the
 * benchmark records every response time itself, to the microsecond.
 */
export class Samples {
  private values = new Float64Array(1 << 16);
  private length = 0;
  private sorted = true;

  add(ms: number): void {
    if (this.length === this.values.length) {
      const bigger = new Float64Array(this.values.length * 2);
      bigger.set(this.values);
      this.values = bigger;
    }
    this.values[this.length++] = ms;
    this.sorted = false;
  }

  addAll(other: Samples): void {
    for (let i = 0; i < other.length; i++) this.add(other.values[i]!);
  }

  get count(): number {
    return this.length;
  }

  /** The q-quantile (0..1), nearest rank; NaN when empty. */
  quantile(q: number): number {
    if (this.length === 0) return NaN;
    if (!this.sorted) {
      this.values.subarray(0, this.length).sort();
      this.sorted = true;
    }
    const rank = Math.min(this.length - 1, Math.max(0, Math.ceil(q * this.length) - 1));
    return this.values[rank]!;
  }

  mean(): number {
    let sum = 0;
    for (let i = 0; i < this.length; i++) sum += this.values[i]!;
    return this.length ? sum / this.length : NaN;
  }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
