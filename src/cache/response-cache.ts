import type { CacheConfig } from '../config/cache-schema.js';
import type { Logger } from '../observability/log.js';
import type { Metrics } from '../observability/metrics.js';
import type { RedisClient } from '../store/redis/connect.js';
import { CacheEvents, type CacheEvent } from './cache-events.js';
import { scopeKey, tagOf, variantKey, type CachePlace, type Scope } from './cache-key.js';
import type { CacheStore } from './cache-store.js';
import { MemoryCacheStore } from './memory-cache-store.js';
import { RedisCacheStore } from './redis-cache-store.js';
import type { StoredResponse } from './stored-response.js';

/** What a lookup found: the stored response for this request (if any), and whether only its Vary variant was missing. */
export interface Found {
  readonly entry?: StoredResponse;
  readonly scope?: Scope;
  readonly varyMiss: boolean;
}

/**
 * The cache's storage side, for every service: which store a service's entries live in, looking
 * an entry up for a request (shared first, then the consumer's own; through a Vary record to the
 * variant), storing, and forgetting on every replica (invalidation after an unsafe request, purge).
 */
export class ResponseCache {
  private readonly memory = new Map<string, MemoryCacheStore>();
  private readonly redisStore?: RedisCacheStore;
  private readonly events: CacheEvents;
  /** Hits and misses per service on this replica, for the admin API's services view (and the console's hit ratio). */
  private readonly counts = new Map<string, { hits: number; misses: number }>();

  constructor(
    private readonly redis: RedisClient | undefined,
    private readonly metrics: Metrics,
    private readonly logger: Logger,
  ) {
    if (redis) this.redisStore = new RedisCacheStore(redis);
    this.events = new CacheEvents(redis);
  }

  /**
   * Other replicas' invalidations and purges, for this replica's memory stores: subscribed once the
   * first memory store exists (on the connection the key store's subscription uses).
   */
  private listenForEvents(): void {
    this.events.listen(
      (event) => this.applyLocally(event),
      () => {
        // Events may have been missed: nothing this replica holds can be trusted to be current.
        for (const [service, store] of this.memory) void store.purge(service);
      },
    );
  }

  /** The store of a service: Redis when asked for and configured, else this replica's memory. */
  storeOf(service: string, config: CacheConfig): CacheStore {
    if (config.store === 'redis' && this.redisStore) return this.redisStore;
    let store = this.memory.get(service);
    if (!store || store.maxBytes !== config.maxBytes) {
      store = new MemoryCacheStore(config.maxBytes, { evicted: () => this.metrics.cacheEvictions.inc({ service }) });
      this.memory.set(service, store);
      this.listenForEvents();
    }
    return store;
  }

  /** The entry for a request, in these scopes (the shared one first). */
  async lookup(
    store: CacheStore,
    place: CachePlace,
    scopes: readonly Scope[],
    headers: Record<string, string | string[] | undefined>,
  ): Promise<Found> {
    const tag = tagOf(place);
    const keys = scopes.map((scope) => scopeKey(tag, scope));
    const found = store instanceof MemoryCacheStore ? keys.map((key) => store.getNow(key)) : await store.getMany(keys);
    let varyMiss = false;
    for (let i = 0; i < found.length; i++) {
      const stored = found[i];
      if (!stored) continue;
      if (stored.kind === 'response') return { entry: stored, scope: scopes[i], varyMiss: false };
      const key = variantKey(keys[i]!, stored.fields, headers);
      const variant = store instanceof MemoryCacheStore ? store.getNow(key) : (await store.getMany([key]))[0];
      if (variant?.kind === 'response') return { entry: variant, scope: scopes[i], varyMiss: false };
      varyMiss = true;
    }
    return { varyMiss };
  }

  /** Keeps a response as its admission says (with a Vary record before it when it varies). */
  async save(
    store: CacheStore,
    place: CachePlace,
    scope: Scope,
    varyFields: readonly string[],
    headers: Record<string, string | string[] | undefined>,
    entry: StoredResponse,
  ): Promise<void> {
    const tag = tagOf(place);
    const key = scopeKey(tag, scope);
    if (varyFields.length === 0) {
      await store.set(tag, key, entry);
    } else {
      const record = {
        kind: 'vary' as const,
        fields: varyFields,
        expiresAtMs: entry.expiresAtMs,
        service: place.service,
        path: place.path,
      };
      await store.set(tag, key, record);
      await store.set(tag, variantKey(key, varyFields, headers), entry);
    }
    this.metrics.cacheStores.inc({ service: place.service });
    if (store instanceof MemoryCacheStore) this.metrics.cacheBytes.set({ service: place.service }, store.bytes);
  }

  /** Forgets a URL's entries, here and on every other replica. */
  async invalidate(store: CacheStore, place: CachePlace): Promise<void> {
    this.events.publish({ op: 'invalidate', place });
    await store.invalidate(tagOf(place), place).catch((err: unknown) => this.failed('invalidate', err));
  }

  /** Purges a service's entries (under a path prefix), here and on every other replica; how many this replica's store dropped. */
  async purge(service: string, config: CacheConfig | undefined, prefix?: string): Promise<number> {
    this.events.publish({ op: 'purge', service, prefix });
    const stores = new Set<CacheStore>();
    const memory = this.memory.get(service);
    if (memory) stores.add(memory);
    if (config?.store === 'redis' && this.redisStore) stores.add(this.redisStore);
    let purged = 0;
    for (const store of stores) purged += await store.purge(service, prefix);
    if (memory) this.metrics.cacheBytes.set({ service }, memory.bytes);
    return purged;
  }

  /** Another replica's event: only the memory stores are per replica (the Redis store forgot once, where it happened). */
  private applyLocally(event: CacheEvent): void {
    if (event.op === 'invalidate') {
      const store = this.memory.get(event.place.service);
      void store?.invalidate(tagOf(event.place), event.place);
    } else {
      void this.memory.get(event.service)?.purge(event.service, event.prefix);
    }
  }

  /** Counts a request answered from the cache (hit) or by the upstream (miss). */
  counted(service: string, hit: boolean): void {
    let count = this.counts.get(service);
    if (!count) this.counts.set(service, (count = { hits: 0, misses: 0 }));
    if (hit) count.hits++;
    else count.misses++;
  }

  /** A cached service's counts on this replica; undefined for a service without `cache`. */
  summary(service: string, config: CacheConfig | undefined) {
    if (!config) return undefined;
    const { hits, misses } = this.counts.get(service) ?? { hits: 0, misses: 0 };
    const store = config.store === 'redis' && this.redisStore ? ('redis' as const) : ('memory' as const);
    return { store, hits, misses, hitRatio: hits + misses > 0 ? hits / (hits + misses) : null };
  }

  /** A store operation failed: counted and logged; the request goes on without the cache. */
  failed(operation: string, err: unknown): void {
    this.metrics.cacheStoreErrors.inc({ operation });
    this.logger.warn({ err: { message: (err as Error)?.message }, operation }, 'cache store failed; bypassing the cache');
  }

  close(): void {
    this.events.close();
  }
}
