// `npm run bench`: tollgate with its full default policy, in Redis and embedded mode, against a
// bare http-proxy-3 (the ceiling of our proxy stack) and two peer gateways users could pick
// instead (bench/peers/), on the same upstream, in one run on this machine, so every figure is a
// ratio that holds on any machine. The throughput phase runs every target in front of a plain Node
// upstream with defaults as well as the bundled backend, under wrk (bench/wrk.ts; `apt-get install
// wrk`). `--compare REF` adds tollgate built from another commit. `npm run bench -- --help` lists
// the options.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { buildRef } from './compare-build.js';
import { requireH2load } from './h2load.js';
import { HELP, parseOptions } from './options.js';
import { say } from './phases/common.js';
import { exactnessPhase } from './phases/exactness.js';
import { latencyPhase } from './phases/latency.js';
import { memoryPhase } from './phases/memory.js';
import { overLimitPhase } from './phases/over-limit.js';
import { profilePhase } from './phases/profile.js';
import { soakPhase } from './phases/soak.js';
import { throughputPhase } from './phases/throughput.js';
import { removeWorkDir, workDir } from './processes.js';
import { requireWrk } from './wrk.js';
import { checkPostTarget, POST_TARGETS, type PostTarget } from './post-targets.js';
import { markdownReport, textReport, type BenchResults } from './report.js';
import { Stack } from './stack.js';
import { tlsGet, type Transport } from './transports.js';

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  if (options === 'help') {
    say(HELP);
    return;
  }
  // Before anything starts: the throughput phase cannot run without wrk.
  if (options.phases.has('throughput')) requireWrk();
  if (options.phases.has('throughput') && options.transports.includes('h2')) requireH2load();
  const started = Date.now();
  const machine = { cpus: cpus().length, model: cpus()[0]?.model ?? 'unknown', node: process.version, loadAverageAtStart: loadavg() };
  say(
    `tollgate bench: ${machine.cpus} CPUs (${machine.model}), Node ${machine.node}, load average ${machine.loadAverageAtStart.map((x) => x.toFixed(2)).join(' ')}`,
  );
  if (machine.loadAverageAtStart[0]! > machine.cpus) {
    say(
      `  note: the machine is already busy (load ${machine.loadAverageAtStart[0]!.toFixed(1)} on ${machine.cpus} CPUs): absolute figures will be low and noisy; ratios less so`,
    );
  }

  for (const ref of options.compare) {
    const build = buildRef(ref, say);
    options.variants.push({ name: build.name, cli: build.cli });
  }

  const stack = await Stack.start(options).catch((err: unknown) => {
    removeWorkDir();
    throw err;
  });
  try {
    for (const upstream of stack.upstreams()) {
      const targets = stack.targetsFor(upstream.name);
      say(`${upstream.name} upstream ${upstream.url}: ${targets.map((t) => `${t.name} ${t.url}`).join(', ')}`);
      const tls = stack.tlsTargetsFor(upstream.name);
      if (tls.length) say(`${upstream.name} upstream, TLS and HTTP/2: ${tls.map((t) => `${t.name} ${t.url}`).join(', ')}`);
    }
    say(`redis ${stack.redis.url}; scratch ${workDir()}`);
    await sanityCheck(stack);
    await tlsSanityCheck(stack, options.transports);
    const results: BenchResults = {
      date: new Date().toISOString(),
      machine,
      options: { ...options, phases: [...options.phases] },
      durationSeconds: 0,
    };
    if (options.phases.has('throughput')) results.throughput = await throughputPhase(stack, options);
    stack.assertRunning();
    if (options.phases.has('latency'))
      results.latency = await latencyPhase(stack, options, results.throughput?.sides.find((s) => s.name === 'tollgate')?.requestsPerSecond);
    stack.assertRunning();
    if (options.phases.has('overlimit')) results.overLimit = await overLimitPhase(stack, options);
    stack.assertRunning();
    if (options.phases.has('memory')) results.memory = await memoryPhase(stack, options);
    stack.assertRunning();
    if (options.phases.has('profile')) results.profile = await profilePhase(stack, options);
    stack.assertRunning();
    if (options.phases.has('soak')) results.soak = await soakPhase(stack, options);
    stack.assertRunning();
    if (options.phases.has('exactness')) results.exactness = await exactnessPhase(stack, options);

    for (const upstream of stack.upstreams()) {
      for (const target of stack.targetsFor(upstream.name)) {
        const problems = target.process.problems();
        if (problems.length > 0)
          say(`\n${target.name} (→ ${upstream.name}) warnings and errors (since the last phase):\n${problems.slice(0, 10).join('\n')}`);
      }
    }

    results.machine.loadAverageAtEnd = loadavg();
    results.durationSeconds = (Date.now() - started) / 1000;
    mkdirSync(options.outDir, { recursive: true });
    writeFileSync(join(options.outDir, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
    const markdown = markdownReport(results);
    writeFileSync(join(options.outDir, 'latest.md'), markdown);
    say(`\n${textReport(results)}`);
    say(`\n${markdown}`);
    say(`results: ${join(options.outDir, 'latest.json')} and latest.md; ${results.durationSeconds.toFixed(0)} s in all`);
  } finally {
    await stack.close();
    removeWorkDir();
  }
}

/** Every proxy answers 200 through to the backend, and each tollgate's answer carries its policy's headers. */
async function sanityCheck(stack: Stack): Promise<void> {
  for (const target of stack.upstreams().flatMap((u) => stack.targetsFor(u.name))) {
    const res = await fetch(`${target.url}/v1/categories`, { headers: stack.headersOf(target) });
    const body = await res.text();
    if (res.status !== 200) throw new Error(`${target.name} (→ ${target.upstream}) answered ${res.status}: ${body.slice(0, 300)}`);
    if (target.kind === 'tollgate' && (!res.headers.get('x-ratelimit-limit') || !res.headers.get('x-request-id'))) {
      throw new Error(`${target.name} answered without its rate-limit and request-id headers`);
    }
    if (target.name in POST_TARGETS)
      await checkPostTarget(target.name as PostTarget, `${target.url}/v1/categories`, stack.headersOf(target));
  }
}

/** Every TLS twin answers 200 over each TLS transport of the run, trusting only the run's certificate. */
async function tlsSanityCheck(stack: Stack, transports: Transport[]): Promise<void> {
  if (!stack.certificate) return;
  for (const target of stack.upstreams().flatMap((u) => stack.tlsTargetsFor(u.name))) {
    for (const transport of transports) {
      if (transport === 'http') continue;
      const res = await tlsGet(`${target.url}/v1/categories`, stack.headers, stack.certificate.pem, transport);
      if (res.status !== 200)
        throw new Error(`${target.name} over ${transport} (→ ${target.upstream}) answered ${res.status}: ${res.body.slice(0, 300)}`);
      if (target.kind === 'tollgate' && !res.headers['x-ratelimit-limit'])
        throw new Error(`${target.name} over ${transport} answered without its rate-limit headers`);
    }
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
