import { editedConfig, withService } from './config-edit.js';
import type { BenchResults, Side, Target } from './report.js';

/**
 * `tollgate-cache`: tollgate with the response cache on for the benchmarked GET (docs/cache.md:
 * a service claiming the path, memory store, ttlSeconds 5), full policy and access log as
 * `tollgate`. Every request still passes authentication and the quota; only the forward is
 * skipped. The upstream must allow it: the bundled backend's list says `Cache-Control: public,
 * max-age=5` itself, and in front of the plain Node upstream this target gets a second plain
 * upstream that says the same (BENCH_CACHE_CONTROL, bench/peers/plain-upstream.ts), so the plain
 * upstream of every other target keeps Node's defaults. Both count the requests they receive
 * (bench/peers/count-connections.ts): the report gives the upstream's requests per client request.
 */
export const CACHE_TARGET = 'tollgate-cache';
export const CACHE_CONTROL = 'public, max-age=5';
const SERVICE = 'bench-cache';

/** Upstream requests per client request it aims at, and throughput over the bare proxy's. */
const MAX_UPSTREAM_SHARE = 0.01;
const MIN_RATIO_TO_BARE = 2;

/** The shipped config with one service claiming `path` for `upstreamUrl`, cached. */
export function cacheConfig(upstreamUrl: string, path: string, suffix: string): string {
  const service = [`name: ${SERVICE}`, `paths: [${path}]`, `targets: [${upstreamUrl}]`, 'cache: { ttlSeconds: 5, store: memory }'];
  return editedConfig(`${CACHE_TARGET}${suffix}`, { 'gateway.yaml': withService(service) });
}

/** The targets-table rows of each `tollgate-cache` side of the run (one per upstream). */
export function cacheTargets(r: BenchResults): Target[] {
  const rows: Target[] = [];
  for (const sides of [r.throughput?.plainSides, r.throughput?.sides]) {
    const side = sides?.find((s) => s.name === CACHE_TARGET);
    if (!side) continue;
    const where = side.upstream === 'plain' ? 'plain Node upstream (Cache-Control: public, max-age=5)' : 'bundled backend';
    const share = side.upstreamRequestsPerRequest;
    rows.push({
      issue: '–',
      what: `${where}: upstream requests per client request, response cache on (${CACHE_TARGET})`,
      target: `≤ ${MAX_UPSTREAM_SHARE}`,
      measured:
        share === undefined
          ? 'not counted'
          : `${share.toFixed(4)} (${upstreamRequests(side)} for ${side.requests.toLocaleString('en-US')})`,
      met: share === undefined ? null : share <= MAX_UPSTREAM_SHARE,
    });
    if (side.medianRoundRatio !== undefined)
      rows.push({
        issue: '–',
        what: `${where}: throughput vs bare proxy, response cache on (${CACHE_TARGET})`,
        target: `≥ ${MIN_RATIO_TO_BARE}×`,
        measured: `${side.medianRoundRatio.toFixed(2)}× round median (of means ${(side.ratioToBare ?? NaN).toFixed(2)}×)`,
        met: side.medianRoundRatio >= MIN_RATIO_TO_BARE,
      });
  }
  return rows;
}

const upstreamRequests = (side: Side) => (side.upstreamRequestsPerRound ?? []).reduce((a, b) => a + b, 0).toLocaleString('en-US');

/** Under a throughput table with `tollgate-cache`: what reached its upstream. */
export function cacheNote(sides: Side[]): string {
  const side = sides.find((s) => s.name === CACHE_TARGET);
  if (side?.upstreamRequestsPerRequest === undefined) return '';
  const upstream = side.upstream === 'plain' ? `a twin of this upstream answering \`Cache-Control: ${CACHE_CONTROL}\`` : 'this upstream';
  return (
    `\n\n${CACHE_TARGET}: response cache on (memory store, ttlSeconds 5), in front of ${upstream}: ` +
    `${upstreamRequests(side)} upstream request(s) for ${side.requests.toLocaleString('en-US')} client requests (${side.upstreamRequestsPerRequest.toFixed(4)} per request).`
  );
}
