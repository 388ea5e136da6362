import type { Logger } from '../observability/log.js';
import type { Tracing } from '../tracing/tracing.js';
import type { CategoryStore } from './category-store.js';

/** What request handlers need, passed explicitly (no module state). */
export interface BackendDeps {
  store: CategoryStore;
  logger: Logger;
  /** Largest request body read, in bytes; larger ones get 413. */
  maxBodyBytes: number;
  /** A server span per request, continuing the gateway's trace (OTEL_* set); absent: none. */
  tracing?: Tracing;
}
