import { createRequire } from 'node:module';
import type { Ajv2020, Options } from 'ajv/dist/2020.js';
import type Ajv04Module from 'ajv-draft-04';
import type addFormatsModule from 'ajv-formats';

// Ajv and ajv-formats (close to a hundred CommonJS modules) load on the first schema compiled, not
// when the gateway starts: only a config that validates requests or gives a policy a JSON Schema
// compiles one, and every start paid for loading them. Both are CommonJS, so `require` keeps the
// callers synchronous.
const require = createRequire(import.meta.url);

type Ajv04 = InstanceType<typeof Ajv04Module.default>;

/** A new Ajv for JSON Schema 2020-12 with ajv-formats' formats (uri, email…) checked. */
export function ajv2020WithFormats(options: Options): Ajv2020 {
  const { Ajv2020: Ajv } = require('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js');
  return withFormats(new Ajv(options));
}

/** A new Ajv for JSON Schema draft 4 (OpenAPI 3.0's) with ajv-formats' formats checked. */
export function ajvDraft04WithFormats(options: Options): Ajv04 {
  const Ajv = (require('ajv-draft-04') as typeof Ajv04Module).default;
  return withFormats(new Ajv(options));
}

function withFormats<A extends Ajv2020 | Ajv04>(ajv: A): A {
  (require('ajv-formats') as typeof addFormatsModule).default(ajv);
  return ajv;
}
