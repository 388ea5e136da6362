import { Cluster } from 'ioredis';
import { onSubscriptionGap, subscriberFor, type RedisClient } from './connect.js';

/** A listener's place on a channel: `ready` once its subscription has taken effect. */
export interface Subscription {
  stop(): void;
  ready: Promise<void>;
}

export interface ChannelListener {
  message(message: string): void;
  /** Messages may have been missed: after the subscription took effect, and after every later loss. */
  gap(): void;
}

/**
 * A connection that dropped without a word (a middlebox's idle timeout, a peer gone without a FIN)
 * looks open to ioredis for as long as the kernel keeps it, and receives nothing: the subscriber
 * PINGs every `heartbeatMs` and, when a PING is still unanswered two beats later, reconnects,
 * which subscribes again and reports a gap.
 */
const HEARTBEAT_MS = 5_000;

/**
 * Every channel a process listens on (key changes, lease notices, cache events) shares one
 * subscriber connection per Redis client, so a gateway holds two connections to Redis whatever it
 * listens to (docs/kubernetes.md sizes Redis by it). The connection opens with the first listener
 * and closes with the last.
 */
export class Subscriptions {
  private subscriber?: RedisClient;
  /** Per channel: its listeners, and when its SUBSCRIBE was answered (or failed). */
  private readonly channels = new Map<string, { listeners: Set<ChannelListener>; ready: Promise<void> }>();
  private heartbeat?: NodeJS.Timeout;
  private unanswered = 0;
  private pinging = false;

  constructor(
    private readonly main: RedisClient,
    private readonly heartbeatMs = HEARTBEAT_MS,
  ) {}

  /** Listens until the subscription is stopped. */
  listen(channel: string, listener: ChannelListener): Subscription {
    const subscriber = this.connection();
    let joined = this.channels.get(channel);
    if (!joined) {
      const listeners = new Set<ChannelListener>();
      // Anything published before the subscription took effect was missed.
      const ready = subscriber.subscribe(channel).then(
        () => listeners.forEach((l) => l.gap()),
        () => {},
      );
      this.channels.set(channel, (joined = { listeners, ready }));
    }
    joined.listeners.add(listener);
    return { stop: () => this.leave(channel, listener), ready: joined.ready };
  }

  private leave(channel: string, listener: ChannelListener): void {
    const listeners = this.channels.get(channel)?.listeners;
    if (!listeners?.delete(listener) || listeners.size > 0) return;
    this.channels.delete(channel);
    if (this.channels.size > 0) {
      void this.subscriber?.unsubscribe(channel).catch(() => {});
      return;
    }
    clearInterval(this.heartbeat);
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }

  /** One PING per beat; a PING still unanswered at the next beat (or failed) counts as missed. */
  private beat(subscriber: RedisClient): void {
    if (subscriber.status !== 'ready') return;
    if (this.pinging) {
      if (++this.unanswered < 2) return;
      this.unanswered = 0;
      this.pinging = false;
      subscriber.disconnect(true);
      return;
    }
    this.pinging = true;
    subscriber.ping().then(
      () => {
        this.pinging = false;
        this.unanswered = 0;
      },
      () => {
        // Failed rather than late (a command timeout, a closed connection): the next beat counts it.
      },
    );
  }

  private connection(): RedisClient {
    if (this.subscriber) return this.subscriber;
    const subscriber = subscriberFor(this.main);
    this.subscriber = subscriber;
    subscriber.on('error', () => {
      // Surfaces through the main client's health; reconnection (and resubscription) is automatic.
    });
    subscriber.on('message', (channel: string, message: string) =>
      this.channels.get(channel)?.listeners.forEach((l) => l.message(message)),
    );
    onSubscriptionGap(subscriber, this.main, () => this.channels.forEach(({ listeners }) => listeners.forEach((l) => l.gap())));
    // A Cluster's PING goes to any node, not the subscription's: it has node events instead.
    if (!(subscriber instanceof Cluster)) {
      this.heartbeat = setInterval(() => this.beat(subscriber), this.heartbeatMs);
      this.heartbeat.unref();
    }
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
