import { join } from 'node:path';
import { compileValidation } from '../gateway/validation-rules.js';
import { ADMIN_TOKENS_ENV, AdminTokens } from '../admin/admin-tokens.js';
import { startBackend } from '../backend/start-backend.js';
import { assertionVerifier } from '../backend/verify-assertion.js';
import { ConfigError } from '../config/config-error.js';
import { GATEWAY_FILE, loadPlans, PLANS_FILE } from '../config/load.js';
import { plansWithKnownServices } from '../config/plan-services.js';
import { configDirFrom, loadSettings } from '../config/settings.js';
import { loadOpenApiDocument, openApiPath } from '../gateway/openapi-document.js';
import { startGateway } from '../gateway/start-gateway.js';
import {
  assertionSecretsFromEnv,
  DEVELOPMENT_ENV,
  DEVELOPMENT_SECRET,
  logSecretSource,
  SECRET_ENV,
} from '../identity/assertion-secrets.js';
import { createLogger } from '../observability/log.js';
import { CliError } from './cli-error.js';
import { KEYS_USAGE, keysCommand } from './keys-command.js';
import { runUntilSignal } from './run-until-signal.js';
import { upCommand } from './up-command.js';

const USAGE = `tollgate <command>

  up                    backend + gateway in one process (what \`npm start\` runs)
  gateway               the gateway alone (production)
  backend               the category backend alone
  keys <command>        manage API keys in Redis (see \`tollgate keys\`)
  check-config [DIR]    validate the config files and name those read (default: $TOLLGATE_CONFIG_DIR,
                        else ./config when it has a gateway.yaml, else the config shipped with tollgate)

Environment: REDIS_URL (or REDIS_CLUSTER_NODES, REDIS_SENTINELS), GATEWAY_PORT, ADMIN_PORT, BACKEND_PORT, UPSTREAM_URL, TOLLGATE_CONFIG_DIR, LOG_LEVEL,
TOLLGATE_ASSERTION_SECRET (and TOLLGATE_ASSERTION_SECRET_PREVIOUS while rotating; required by \`gateway\` and
\`backend\` unless TOLLGATE_DEV=1 marks a development machine), TOLLGATE_ADMIN_TOKENS (label:token,…: the admin API)`;

const out = (text: string) => process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const env = process.env;
  switch (command) {
    case 'up': {
      const settings = loadSettings(env);
      loadPlans(settings.configDir);
      return upCommand(settings, createLogger(settings.logLevel, 'tollgate', settings.log.format), out);
    }
    case 'gateway': {
      const settings = loadSettings(env);
      loadPlans(settings.configDir);
      const logger = createLogger(settings.logLevel, 'tollgate-gateway', settings.log.format);
      const gateway = await startGateway(settings, logger);
      return runUntilSignal(logger, gateway.close);
    }
    case 'backend': {
      const settings = loadSettings(env);
      const logger = createLogger(settings.logLevel, 'tollgate-backend', settings.log.format);
      // The backend answers only requests carrying a valid gateway assertion (401 otherwise).
      const secrets = assertionSecretsFromEnv(env);
      logSecretSource(secrets, logger, 'backend');
      const verifyRequest = assertionVerifier({ secrets, settings: settings.assertion, logger });
      const backend = await startBackend({ settings, logger, redisUrl: settings.redis, verifyRequest });
      return runUntilSignal(logger, backend.close);
    }
    case 'keys':
      return keysCommand(rest, env, { out });
    case 'check-config': {
      const dir = rest[0] ?? configDirFrom(env);
      const settings = loadSettings({ ...env, TOLLGATE_CONFIG_DIR: dir });
      const plans = plansWithKnownServices(loadPlans(settings.configDir), settings.services);
      AdminTokens.parse(env[ADMIN_TOKENS_ENV]);
      const read = [join(settings.configDir, GATEWAY_FILE), join(settings.configDir, PLANS_FILE)];
      if (settings.openapi.path) {
        loadOpenApiDocument(settings.openapi.file, settings.configDir);
        read.push(openApiPath(settings.openapi.file, settings.configDir));
      }
      compileValidation(settings, settings.services, settings.configDir);
      const secrets = assertionSecretsFromEnv(env, { allowDevelopment: true });
      if (secrets.source === 'development-default') {
        process.stderr.write(
          `tollgate: warning: ${SECRET_ENV} is ${env[SECRET_ENV] === DEVELOPMENT_SECRET ? 'the public development default' : 'unset'}; ` +
            `gateway and backend refuse to start without it unless ${DEVELOPMENT_ENV}=1\n`,
        );
      }
      // Which files were read: with no TOLLGATE_CONFIG_DIR and no ./config the shipped defaults are.
      for (const file of read) out(`read ${file}`);
      out(`config OK: ${settings.configDir} (plans: ${Object.keys(plans.plans).join(', ')})`);
      return;
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      out(`${USAGE}\n\n${KEYS_USAGE}`);
      return;
    default:
      throw new CliError(`unknown command "${command}"\n\n${USAGE}`, 2);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof CliError || err instanceof ConfigError) {
    process.stderr.write(`tollgate: ${err.message}\n`);
    process.exit(err instanceof CliError ? err.exitCode : 1);
  }
  const code = (err as { code?: string }).code;
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    process.stderr.write(`tollgate: ${(err as Error).message}\n`);
    process.exit(2);
  }
  process.stderr.write(`tollgate: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
