// Build step (npm run build): openapi.yaml as JSON in dist/openapi.json, with the SHA-256 of the
// text it came from. Parsing the 54 KB YAML took ~100 ms of every gateway start; the gateway reads
// this JSON instead while the hash still matches openapi.yaml (src/gateway/openapi-document.ts).
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { parse } from 'yaml';

const root = new URL('../', import.meta.url);
const text = readFileSync(new URL('openapi.yaml', root), 'utf8');
const sha256 = createHash('sha256').update(text).digest('hex');
mkdirSync(new URL('dist/', root), { recursive: true });
writeFileSync(new URL('dist/openapi.json', root), JSON.stringify({ sha256, document: parse(text) }));
