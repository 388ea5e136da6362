import { join } from 'node:path';
import { ADMIN_TOKENS_ENV, AdminTokens } from '../admin/admin-tokens.js';
import { GATEWAY_FILE, loadGatewayFile, loadPlans, PLANS_FILE } from '../config/load.js';
import { plansWithKnownServices } from '../config/plan-services.js';
import { configDirFrom, loadSettings } from '../config/settings.js';
import { loadOpenApiDocument, openApiPath } from '../gateway/openapi-document.js';
import { compilePolicies, loadPolicies } from '../gateway/user-policies/load-policies.js';
import { compileValidation } from '../gateway/validation-rules.js';
import { assertionSecretsFromEnv, DEVELOPMENT_ENV, DEVELOPMENT_SECRET, SECRET_ENV } from '../identity/assertion-secrets.js';

/** `tollgate check-config [DIR]`: loads every config file as the gateway would, and names those read. */
export async function checkConfigCommand(rest: string[], env: NodeJS.ProcessEnv, out: (text: string) => void): Promise<void> {
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
  // The user's policies: their code imported, their options checked against their schemas.
  const file = loadGatewayFile(settings.configDir);
  compilePolicies(file, file.services, await loadPolicies(file, settings.configDir));
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
}
