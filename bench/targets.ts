import { CACHE_TARGET } from './cache-target.js';
import { JWT_TARGET } from './jwt-target.js';
import { MANY_KEYS_WRK_TARGET } from './many-keys-wrk.js';
import { POST_TARGET_NAMES } from './post-targets.js';
import { QUOTA_VARIANT_NAMES } from './quota-variants.js';
import { EDGE_RULES_TARGET } from './edge-rules-target.js';
import { POLICY_TARGET } from './policy-target.js';
import { SPREAD_TARGET } from './spread-target.js';
import { TRACE_TARGET_NAMES } from './trace-targets.js';

/** Every target a run can have, in the order the rounds visit them. */
export const TARGET_NAMES = [
  'bare',
  'bare-undici',
  'naive',
  'fastify',
  'tollgate',
  'tollgate-embedded',
  JWT_TARGET,
  ...QUOTA_VARIANT_NAMES,
  MANY_KEYS_WRK_TARGET,
  ...TRACE_TARGET_NAMES,
  SPREAD_TARGET,
  POLICY_TARGET,
  EDGE_RULES_TARGET,
  CACHE_TARGET,
  ...POST_TARGET_NAMES,
] as const;
/** What a run measures unless --targets says otherwise: the quota variants only on request. */
export const DEFAULT_TARGETS = ['bare', 'naive', 'fastify', 'tollgate', 'tollgate-embedded'];

/**
 * What the targets forward to in the throughput phase: `plain`, a plain Node `http.createServer`
 * with every default (bench/peers/plain-upstream.ts; announces `Keep-Alive: timeout=5`), the
 * upstream most users run; `bundled`, the category backend (`tollgate backend`; `timeout=65`).
 */
export const UPSTREAM_NAMES = ['plain', 'bundled'] as const;
export type UpstreamName = (typeof UPSTREAM_NAMES)[number];
