import type { Caller, LifecycleDeps } from '../keys/lifecycle/deps.js';
import type { Action } from './access/roles.js';
import type { PlansConfig } from '../config/plans-schema.js';
import type { TrafficCounters } from '../observability/traffic.js';
import type { Upstreams } from '../upstream/upstreams.js';
import type { UsageReader } from '../store/usage-store.js';

/** What a route handler gets: path parameters, the query, the body on demand, and who is calling. */
export interface AdminRequest {
  params: Record<string, string>;
  query: Record<string, string>;
  /** The JSON body (refusals thrown as LifecycleError: 400, 413, 415). */
  body(): Promise<unknown>;
  caller: Caller;
}

export interface AdminReply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** Instead of a JSON body: text written as it comes, with this content type (the usage export). */
  stream?: { contentType: string; chunks: AsyncIterable<string> };
}

export interface AdminRoute {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Below /admin/v1, with `{name}` for one path segment, e.g. /keys/{id}/rotate. */
  path: string;
  /** What it does, for the role table (access/roles.ts): who may, and whose keys it touches. */
  action: Action;
  handle(request: AdminRequest): Promise<AdminReply>;
}

/** What the routes work on. */
export interface AdminDeps {
  lifecycle: LifecycleDeps;
  /** The plans in force on this replica, and when they were loaded. */
  plans(): { config: PlansConfig; loadedAt: string };
  /** The upstream services in force on this replica, with their targets' load and health. */
  services(): ReturnType<Upstreams['describe']>;
  /** gateway.yaml's global `ipRules` in force on this replica (null: none). */
  ipRules?(): unknown;
  /** gateway.yaml's global `limits` in force on this replica. */
  limits?(): unknown;
  /** This replica's traffic counters, for GET /traffic and /bans (console); none, no such routes. */
  traffic?: TrafficCounters;
  /** Usage for invoicing as the quota step keeps it, and the zone dates are read in (quota.timeZone). */
  usage?: { reader: UsageReader; timeZone: string };
  /**
   * Purges a service's response cache (entries under a path prefix, or all), on every replica:
   * how many entries this replica's store dropped; undefined for a service that does not exist.
   */
  purgeCache?(service: string, prefix?: string): Promise<number | undefined>;
}
