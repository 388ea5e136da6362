import { dirname, resolve } from 'node:path';
import { editedConfig } from './config-edit.js';

/**
 * Tollgate targets that differ from `tollgate` only in how the run's key is limited (docs/clients.md,
 * "Rate-limit headers"), to show what each quota feature costs beside fixed windows in the same
 * run: the shipped config with one edit each, in the run's scratch directory. The run's key
 * (enterprise, with its own quotas, owner `bench`) never reaches a limit under any of them.
 */
export const QUOTA_VARIANTS = {
  // Smooth limits: the enterprise plan as a generic cell rate with a burst.
  'tollgate-gcra': {
    'plans.yaml': (y: string) =>
      y.replace(
        /enterprise: \{ perMinute: 3000, perDay: 1000000 \}/,
        'enterprise: { perMinute: 3000, perDay: 1000000, algorithm: gcra, burst: 1000 }',
      ),
  },
  // Route costs: the benchmarked route costs 3 units.
  'tollgate-cost': {
    'gateway.yaml': (y: string) => y.replace(/^ {2}costs: \[\].*$/m, '  costs: [{ method: GET, path: /v1/categories, cost: 3 }]'),
  },
  // Owner quotas: the enterprise plan shared by the owner's keys.
  'tollgate-owner': {
    'plans.yaml': (y: string) =>
      y.replace(/enterprise: \{ perMinute: 3000, perDay: 1000000 \}/, 'enterprise: { perMinute: 3000, perDay: 1000000, scope: owner }'),
  },
  // Month windows: the enterprise plan with a month (never reached), its day and month in Europe/Berlin.
  'tollgate-month': {
    'plans.yaml': (y: string) =>
      y.replace(
        /enterprise: \{ perMinute: 3000, perDay: 1000000 \}/,
        'enterprise: { perMinute: 3000, perDay: 1000000, perMonth: 100000000000 }',
      ),
    'gateway.yaml': (y: string) => y.replace(/^ {2}timeZone: UTC\b/m, '  timeZone: Europe/Berlin'),
  },
  // The plan an API business sells: a month and prepaid credits beside the minute and day, leases
  // as shipped (a block of a credits key holds credits too), to be read beside tollgate (minute and
  // day alone). The run's key holds a balance no run spends (stack.ts).
  'tollgate-month-credits': {
    'plans.yaml': (y: string) =>
      y.replace(
        /enterprise: \{ perMinute: 3000, perDay: 1000000 \}/,
        'enterprise: { perMinute: 3000, perDay: 1000000, perMonth: 100000000000, credits: required }',
      ),
  },
  // Quota leases on (docs/quota-leases.md), as shipped: the hot key is admitted against blocks reserved in Redis.
  'tollgate-leases': {
    'gateway.yaml': (y: string) => y.replace(/^ {2}leases: \{ enabled: \w+ \}/m, '  leases: { enabled: true }'),
  },
  // Quota leases off: every request is one script call (the path without a lease).
  'tollgate-no-leases': {
    'gateway.yaml': (y: string) => y.replace(/^ {2}leases: \{ enabled: \w+ \}/m, '  leases: { enabled: false }'),
  },
  // Limit rules (docs/policies.md): three rules matching the benchmarked route (never reached), each
  // by other attributes, decided with the plan in one script call per request (never leased).
  'tollgate-limits': {
    'gateway.yaml': (y: string) =>
      y.replace(
        /^limits: \[\].*$/m,
        [
          'limits:',
          '  - { name: per-key, match: { methods: [GET], path: /v1/categories }, by: [consumer.id], perSecond: 1000000000 }',
          '  - { name: per-address, match: { path: /v1/categories }, by: [client.address], perMinute: 1000000000 }',
          '  - { name: per-key-address, by: [consumer.id, client.prefix/24], perHour: 1000000000 }',
        ].join('\n'),
      ),
  },
} as const;

export type QuotaVariant = keyof typeof QUOTA_VARIANTS;
export const QUOTA_VARIANT_NAMES = Object.keys(QUOTA_VARIANTS) as QuotaVariant[];

/**
 * The config directory of one variant; throws if the shipped file no longer has the line it edits.
 * With `build` (a --compare/--variant build's name and cli), that build's own config/, edited alike.
 */
export function quotaVariantConfig(name: QuotaVariant, build?: { name: string; cli: string }): string {
  if (!build) return editedConfig(name, QUOTA_VARIANTS[name]);
  const dir = `${buildVariantName(build.name, name)}`.replace(/[^\w.-]/g, '_');
  return editedConfig(dir, QUOTA_VARIANTS[name], resolve(dirname(build.cli), '../../config'));
}

/**
 * The quota variants every --compare/--variant build also runs, as `<build>-limits` and
 * `<build>-no-leases`: limit rules beside the plan alone, so a change to the rules' cost is judged
 * against the code before it in the same rounds (the others run on this checkout only).
 */
export const BUILD_QUOTA_VARIANTS: readonly QuotaVariant[] = ['tollgate-no-leases', 'tollgate-limits'];

/** `tollgate@main` and `tollgate-limits`: `tollgate@main-limits`. */
export const buildVariantName = (build: string, variant: QuotaVariant) => `${build}${variant.slice('tollgate'.length)}`;
