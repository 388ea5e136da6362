#!/usr/bin/env node
// Thin launcher: the CLI is compiled TypeScript in dist/ (built by `npm install` via `prepare`,
// and again by `npm start`/`npm test`).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(main))) {
  process.stderr.write('tollgate: dist/ is missing; run `npm run build` first\n');
  process.exit(1);
}
await import(main.href);
