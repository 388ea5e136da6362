import { QUOTA_VARIANT_NAMES } from './quota-variants.js';

/** Every target a run can have, in the order the rounds visit them. */
export const TARGET_NAMES = ['bare', 'bare-undici', 'naive', 'fastify', 'tollgate', 'tollgate-embedded', ...QUOTA_VARIANT_NAMES] as const;
/** What a run measures unless --targets says otherwise: the quota variants only on request. */
export const DEFAULT_TARGETS = ['bare', 'naive', 'fastify', 'tollgate', 'tollgate-embedded'];
