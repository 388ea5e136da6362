import { onSubscriptionGap, subscriberFor, type RedisClient } from './connect.js';

export interface ChannelListener {
  message(message: string): void;
  /** Messages may have been missed: after the subscription took effect, and after every later loss. */
  gap(): void;
}

/**
 * Every channel a process listens on (key changes, lease notices, cache events) shares one
 * subscriber connection per Redis client, so a gateway holds two connections to Redis whatever it
 * listens to (docs/kubernetes.md sizes Redis by it). The connection opens with the first listener
 * and closes with the last.
 */
export class Subscriptions {
  private subscriber?: RedisClient;
  private readonly channels = new Map<string, Set<ChannelListener>>();

  constructor(private readonly main: RedisClient) {}

  /** Listens until the returned function is called. */
  listen(channel: string, listener: ChannelListener): () => void {
    const subscriber = this.connection();
    let listeners = this.channels.get(channel);
    if (!listeners) {
      const joined = (listeners = new Set());
      this.channels.set(channel, joined);
      // Anything published before the subscription took effect was missed.
      void subscriber.subscribe(channel).then(
        () => joined.forEach((l) => l.gap()),
        () => {},
      );
    }
    listeners.add(listener);
    return () => this.leave(channel, listener);
  }

  private leave(channel: string, listener: ChannelListener): void {
    const listeners = this.channels.get(channel);
    if (!listeners?.delete(listener) || listeners.size > 0) return;
    this.channels.delete(channel);
    if (this.channels.size > 0) {
      void this.subscriber?.unsubscribe(channel).catch(() => {});
      return;
    }
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }

  private connection(): RedisClient {
    if (this.subscriber) return this.subscriber;
    const subscriber = subscriberFor(this.main);
    this.subscriber = subscriber;
    subscriber.on('error', () => {
      // Surfaces through the main client's health; reconnection (and resubscription) is automatic.
    });
    subscriber.on('message', (channel: string, message: string) => this.channels.get(channel)?.forEach((l) => l.message(message)));
    onSubscriptionGap(subscriber, this.main, () => this.channels.forEach((listeners) => listeners.forEach((l) => l.gap())));
    return subscriber;
  }
}

const shared = new WeakMap<RedisClient, Subscriptions>();

/** The subscriptions of a client: one per client, shared by its stores. */
export function subscriptionsOf(client: RedisClient): Subscriptions {
  let subscriptions = shared.get(client);
  if (!subscriptions) shared.set(client, (subscriptions = new Subscriptions(client)));
  return subscriptions;
}
