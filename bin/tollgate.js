#!/usr/bin/env node
// Thin launcher: the CLI is compiled TypeScript in dist/ (built by `npm run build`, `npm start`,
// `npm test`, and by `prepack` into the npm package: installing the package runs no script).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(main))) {
  process.stderr.write('tollgate: dist/ is missing; run `npm run build` first\n');
  process.exit(1);
}
await import(main.href);
