// tollgate in embedded mode (no Redis: key records and quotas in process memory), as `tollgate up`
// runs it, but the gateway alone in front of the benchmark's shared backend, so its CPU figures
// are the gateway's. `tollgate up` seeds random demo keys; this seeds the benchmark's key, given
// in BENCH_API_KEY, with the benchmark's quotas. It runs the compiled gateway of a build:
//   node --import tsx bench/peers/embedded-tollgate.ts <repo-root-of-a-build>
// (UPSTREAM_URL, GATEWAY_PORT, ADMIN_PORT, TOLLGATE_ASSERTION_SECRET in the environment).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

// The modules of the build under test, typed by this checkout's sources.
type Modules = {
  settings: typeof import('../../src/config/settings.js');
  log: typeof import('../../src/observability/log.js');
  format: typeof import('../../src/keys/format.js');
  keyStore: typeof import('../../src/store/memory/memory-key-store.js');
  stores: typeof import('../../src/store/open-stores.js');
  gateway: typeof import('../../src/gateway/start-gateway.js');
  signal: typeof import('../../src/cli/run-until-signal.js');
};

const root = process.argv[2];
const apiKey = process.env.BENCH_API_KEY;
if (!root || !apiKey) {
  process.stderr.write('usage: BENCH_API_KEY=… node --import tsx bench/peers/embedded-tollgate.ts <repo-root>\n');
  process.exit(2);
}
const load = (file: string) => import(pathToFileURL(join(root, 'dist', file)).href);
const m: Modules = {
  settings: await load('config/settings.js'),
  log: await load('observability/log.js'),
  format: await load('keys/format.js'),
  keyStore: await load('store/memory/memory-key-store.js'),
  stores: await load('store/open-stores.js'),
  gateway: await load('gateway/start-gateway.js'),
  signal: await load('cli/run-until-signal.js'),
};

const settings = m.settings.loadSettings({ ...process.env, REDIS_URL: undefined });
const logger = m.log.createLogger(settings.logLevel, 'tollgate-gateway');
const keys = new m.keyStore.MemoryKeyStore();
const id = m.format.parseApiKey(apiKey);
if (!id) throw new Error('BENCH_API_KEY is not a tollgate key');
await keys.create({
  id,
  hash: m.format.hashApiKey(apiKey),
  name: 'bench',
  plan: 'enterprise',
  status: 'active',
  createdAt: new Date().toISOString(),
  perMinute: 100_000_000,
  perDay: 1_000_000_000,
});
const gateway = await m.gateway.startGateway(settings, logger, m.stores.memoryStores(keys));
m.signal.runUntilSignal(logger, gateway.close);
