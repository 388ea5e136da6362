import { startBackend } from '../backend/start-backend.js';
import { assertionVerifier } from '../backend/verify-assertion.js';
import { loadPlans } from '../config/load.js';
import type { Settings } from '../config/settings.js';
import { startGateway } from '../gateway/start-gateway.js';
import { assertionSecretsFromEnv, logSecretSource } from '../identity/assertion-secrets.js';
import { hashApiKey, newApiKey } from '../keys/format.js';
import type { Logger } from '../observability/log.js';
import { MemoryKeyStore } from '../store/memory/memory-key-store.js';
import { memoryStores, openStores } from '../store/open-stores.js';
import { topologyOf } from '../config/redis-target.js';
import { runUntilSignal } from './run-until-signal.js';
import { DAY_MS } from '../quota/windows.js';

/**
 * `tollgate up` (what `npm start` runs): the category backend and the gateway in one process.
 * With no REDIS_URL everything is in memory and one demo key per plan is printed, so a newcomer
 * can curl at once; with REDIS_URL nothing is seeded (create keys with `tollgate keys create`).
 */
export async function upCommand(settings: Settings, logger: Logger, out: (text: string) => void): Promise<void> {
  // Gateway and backend share one process, so unless TOLLGATE_ASSERTION_SECRET is set they share a
  // random secret generated here: nothing outside this process can forge an assertion.
  const secrets = assertionSecretsFromEnv(process.env, { generate: true });
  logSecretSource(secrets, logger, 'up');
  const backendLogger = logger.child({ role: 'backend' });
  const verifyRequest = assertionVerifier({ secrets, settings: settings.assertion, logger: backendLogger });
  const backend = await startBackend({ settings, logger: backendLogger, redisUrl: settings.redis, verifyRequest });
  const gatewaySettings = { ...settings, upstream: { ...settings.upstream, url: backend.url } };

  const demoKeys: Array<{ plan: string; key: string }> = [];
  let stores;
  if (topologyOf(settings.redis) === 'none') {
    const keys = new MemoryKeyStore();
    for (const plan of Object.keys(loadPlans(settings.configDir).plans)) {
      const { id, key } = newApiKey();
      // One demo owner: under a `scope: owner` plan the demo keys share its windows.
      await keys.create({
        id,
        hash: hashApiKey(key),
        name: `demo ${plan}`,
        plan,
        status: 'active',
        createdAt: new Date().toISOString(),
        owner: 'demo',
      });
      demoKeys.push({ plan, key });
    }
    stores = memoryStores(keys, settings.admin.auditMaxEntries, settings.quota.usage.retentionDays * DAY_MS);
  } else {
    stores = await openStores(
      settings.redis,
      settings.redis.commandTimeoutMs,
      logger,
      settings.admin.auditMaxEntries,
      undefined,
      settings.quota.usage.retentionDays * DAY_MS,
    );
  }
  const gateway = await startGateway(gatewaySettings, logger.child({ role: 'gateway' }), stores, secrets);

  const lines = [
    '',
    `tollgate is up: gateway ${gateway.url}/v1  (backend ${backend.url}, admin ${gateway.adminUrl})`,
    `Config: ${settings.configDir}`,
  ];
  if (demoKeys.length) {
    lines.push('Embedded in-memory store (no REDIS_URL): demo keys, valid until this process stops:');
    for (const { plan, key } of demoKeys) lines.push(`  ${plan.padEnd(12)} ${key}`);
    lines.push('', 'Try:', `  curl -i -H "Authorization: Bearer ${demoKeys[0]!.key}" ${gateway.url}/v1/categories`);
  } else {
    lines.push('Using Redis; create a key with: npx tollgate keys create --plan free');
  }
  out(lines.join('\n') + '\n');

  runUntilSignal(logger, async () => {
    await gateway.close();
    await backend.close();
  });
}
