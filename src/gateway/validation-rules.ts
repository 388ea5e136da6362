import { isAbsolute, resolve } from 'node:path';
import { ConfigError, type ConfigProblem } from '../config/config-error.js';
import type { GatewayFile } from '../config/gateway-schema.js';
import { GATEWAY_FILE } from '../config/load.js';
import type { ServiceConfig } from '../config/services-schema.js';
import { OpenApiDocumentError, OpenApiValidator } from '../policies/validate/openapi-validator.js';
import type { ValidationInForce } from './policies/validate-request.js';

/**
 * Every service's `validate` compiled (its OpenAPI document read and its schemas compiled), at
 * start, on each reload of gateway.yaml and by check-config: a document that cannot be used is a
 * ConfigError naming gateway.yaml's field, the document and the JSON pointer in it (one problem
 * per unusable document).
 */
export function compileValidation(file: GatewayFile, services: readonly ServiceConfig[], configDir: string): ValidationInForce {
  const problems: ConfigProblem[] = [];
  const compiled = new Map(
    services.flatMap((service) => {
      if (!service.validate) return [];
      const { openapi, mode, maxBodyBytes } = service.validate;
      const path = isAbsolute(openapi) ? openapi : resolve(configDir, openapi);
      try {
        return [[service.name, { validator: new OpenApiValidator(openapi, path), mode, maxBodyBytes }] as const];
      } catch (err) {
        if (!(err instanceof OpenApiDocumentError)) throw err;
        const index = file.services.findIndex((s) => s.name === service.name);
        problems.push({ file: GATEWAY_FILE, field: `services.${index}.validate.openapi`, reason: err.message });
        return [];
      }
    }),
  );
  if (problems.length > 0) throw ConfigError.of(problems);
  return compiled;
}
