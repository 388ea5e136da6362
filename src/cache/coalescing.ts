/**
 * Requests for one URL in flight upstream on this replica: the first leads, the others wait for it
 * (bounded) and then look the cache up again. What the leader stored is then read under each
 * waiter's own scope and Vary fields, so a wait never hands one consumer another's response: it
 * only saves the trip when the response could be shared anyway.
 */
export class Coalescing {
  private readonly flights = new Map<string, Flight>();

  current(key: string): Flight | undefined {
    return this.flights.get(key);
  }

  /** This request goes upstream for `key`; `done` once its answer is stored (or known not to be). */
  lead(key: string): { done(): void } {
    const flight = new Flight();
    this.flights.set(key, flight);
    let over = false;
    return {
      done: () => {
        if (over) return;
        over = true;
        if (this.flights.get(key) === flight) this.flights.delete(key);
        flight.finish();
      },
    };
  }
}

class Flight {
  private readonly finished: Promise<void>;
  private resolve!: () => void;

  constructor() {
    this.finished = new Promise((resolve) => (this.resolve = resolve));
  }

  finish(): void {
    this.resolve();
  }

  /** true once the leader is done; false if `ms` passed first (the waiter then goes on its own). */
  wait(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
    return Promise.race([this.finished.then(() => true), timeout]).finally(() => clearTimeout(timer));
  }
}
