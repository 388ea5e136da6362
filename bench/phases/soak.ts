import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadSettings } from '../../src/config/settings.js';
import { CONFIG_DIR } from '../../test/harness/tollgate.js';
import type { NodeProcess } from '../../test/harness/node-process.js';
import { createKeysInBulk } from '../keys.js';
import type { Options } from '../options.js';
import { workDir } from '../processes.js';
import { openLoop, rawGet } from '../raw-load.js';
import { SOAK_FLAT_WITHIN, type AfterGc, type SoakResults, type SoakSample } from '../report.js';
import { PATH, type Stack } from '../stack.js';
import { latencyStats, say } from './common.js';
import { heapOf } from './memory.js';

const SAMPLE_MS = 10_000;
const MiB = 1024 * 1024;

/**
 * Issue 14's soak: `keys` records written straight to Redis, then a gateway of its own sent
 * requests over all of them at a fixed rate (open loop) for `soakMinutes`, each pass over the keys
 * in a new random order, so the key cache (and the assertion-token cache, both keyCache.maxEntries)
 * fills, is re-read as entries age (ttlSeconds) and, with more keys than entries, evicts. The
 * gateway's RSS and JS heap are sampled every 10 s; after the warmup (a quarter of the run, and
 * at least the first pass over every key: the pass fills the cache, the rest lets V8 size its
 * heap for the churn of re-read entries) RSS should stay within ±10% of its mean.
 *
 * The gateway runs with --expose-gc and a hook that, on SIGUSR2, collects garbage and writes
 * process.memoryUsage() to a file: heap used after a full GC with one key cached (after a short
 * warmup on one key) and again with the cache full after the soak gives the heap each cached key
 * costs: its key cache entry and record, the quota derived from it, and its assertion token.
 */
export async function soakPhase(stack: Stack, options: Options): Promise<SoakResults> {
  const cacheMaxEntries = loadSettings({ TOLLGATE_CONFIG_DIR: CONFIG_DIR }).keyCache.maxEntries;
  const durationMs = options.soakMinutes * 60_000;
  const rate = options.soakRate;
  say(`\nsoak: writing ${options.keys} key records to Redis`);
  const writeStarted = Date.now();
  const keys = await createKeysInBulk(stack.admin, options.keys, 'enterprise');
  const keyRecordsWriteSeconds = (Date.now() - writeStarted) / 1000;

  const memoryFile = join(workDir(), 'soak-gateway-memory.json');
  const gateway = stack.startGateway('gateway-soak', gcHook(memoryFile));
  const url = await gateway.listening('gateway');
  const adminUrl = await gateway.listening('admin').catch(() => undefined);
  say(
    `  written in ${keyRecordsWriteSeconds.toFixed(1)} s; a gateway of its own (pid ${gateway.pid}), ${options.warmupSeconds} s on one key, then ${options.soakMinutes} min at ${rate} req/s over all ${keys.length} keys (key cache max ${cacheMaxEntries})`,
  );
  await openLoop({
    url,
    request: rawGet(url + PATH, stack.headers),
    ratePerSecond: rate,
    durationMs: options.warmupSeconds * 1000,
    connections: options.connections,
  });
  const before = await collectGarbage(gateway, memoryFile);
  say(`  one key cached, after a full GC: JS heap used ${before.heapUsedMiB.toFixed(1)} MiB, RSS ${before.rssMiB.toFixed(0)} MiB`);

  // Each pass over the keys in a new random order: every key once per pass.
  const order = Uint32Array.from(keys, (_, i) => i);
  let sent = 0;
  let firstPassMs = Infinity;
  const startMs = Date.now();
  const request = (i: number) => {
    const at = i % keys.length;
    if (at === 0) shuffle(order);
    if (i === keys.length - 1) firstPassMs = Date.now() - startMs;
    sent = i + 1;
    return rawGet(url + PATH, { authorization: `Bearer ${keys[order[at]!]}` });
  };
  const samples: SoakSample[] = [];
  const sample = async () => {
    const seconds = (Date.now() - startMs) / 1000;
    const requests = sent;
    if (gateway.exitStatus !== null) return;
    const memory = gateway.memory();
    const heap = await heapOf(adminUrl);
    gateway.truncateLog(); // one access line per request: ~300 MB in 10 minutes otherwise
    const s = {
      seconds,
      requests,
      rssMiB: memory.rssKiB / 1024,
      peakRssMiB: memory.peakKiB / 1024,
      heapUsedMiB: heap?.usedMiB,
      heapTotalMiB: heap?.totalMiB,
      warmup: true,
    };
    samples.push(s);
    say(
      `  ${seconds.toFixed(0).padStart(4)} s, ${requests} requests: RSS ${s.rssMiB.toFixed(0)} MiB (peak ${s.peakRssMiB.toFixed(0)}), JS heap used ${s.heapUsedMiB?.toFixed(0) ?? '?'} of ${s.heapTotalMiB?.toFixed(0) ?? '?'} MiB`,
    );
  };
  const load = openLoop({ url, request, ratePerSecond: rate, durationMs, connections: options.connections });
  await sample();
  const timer = setInterval(() => void sample().catch(() => {}), SAMPLE_MS);
  const run = await load;
  clearInterval(timer);
  await sample();
  stack.assertRunning();

  const warmupSeconds = Math.max(firstPassMs, durationMs / 4) / 1000;
  samples.sort((a, b) => a.seconds - b.seconds);
  for (const s of samples) s.warmup = s.seconds < warmupSeconds;
  const judged = samples.filter((s) => !s.warmup);
  if (judged.length === 0)
    say(
      `  no sample after the warmup (${keys.length} keys at ${rate} req/s need ${(keys.length / rate).toFixed(0)} s for one pass): RSS not judged`,
    );
  const rss = judged.length ? flatness(judged.map((s) => s.rssMiB)) : undefined;
  const heaps = judged.flatMap((s) => (s.heapUsedMiB === undefined ? [] : [s.heapUsedMiB]));

  await sleep(1000); // the last answers logged and flushed
  const after = await collectGarbage(gateway, memoryFile);
  const cachedKeys = Math.min(keys.length + 1, cacheMaxEntries) - 1; // + the warmup's key, cached before
  const heapBytesPerKey = ((after.heapUsedMiB - before.heapUsedMiB) * MiB) / cachedKeys;
  await stack.stop(gateway);

  const result: SoakResults = {
    minutes: options.soakMinutes,
    ratePerSecond: rate,
    keys: keys.length,
    cacheMaxEntries,
    keyRecordsWriteSeconds,
    warmupSeconds,
    sampleSeconds: SAMPLE_MS / 1000,
    samples,
    rss,
    heapUsed: heaps.length ? { minMiB: Math.min(...heaps), maxMiB: Math.max(...heaps) } : undefined,
    requests: run.requests,
    requestsPerSecond: (1000 * run.requests) / run.elapsedMs,
    statusCounts: run.statusCounts,
    non2xx: run.non2xx,
    errors: run.errors,
    queued: run.queued,
    latency: latencyStats(run.latency),
    perKey: { cachedKeys, before, after, heapBytesPerKey },
  };
  say(
    `  ${run.requests} requests (${result.requestsPerSecond.toFixed(0)}/s), statuses ${JSON.stringify(run.statusCounts)}, errors ${run.errors}; warmup ${warmupSeconds.toFixed(0)} s`,
  );
  if (rss)
    say(
      `  RSS after warmup: first ${rss.firstMiB.toFixed(0)}, min ${rss.minMiB.toFixed(0)}, mean ${rss.meanMiB.toFixed(0)}, max ${rss.maxMiB.toFixed(0)}, last ${rss.lastMiB.toFixed(0)} MiB: ${rss.flat ? 'flat' : 'NOT flat'} (within ±${(rss.maxDeviation * 100).toFixed(1)}% of the mean)`,
    );
  say(
    `  ${cachedKeys} keys cached, after a full GC: JS heap used ${after.heapUsedMiB.toFixed(1)} MiB (+${(after.heapUsedMiB - before.heapUsedMiB).toFixed(1)}), ${heapBytesPerKey.toFixed(0)} bytes per cached key`,
  );
  return result;
}

/** Node options for the soak's gateway: on SIGUSR2 it collects garbage and writes process.memoryUsage() to `file`. */
function gcHook(file: string): string[] {
  const hook = `import { writeFileSync } from 'node:fs';
process.on('SIGUSR2', () => { gc(); gc(); writeFileSync(${JSON.stringify(file)}, JSON.stringify(process.memoryUsage())); });`;
  return ['--expose-gc', `--import=data:text/javascript,${encodeURIComponent(hook)}`];
}

async function collectGarbage(gateway: NodeProcess, file: string): Promise<AfterGc> {
  rmSync(file, { force: true });
  gateway.child.kill('SIGUSR2');
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    await sleep(100);
    if (!existsSync(file)) continue;
    try {
      const usage = JSON.parse(readFileSync(file, 'utf8')) as NodeJS.MemoryUsage;
      return { heapUsedMiB: usage.heapUsed / MiB, externalMiB: usage.external / MiB, rssMiB: usage.rss / MiB };
    } catch {
      // still being written
    }
  }
  throw new Error(`${gateway.name} wrote no memory figures after SIGUSR2; its log ends:\n${gateway.outputTail()}`);
}

function shuffle(order: Uint32Array): void {
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
}

/** RSS figures after warmup, and whether every sample is within ±SOAK_FLAT_WITHIN of their mean. */
function flatness(values: number[]): NonNullable<SoakResults['rss']> {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const min = Math.min(...values);
  const max = Math.max(...values);
  const maxDeviation = Math.max(max / mean - 1, 1 - min / mean);
  return {
    meanMiB: mean,
    minMiB: min,
    maxMiB: max,
    firstMiB: values[0]!,
    lastMiB: values[values.length - 1]!,
    maxDeviation,
    flat: maxDeviation <= SOAK_FLAT_WITHIN,
  };
}
