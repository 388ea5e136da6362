import { loadPlans } from '../config/load.js';
import { configDirFrom, loadSettings, type Settings } from '../config/settings.js';
import { ConfigCheck } from '../config/config-check.js';
import { startGateway } from '../gateway/start-gateway.js';
import { createLogger } from '../observability/log.js';
import { runUntilSignal } from './run-until-signal.js';
import { upCommand } from './up-command.js';

type Env = NodeJS.ProcessEnv;

/** gateway.yaml and the environment, once plans.yaml is known to load too; the mistakes of both at once. */
function checkedSettings(env: Env): Settings {
  const check = new ConfigCheck(configDirFrom(env));
  const settings = check.attempt(() => loadSettings(env));
  check.attempt(() => loadPlans(configDirFrom(env)));
  check.done();
  return settings!;
}

/** `tollgate up`: backend and gateway in one process (what `npm start` runs). */
export function upFromEnv(env: Env, out: (text: string) => void): Promise<void> {
  const settings = checkedSettings(env);
  return upCommand(settings, createLogger(settings.logLevel, 'tollgate', settings.log.format), out);
}

/** `tollgate gateway`: the gateway alone, until SIGTERM or SIGINT. */
export async function gatewayCommand(env: Env): Promise<void> {
  const settings = checkedSettings(env);
  const logger = createLogger(settings.logLevel, 'tollgate-gateway', settings.log.format);
  const gateway = await startGateway(settings, logger);
  return runUntilSignal(logger, gateway.close);
}
