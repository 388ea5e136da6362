import { loadSettings } from '../../src/config/settings.js';
import { createKeysInBulk } from '../keys.js';
import type { Options } from '../options.js';
import { CONFIG_DIR } from '../../test/harness/tollgate.js';
import { closedLoopOver, rawGet } from '../raw-load.js';
import { addCounts, NO_COUNTS, readRedisStats, resetRedisStats } from '../redis-stats.js';
import type { MemoryResults, MemoryStep } from '../report.js';
import { PATH, type Stack } from '../stack.js';
import { perRequest, say } from './common.js';

const STEPS = 4;

/**
 * Memory under many distinct keys: `keys` records written straight to Redis, then one request per
 * key for `distinct` of them, in steps, with the gateway's RSS after each. The key cache is
 * bounded (keyCache.maxEntries) and quota state lives in Redis, so RSS should level off once the
 * cache is full.
 */
export async function memoryPhase(stack: Stack, options: Options): Promise<MemoryResults> {
  say(`\nmemory: writing ${options.keys} key records to Redis`);
  const writeStarted = Date.now();
  const keys = await createKeysInBulk(stack.admin, options.keys, 'enterprise');
  const writeSeconds = (Date.now() - writeStarted) / 1000;
  say(`  written in ${writeSeconds.toFixed(1)} s; sending ${options.distinct} requests, each with another key, in ${STEPS} steps`);
  const gateway = stack.tollgate.process;
  const before = gateway.memory();
  const url = stack.tollgate.url;
  const steps: MemoryStep[] = [];
  const stepSize = Math.ceil(options.distinct / STEPS);
  let counts = NO_COUNTS;
  let requests = 0;
  for (let offset = 0; offset < options.distinct; offset += stepSize) {
    const amount = Math.min(stepSize, options.distinct - offset);
    await resetRedisStats(stack.admin);
    const run = await closedLoopOver({
      url,
      request: (i) => rawGet(url + PATH, { authorization: `Bearer ${keys[offset + i]}` }),
      amount,
      connections: options.connections,
    });
    stack.assertRunning();
    counts = addCounts(counts, await readRedisStats(stack.admin));
    requests += run.requests;
    stack.truncateLogs();
    const memory = gateway.memory();
    const heap = await heapOf(stack.tollgate.adminUrl);
    const step = {
      distinctKeys: offset + amount,
      rssMiB: memory.rssKiB / 1024,
      peakRssMiB: memory.peakKiB / 1024,
      heapUsedMiB: heap?.usedMiB,
      heapTotalMiB: heap?.totalMiB,
      requestsPerSecond: (1000 * run.requests) / run.elapsedMs,
      non2xx: run.non2xx,
      statusCounts: run.statusCounts,
      errors: run.errors,
    };
    steps.push(step);
    say(
      `  ${step.distinctKeys} distinct keys: RSS ${step.rssMiB.toFixed(0)} MiB (peak ${step.peakRssMiB.toFixed(0)}), JS heap used ${step.heapUsedMiB?.toFixed(0) ?? '?'} of ${step.heapTotalMiB?.toFixed(0) ?? '?'} MiB, ${step.requestsPerSecond.toFixed(0)} req/s, statuses ${JSON.stringify(step.statusCounts)}, errors ${step.errors}`,
    );
  }
  const redisMemory = /^used_memory:(\d+)/m.exec(await stack.admin.info('memory'))?.[1];
  return {
    cacheMaxEntries: loadSettings({ TOLLGATE_CONFIG_DIR: CONFIG_DIR }).keyCache.maxEntries,
    keyRecords: options.keys,
    keyRecordsWriteSeconds: writeSeconds,
    rssBeforeMiB: before.rssKiB / 1024,
    steps,
    redis: perRequest(counts, requests),
    redisUsedMemoryMiB: Number(redisMemory) / 1024 / 1024,
  };
}

/** The gateway's V8 heap, from its Prometheus metrics (prom-client's default process metrics). */
export async function heapOf(adminUrl: string | undefined): Promise<{ usedMiB: number; totalMiB: number } | undefined> {
  if (!adminUrl) return undefined;
  try {
    const text = await (await fetch(`${adminUrl}/metrics`)).text();
    const value = (name: string) => Number(new RegExp(`^\\w*${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    const used = value('nodejs_heap_size_used_bytes');
    const total = value('nodejs_heap_size_total_bytes');
    return Number.isNaN(used) ? undefined : { usedMiB: used / 1024 / 1024, totalMiB: total / 1024 / 1024 };
  } catch {
    return undefined;
  }
}
