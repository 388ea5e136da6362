import { editedConfig, withService } from './config-edit.js';

/**
 * `tollgate-3-targets` (issue 22, item 8): tollgate with the benchmarked path served by a service
 * of three targets, the run's upstream and two more instances of the same program, balanced round
 * robin. Beside `tollgate` (one target, the default service) in the same rounds it is the cost of
 * balancing; the report shows how its requests spread over the three, read from the gateway's own
 * `tollgate_upstream_tries_total` (docs/services.md).
 */
export const SPREAD_TARGET = 'tollgate-3-targets';
export const SPREAD_SERVICE = 'bench';
export const SPREAD_INSTANCES = 3;

/** The config directory: the shipped one with `services:` claiming `path` for the three upstream URLs. */
export function spreadConfig(urls: string[], path: string, suffix: string): string {
  const service = [`name: ${SPREAD_SERVICE}`, `paths: [${path}]`, `targets: [${urls.join(', ')}]`, 'balance: round-robin'];
  return editedConfig(`${SPREAD_TARGET}${suffix}`, { 'gateway.yaml': withService(service) });
}

const trimmed = (url: string) => url.replace(/\/+$/, '');

/** Tries per target of the spread service so far, from the gateway's Prometheus text, in `urls` order. */
export async function triesPerTarget(adminUrl: string, urls: string[]): Promise<number[]> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const counts = urls.map(() => 0);
  for (const line of text.split('\n')) {
    if (!line.startsWith('tollgate_upstream_tries_total{')) continue;
    const service = /service="([^"]*)"/.exec(line)?.[1];
    const target = /target="([^"]*)"/.exec(line)?.[1];
    const i = target === undefined ? -1 : urls.findIndex((u) => trimmed(u) === trimmed(target));
    if (service === SPREAD_SERVICE && i >= 0) counts[i]! += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return counts;
}
