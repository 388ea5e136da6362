import { assertionVerifier } from '../backend/verify-assertion.js';
import { startBackend } from '../backend/start-backend.js';
import { loadSettings } from '../config/settings.js';
import { assertionSecretsFromEnv, logSecretSource } from '../identity/assertion-secrets.js';
import { createLogger } from '../observability/log.js';
import { runUntilSignal } from './run-until-signal.js';

// Apart from serve-commands.ts, so that starting the backend alone loads none of the gateway's
// modules (its policies, proxy, upstream pools and their libraries).

/** `tollgate backend`: the category backend alone, until SIGTERM or SIGINT. */
export async function backendCommand(env: NodeJS.ProcessEnv): Promise<void> {
  const settings = loadSettings(env);
  const logger = createLogger(settings.logLevel, 'tollgate-backend', settings.log.format);
  // The backend answers only requests carrying a valid gateway assertion (401 otherwise).
  const secrets = assertionSecretsFromEnv(env);
  logSecretSource(secrets, logger, 'backend');
  const verifyRequest = assertionVerifier({ secrets, settings: settings.assertion, logger });
  const backend = await startBackend({ settings, logger, redisUrl: settings.redis, verifyRequest });
  return runUntilSignal(logger, backend.close);
}
