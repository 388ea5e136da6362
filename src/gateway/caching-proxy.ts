import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import CachePolicy from 'http-cache-semantics';
import { admit, parseCacheControl, requestView, requestWantsRevalidation, staleAllowed, type Admission } from '../cache/admission.js';
import { SHARED, type CachePlace, type Scope } from '../cache/cache-key.js';
import type { CacheStore } from '../cache/cache-store.js';
import { Coalescing } from '../cache/coalescing.js';
import type { ResponseCache } from '../cache/response-cache.js';
import type { StoredResponse } from '../cache/stored-response.js';
import type { CacheConfig } from '../config/cache-schema.js';
import { canonicalTarget } from '../http/canonical-target.js';
import { connectionOptions } from '../http/connection-options.js';
import type { Metrics } from '../observability/metrics.js';
import type { Upstreams } from '../upstream/upstreams.js';
import type { RequestContext } from './context.js';
import type { ForwardPlan, ResponseTee, UpstreamProxy } from './proxy.js';
import { copyResponseHeaders } from './upstream-response-headers.js';

type Conditions = { 'if-none-match'?: string; 'if-modified-since'?: string };

/** Methods that change nothing (RFC 9110 §9.2.1): their responses invalidate nothing. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);
/** Fields never kept with a response: hop-by-hop ones, and those recomputed on every use. */
const NOT_STORED = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'age',
  'cache-status',
]);
/** Upstream errors a stale entry may stand in for (RFC 5861 §4). */
const STALE_IF_ERROR_STATUS = new Set([500, 502, 503, 504]);
const CACHE_NAME = 'tollgate';

/**
 * The response cache in front of the proxy's forward: a request that passed the whole policy
 * chain (authenticated, counted and charged, not banned) reaches here, and only the trip
 * upstream is saved. The request's own fields set by the chain (rate-limit fields, X-Request-Id,
 * Retry-After, traceresponse, Deprecation) are on `res` already and win over the stored ones, as
 * they win over an upstream's (upstream-response-headers.ts). Services without `cache` go straight
 * to the proxy.
 */
export function createCachingProxy(proxy: UpstreamProxy, upstreams: Upstreams, cache: ResponseCache, metrics: Metrics): UpstreamProxy {
  const flights = new Coalescing();

  function forward(ctx: RequestContext, plan: ForwardPlan): void {
    const route = ctx.route ?? upstreams.route(ctx.req.url ?? '/');
    const config = route.service.config.cache;
    if (!config) return proxy.forward(ctx, plan);
    const { req, res } = ctx;
    const method = req.method ?? 'GET';
    const place: CachePlace = { service: route.service.name, host: (plan.host || '').toLowerCase(), path: req.url ?? '/' };
    const store = cache.storeOf(place.service, config);
    if (method !== 'GET' && method !== 'HEAD') {
      count(place, 'bypass');
      res.setHeader('cache-status', `${CACHE_NAME}; fwd=method`);
      if (SAFE_METHODS.has(method)) return proxy.forward(ctx, plan);
      return proxy.forward(ctx, { ...plan, tee: new InvalidatingTee(place, store, cache, upstreams) });
    }
    // A body on a GET has no defined meaning (RFC 9110 §9.3.1): it is no key anyone could share.
    if (plan.body.kind === 'chunked' || (plan.body.kind === 'length' && plan.body.bytes > 0)) {
      count(place, 'bypass');
      res.setHeader('cache-status', `${CACHE_NAME}; fwd=bypass; detail=request-body`);
      return proxy.forward(ctx, plan);
    }
    // A range is a part of a representation: neither answered from a whole one here nor kept as one.
    if (req.headers.range !== undefined) {
      count(place, 'bypass');
      res.setHeader('cache-status', `${CACHE_NAME}; fwd=bypass; detail=range`);
      return proxy.forward(ctx, plan);
    }
    serve(ctx, plan, config, store, place).catch(() => {
      // A fault of the cache itself: the request goes upstream as if there were none.
      if (!res.headersSent) proxy.forward(ctx, plan);
    });
  }

  function count(place: CachePlace, result: string): void {
    metrics.cacheLookups.inc({ service: place.service, result });
    if (result !== 'bypass') cache.counted(place.service, result !== 'miss');
  }

  /** Scopes this request may read: every consumer's, then its consumer's own (when kept per consumer). */
  function scopesOf(ctx: RequestContext, config: CacheConfig): Scope[] {
    const consumer = ctx.consumer?.id;
    return consumer !== undefined && config.privateResponses === 'per-consumer' ? [SHARED, { shared: false, consumer }] : [SHARED];
  }

  /** `arrivedMs`: set on the second look, after waiting for another request for the same URL. */
  async function serve(
    ctx: RequestContext,
    plan: ForwardPlan,
    config: CacheConfig,
    store: CacheStore,
    place: CachePlace,
    arrivedMs?: number,
  ) {
    const { req, res } = ctx;
    const waited = arrivedMs !== undefined;
    let found;
    try {
      found = await cache.lookup(store, place, scopesOf(ctx, config), req.headers);
    } catch (err) {
      cache.failed('lookup', err);
      count(place, 'bypass');
      res.setHeader('cache-status', `${CACHE_NAME}; fwd=bypass; detail=store-unavailable`);
      return proxy.forward(ctx, plan);
    }
    if (res.destroyed || req.socket.destroyed) return;
    const forced = config.honourRequestNoCache && requestWantsRevalidation(req.headers);
    const entry = found.entry;
    const now = Date.now();
    if (entry && !forced && now < entry.freshUntilMs) {
      count(place, 'hit');
      return answerFromEntry(ctx, entry, `${CACHE_NAME}; hit${waited ? '; detail=coalesced' : ''}`);
    }
    // Another request for this URL is on its way upstream (on this replica): wait for it, then
    // look again (what it stored is read under this request's own scopes and Vary fields).
    if (!waited) {
      const flight = flights.current(tagKey(place));
      if (flight) {
        const since = Date.now();
        const done = await flight.wait(ctx.route?.service.config.timeoutMs ?? 15_000);
        metrics.cacheCoalescedWaits.inc({ service: place.service, outcome: done ? 'shared' : 'alone' });
        return serve(ctx, plan, config, store, place, since);
      }
    } else if (entry && !forced && entry.storedAtMs >= arrivedMs - 1) {
      // Validated by the request this one waited for, after it arrived: as good as its own validation.
      count(place, 'hit');
      return answerFromEntry(ctx, entry, `${CACHE_NAME}; hit; detail=coalesced`);
    }
    const revalidating = entry !== undefined && hasValidator(entry);
    const fwd = forced ? 'request' : entry ? 'stale' : found.varyMiss ? 'vary-miss' : 'miss';
    if (req.method === 'HEAD' && !revalidating) {
      // A HEAD is answered from a stored GET, never stored itself.
      count(place, 'miss');
      return proxy.forward(ctx, { ...plan, tee: new StatusTee(res, `${CACHE_NAME}; fwd=${fwd}`) });
    }
    let clientConditions: Conditions | undefined;
    if (revalidating) {
      // Our validators replace the client's: a 304 is for the cache; the client's own
      // conditions are answered from the refreshed entry.
      clientConditions = { 'if-none-match': req.headers['if-none-match'], 'if-modified-since': req.headers['if-modified-since'] };
      delete req.headers['if-none-match'];
      delete req.headers['if-modified-since'];
      const policy = CachePolicy.fromObject(entry.policy);
      const conditional = policy.revalidationHeaders(requestView(place.path, place.host, varyFieldsOf(entry), req.headers));
      if (conditional['if-none-match']) req.headers['if-none-match'] = String(conditional['if-none-match']);
      if (conditional['if-modified-since']) req.headers['if-modified-since'] = String(conditional['if-modified-since']);
    }
    const flight = req.method === 'GET' && !waited ? flights.lead(tagKey(place)) : undefined;
    const tee = new StoringTee({ ctx, config, store, place, fwd, entry, scope: found.scope, flight, clientConditions });
    return proxy.forward(ctx, { ...plan, tee });
  }

  /** The tee that reads an upstream answer to a GET: stores it when RFC 9111 and the config allow, refreshes on a 304. */
  class StoringTee implements ResponseTee {
    private admission?: Admission & { store: true };
    private upstreamHeaders?: IncomingHttpHeaders;
    private chunks: Buffer[] = [];
    private bytes = 0;
    private collecting = false;
    private finished = false;
    /** How the cache answers instead of the upstream's response: a refreshed entry (304) or a stale one (error). */
    private instead?: { kind: 'refresh'; headers: IncomingHttpHeaders } | { kind: 'stale'; status?: number };
    private status = 0;

    constructor(
      private readonly p: {
        ctx: RequestContext;
        config: CacheConfig;
        store: CacheStore;
        place: CachePlace;
        fwd: string;
        /** The entry found (stale, or forced to revalidate) and the scope it was found in. */
        entry?: StoredResponse;
        scope?: Scope;
        flight?: { done(): void };
        /** The client's own conditions, replaced by the cache's validators on the way upstream. */
        clientConditions?: Conditions;
      },
    ) {}

    head(status: number, headers: IncomingHttpHeaders): boolean {
      const { ctx, config, place, fwd, entry } = this.p;
      this.status = status;
      if (entry && status === 304 && hasValidator(entry)) {
        this.instead = { kind: 'refresh', headers };
        return true;
      }
      if (entry && STALE_IF_ERROR_STATUS.has(status) && this.staleUsable(entry)) {
        this.instead = { kind: 'stale', status };
        return true;
      }
      count(place, 'miss');
      const admission =
        ctx.req.method === 'GET'
          ? admit(config, place.path, place.host, ctx.req.headers, status, headers, ctx.consumer?.id, Date.now())
          : undefined;
      const length = Number(headers['content-length'] ?? 0);
      if (admission?.store && length <= config.maxEntryBytes) {
        this.admission = admission;
        this.upstreamHeaders = headers;
        this.collecting = true;
      }
      const ours = `${CACHE_NAME}; fwd=${fwd}${entry ? `; fwd-status=${status}` : ''}${this.collecting ? '; stored' : ''}`;
      const theirs = headers['cache-status'];
      ctx.res.setHeader('cache-status', theirs ? `${String(theirs)}, ${ours}` : ours);
      return false;
    }

    data(chunk: Buffer): void {
      if (!this.collecting) return;
      this.bytes += chunk.length;
      if (this.bytes > this.p.config.maxEntryBytes) {
        // Too large to keep: it streams through, unstored.
        this.collecting = false;
        this.chunks = [];
        return;
      }
      this.chunks.push(chunk);
    }

    /** The response ends once it is stored (bounded by the store's command timeout): the client that saw `stored` finds it on any replica. */
    end(): Promise<void> | void {
      if (this.finished) return;
      this.finished = true;
      if (!this.collecting || !this.admission) return this.p.flight?.done();
      const { ctx, store, place } = this.p;
      const admission = this.admission;
      const headers = storedHeaders(this.upstreamHeaders!);
      const entry: StoredResponse = {
        kind: 'response',
        status: this.status,
        headers,
        body: this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks),
        policy: admission.policy.toObject(),
        storedAtMs: Date.now(),
        freshUntilMs: admission.freshUntilMs,
        expiresAtMs: admission.expiresAtMs,
        ageSeconds: admission.ageSeconds,
        service: place.service,
        path: place.path,
      };
      return cache
        .save(store, place, admission.scope, admission.varyFields, ctx.req.headers, entry)
        .catch((err: unknown) => cache.failed('store', err))
        .finally(() => this.p.flight?.done());
    }

    abort(): void {
      this.collecting = false;
      this.chunks = [];
      if (this.finished) return;
      this.finished = true;
      this.p.flight?.done();
    }

    covers(): boolean {
      const { entry } = this.p;
      if (!entry || !this.staleUsable(entry)) return false;
      this.instead = { kind: 'stale' };
      return true;
    }

    answer(): void {
      const { ctx, place, store, config } = this.p;
      const entry = this.p.entry!;
      const instead = this.instead!;
      this.finished = true;
      // The client's conditions, not the cache's validators, decide between 304 and 200 for it.
      const conditions = this.p.clientConditions;
      if (conditions) {
        for (const name of ['if-none-match', 'if-modified-since'] as const) {
          if (conditions[name] === undefined) delete ctx.req.headers[name];
          else ctx.req.headers[name] = conditions[name];
        }
      }
      if (instead.kind === 'stale') {
        count(place, 'stale_hit');
        this.p.flight?.done();
        const status = instead.status ? `; fwd-status=${instead.status}` : '';
        return answerFromEntry(ctx, entry, `${CACHE_NAME}; fwd=stale${status}; detail=stale-if-error`);
      }
      count(place, 'revalidated');
      const refreshed = refresh(config, place, ctx.req.headers, entry, instead.headers, ctx.consumer?.id);
      answerFromEntry(ctx, refreshed?.entry ?? entry, `${CACHE_NAME}; fwd=${this.p.fwd}; fwd-status=304`);
      if (!refreshed?.kept || !this.p.scope) return this.p.flight?.done();
      // Stored back where it was found: the scope it was read in, the variant of this request.
      cache
        .save(store, place, this.p.scope, varyFieldsOf(refreshed.entry), ctx.req.headers, refreshed.entry)
        .catch((err: unknown) => cache.failed('store', err))
        .finally(() => this.p.flight?.done());
    }

    /** RFC 5861 within staleIfErrorSeconds past its freshness, unless the upstream forbade a stale answer. */
    private staleUsable(entry: StoredResponse): boolean {
      const seconds = this.p.config.staleIfErrorSeconds;
      if (seconds === 0) return false;
      const cc = parseCacheControl(entry.headers['cache-control']);
      return staleAllowed(cc) && Date.now() <= entry.freshUntilMs + seconds * 1000;
    }
  }

  return { ...proxy, forward };
}

/** The upstream's fields, for keeping: minus hop-by-hop ones (and those its Connection lists) and those recomputed on every use. */
function storedHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {};
  const listed = connectionOptions(headers.connection);
  for (const name in headers) {
    if (NOT_STORED.has(name) || listed?.includes(name)) continue;
    const value = headers[name];
    if (value !== undefined) kept[name] = value;
  }
  return kept;
}

/** Writes a stored response to the client: the request's own fields win, Age is its age now, the service's header rules apply, and the client's conditions are answered. */
function answerFromEntry(ctx: RequestContext, entry: StoredResponse, cacheStatus: string): void {
  const { req, res } = ctx;
  req.resume();
  res.statusCode = entry.status;
  // As on a relayed answer: where cors: applies, the target's own Access-Control-* fields stay out.
  copyResponseHeaders(entry.headers, res, ctx.corsApplies);
  const age = Math.max(0, Math.floor(entry.ageSeconds + (Date.now() - entry.storedAtMs) / 1000));
  res.setHeader('age', String(age));
  res.setHeader('cache-status', cacheStatus);
  // The service's responseHeaders rules, as on a relayed answer (proxy.ts relayHead): applied at
  // serving, never stored, since they are hot and filled in per request (${request.id}).
  ctx.responseRules?.applyTo(res);
  if (entry.status === 200 && notModified(req.headers, entry.headers)) {
    res.statusCode = 304;
    res.removeHeader('content-length');
    res.removeHeader('content-type');
    res.end();
    return;
  }
  res.setHeader('content-length', String(entry.body.length));
  if (req.method === 'HEAD') res.end();
  else res.end(entry.body);
}

/** RFC 9110 §13.1.1/§13.1.3 on a stored 200: If-None-Match by weak comparison, else If-Modified-Since. */
function notModified(request: IncomingHttpHeaders, stored: Record<string, string | string[]>): boolean {
  const inm = request['if-none-match'];
  const etag = stored.etag as string | undefined;
  if (inm !== undefined) {
    if (inm.trim() === '*') return true;
    if (!etag) return false;
    const weak = (tag: string) => tag.trim().replace(/^W\//, '');
    return inm.split(',').some((tag) => weak(tag) === weak(etag));
  }
  const ims = request['if-modified-since'];
  const lastModified = stored['last-modified'] as string | undefined;
  if (ims === undefined || !lastModified) return false;
  const since = Date.parse(ims);
  const modified = Date.parse(lastModified);
  return Number.isFinite(since) && Number.isFinite(modified) && modified <= since;
}

function hasValidator(entry: StoredResponse): boolean {
  return entry.headers.etag !== undefined || entry.headers['last-modified'] !== undefined;
}

function varyFieldsOf(entry: StoredResponse): string[] {
  const vary = entry.headers.vary;
  if (vary === undefined) return [];
  return (Array.isArray(vary) ? vary.join(',') : vary)
    .split(',')
    .map((f) => f.trim().toLowerCase())
    .filter(Boolean)
    .sort();
}

function tagKey(place: CachePlace): string {
  return `${place.service}\n${place.host}\n${place.path}`;
}

/**
 * The entry a 304 confirms (RFC 9111 §4.3.4): its fields updated by the 304's, fresh again for
 * its lifetime from now; undefined when the 304 does not match it (another validator).
 */
function refresh(
  config: CacheConfig,
  place: CachePlace,
  requestHeaders: IncomingHttpHeaders,
  entry: StoredResponse,
  headers304: IncomingHttpHeaders,
  consumer: string | undefined,
): { entry: StoredResponse; kept: boolean } | undefined {
  const policy = CachePolicy.fromObject(entry.policy);
  const view = requestView(place.path, place.host, varyFieldsOf(entry), requestHeaders);
  const { modified } = policy.revalidatedPolicy(view, { status: 304, headers: flat(headers304) });
  if (modified) return undefined;
  const merged: Record<string, string | string[]> = { ...entry.headers };
  for (const name in headers304) {
    if (NOT_STORED.has(name) || name === 'content-length' || name === 'content-encoding' || name === 'content-range') continue;
    const value = headers304[name];
    if (value !== undefined) merged[name] = value;
  }
  const now = Date.now();
  const admission = admit(config, place.path, place.host, requestHeaders, entry.status, merged, consumer, now);
  // The refreshed fields may no longer allow keeping it (no-store now): answered once, not stored.
  const kept = admission.store ? admission : undefined;
  const refreshed: StoredResponse = {
    ...entry,
    headers: merged,
    policy: kept ? kept.policy.toObject() : entry.policy,
    storedAtMs: now,
    freshUntilMs: kept ? kept.freshUntilMs : now,
    expiresAtMs: kept ? kept.expiresAtMs : now,
    ageSeconds: kept ? kept.ageSeconds : 0,
  };
  return { entry: refreshed, kept: kept !== undefined };
}

function flat(headers: IncomingHttpHeaders): Record<string, string> {
  const view: Record<string, string> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined) view[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return view;
}

/** Sets Cache-Status on a forwarded response the cache does not keep (a HEAD miss). */
class StatusTee implements ResponseTee {
  constructor(
    private readonly res: ServerResponse,
    private readonly status: string,
  ) {}
  head(): boolean {
    this.res.setHeader('cache-status', this.status);
    return false;
  }
  data(): void {}
  end(): void {}
  abort(): void {}
  answer(): void {}
  covers(): boolean {
    return false;
  }
}

/**
 * Watches the answer to an unsafe request (POST, PUT, PATCH, DELETE, …): a non-error status
 * invalidates the target URI, and its Location and Content-Location when they are of the same
 * origin (RFC 9111 §4.4), before the client hears the answer, on every replica.
 */
class InvalidatingTee implements ResponseTee {
  /** The invalidations under way: the response ends once they are done, so the client's next read, on any replica, misses. */
  private pending?: Promise<void>;

  constructor(
    private readonly place: CachePlace,
    private readonly store: CacheStore,
    private readonly cache: ResponseCache,
    private readonly upstreams: Upstreams,
  ) {}

  head(status: number, headers: IncomingHttpHeaders): boolean {
    if (status < 200 || status >= 400) return false;
    const { place, cache } = this;
    const done = [cache.invalidate(this.store, place)];
    for (const field of [headers.location, headers['content-location']]) {
      const other = sameOriginPath(place, field);
      if (other === undefined || other === place.path) continue;
      const route = this.upstreams.route(other);
      const config = route.service.config.cache;
      if (config)
        done.push(cache.invalidate(cache.storeOf(route.service.name, config), { ...place, service: route.service.name, path: other }));
    }
    this.pending = Promise.all(done).then(() => undefined);
    return false;
  }
  data(): void {}
  end(): Promise<void> | void {
    return this.pending;
  }
  abort(): void {}
  answer(): void {}
  covers(): boolean {
    return false;
  }
}

/** A Location or Content-Location as a canonical path of the request's own origin; undefined for another origin or a malformed value. */
function sameOriginPath(place: CachePlace, value: string | string[] | undefined): string | undefined {
  if (typeof value !== 'string' || value === '') return undefined;
  let url: URL;
  try {
    url = new URL(value, `http://${place.host || 'localhost'}${place.path}`);
  } catch {
    return undefined;
  }
  if (url.host.toLowerCase() !== (place.host || 'localhost')) return undefined;
  const target = canonicalTarget(url.pathname + url.search);
  return target.ok ? target.target : undefined;
}
