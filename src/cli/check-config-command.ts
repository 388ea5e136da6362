import { join } from 'node:path';
import { AdminTokens } from '../admin/admin-tokens.js';
import { ConfigCheck } from '../config/config-check.js';
import { GATEWAY_FILE, loadGatewayFile, loadPlans, PLANS_FILE } from '../config/load.js';
import { plansWithKnownServices } from '../config/plan-services.js';
import { anonymousPlansDefined } from '../config/anonymous-plans.js';
import { configDirFrom, loadSettings } from '../config/settings.js';
import { loadOpenApiDocument, openApiPath } from '../gateway/openapi-document.js';
import { compilePolicies, loadPolicies } from '../gateway/user-policies/load-policies.js';
import { compileValidation } from '../gateway/validation-rules.js';
import { assertionSecretsFromEnv, DEVELOPMENT_ENV, DEVELOPMENT_SECRET, SECRET_ENV } from '../identity/assertion-secrets.js';

/**
 * `tollgate check-config [DIR]`: loads every config file as the gateway would, and names those
 * read. Each file is checked even when another has mistakes, and every mistake is reported, each
 * with its file, field and line.
 */
export async function checkConfigCommand(rest: string[], env: NodeJS.ProcessEnv, out: (text: string) => void): Promise<void> {
  const configDir = configDirFrom({ ...env, TOLLGATE_CONFIG_DIR: rest[0] ?? configDirFrom(env) });
  const check = new ConfigCheck(configDir);
  const settings = check.attempt(() => loadSettings({ ...env, TOLLGATE_CONFIG_DIR: configDir }));
  const loaded = check.attempt(() => loadPlans(configDir));
  const plans = settings && loaded && check.attempt(() => plansWithKnownServices(loaded, settings.services));
  if (settings && plans) check.attempt(() => anonymousPlansDefined(plans, settings.services, settings.routes.access));
  check.attempt(() => AdminTokens.fromEnvironment(env));
  const read = [join(configDir, GATEWAY_FILE), join(configDir, PLANS_FILE)];
  if (settings?.openapi.path) {
    check.attempt(() => loadOpenApiDocument(settings.openapi.file, configDir));
    read.push(openApiPath(settings.openapi.file, configDir));
  }
  if (settings) check.attempt(() => compileValidation(settings, settings.services, configDir));
  // The user's policies: their code imported, their options checked against their schemas.
  const file = settings && check.attempt(() => loadGatewayFile(configDir));
  if (file) {
    const loaded = await loadPolicies(file, configDir);
    check.attempt(() => compilePolicies(file, file.services, loaded));
  }
  check.done();
  const secrets = assertionSecretsFromEnv(env, { allowDevelopment: true });
  if (secrets.source === 'development-default') {
    process.stderr.write(
      `tollgate: warning: ${SECRET_ENV} is ${env[SECRET_ENV] === DEVELOPMENT_SECRET ? 'the public development default' : 'unset'}; ` +
        `gateway and backend refuse to start without it unless ${DEVELOPMENT_ENV}=1\n`,
    );
  }
  // Which files were read: with no TOLLGATE_CONFIG_DIR and no ./config the shipped defaults are.
  for (const file of read) out(`read ${file}`);
  out(`config OK: ${configDir} (plans: ${Object.keys(plans!.plans).join(', ')})`);
}
