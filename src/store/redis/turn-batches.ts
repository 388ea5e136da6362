/**
 * Gathers the calls made during one event-loop turn into batches, one per group, and sends each
 * batch once, after the turn's I/O callbacks have run (setImmediate). Under load one turn handles
 * many requests, so the requests of one hot key cost one Redis command together instead of one
 * each. Order within a group is the order of the calls; a batch holds at most `maxSize` items, and
 * a full one is sent at once.
 */
export class TurnBatches<Item, Result> {
  private readonly open = new Map<string, Batch<Item, Result>>();
  private scheduled = false;

  constructor(
    /** Sends one group's items; resolves to one result per item, in the same order. */
    private readonly send: (items: Item[]) => Promise<Result[]>,
    private readonly maxSize: number,
  ) {}

  add(group: string, item: Item): Promise<Result> {
    let batch = this.open.get(group);
    if (!batch) {
      batch = { items: [], waiters: [] };
      this.open.set(group, batch);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(this.flush);
      }
    }
    const pending = batch;
    return new Promise<Result>((resolve, reject) => {
      pending.items.push(item);
      pending.waiters.push({ resolve, reject });
      if (pending.items.length >= this.maxSize) {
        this.open.delete(group);
        this.dispatch(pending);
      }
    });
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    for (const batch of this.open.values()) this.dispatch(batch);
    this.open.clear();
  };

  private dispatch({ items, waiters }: Batch<Item, Result>): void {
    this.send(items).then(
      (results) => {
        for (let i = 0; i < waiters.length; i++) waiters[i]!.resolve(results[i]!);
      },
      (err: unknown) => {
        for (const waiter of waiters) waiter.reject(err);
      },
    );
  }
}

interface Batch<Item, Result> {
  items: Item[];
  waiters: Array<{ resolve: (result: Result) => void; reject: (err: unknown) => void }>;
}
