import { Cluster } from 'ioredis';
import type { Redis } from 'ioredis';
import { clusterSubscription, onSubscriptionGap, subscriberFor, type RedisClient } from './connect.js';

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
 * which subscribes again and reports a gap. On a Cluster the PING goes to the node the subscriptions
 * live on (a node that hangs without closing sends no node event), and a silent one is dropped:
 * ioredis then subscribes on another node, and the gap is reported.
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
  /** The connection the outstanding PING went to. */
  private pinged?: RedisClient;

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
    const connection = subscriber instanceof Cluster ? clusterSubscription(subscriber) : subscriber;
    if (!connection) return;
    // A new connection (a Cluster's subscriptions moved) starts with no PING outstanding.
    if (connection !== this.pinged) {
      this.pinged = connection;
      this.pinging = false;
      this.unanswered = 0;
    }
    if (connection.status !== 'ready') {
      // ioredis reconnects a server's subscriber itself, but a Cluster's subscription connection
      // may have been opened on a hung node, whose ready check is never answered: move it on.
      if (subscriber instanceof Cluster && ++this.unanswered >= 2) {
        this.unanswered = 0;
        this.dropClusterSubscription(connection);
      }
      return;
    }
    if (this.pinging) {
      if (++this.unanswered < 2) return;
      this.unanswered = 0;
      this.pinging = false;
      if (subscriber instanceof Cluster) this.dropClusterSubscription(connection);
      else subscriber.disconnect(true);
      return;
    }
    this.pinging = true;
    connection.ping().then(
      () => {
        if (this.pinged !== connection) return;
        this.pinging = false;
        this.unanswered = 0;
      },
      () => {
        // Failed rather than late (a command timeout, a closed connection): the next beat counts it.
      },
    );
  }

  /**
   * Destroyed, not closed: a FIN to a hung node is never answered, so the connection would not end
   * and ioredis would not move the subscriptions. Messages published meanwhile were missed: a gap
   * now, and once more a second later (after the new node's SUBSCRIBE, as onSubscriptionGap does).
   */
  private dropClusterSubscription(connection: Redis): void {
    connection.stream?.destroy();
    const gap = () => this.channels.forEach(({ listeners }) => listeners.forEach((l) => l.gap()));
    gap();
    setTimeout(gap, 1000).unref();
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
    this.heartbeat = setInterval(() => this.beat(subscriber), this.heartbeatMs);
    this.heartbeat.unref();
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
