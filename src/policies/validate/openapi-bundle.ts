import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { asFragment, atPointer, escapePointer } from './json-pointer.js';
import { OpenApiDocumentError } from './openapi-document-error.js';

/**
 * An OpenAPI document read with its `$ref`s into other files brought in, as one document (what
 * json-schema-ref-parser's `bundle` makes, done synchronously so that a reload stays one step):
 * the first reference to a part of another file is replaced by a copy of that part, read
 * relative to the file that holds the reference; every later reference to the same part, a
 * recursive one included, becomes a local `#/…` reference to that copy. References inside the
 * main document to itself stay as they are. Only files: a reference over the network is refused,
 * since a gateway should not fetch its rules from elsewhere at start.
 *
 * JSON pointers in later errors point into this bundled document (a part of another file at the
 * place it is first referenced).
 */
export function bundleDocument(file: string, path: string): Record<string, unknown> {
  const root = resolve(path);
  const files = new Map<string, unknown>();
  const placed = new Map<string, string>();
  const name = (abs: string) => relative(dirname(root), abs) || file;

  const load = (abs: string, at: string, from: string): unknown => {
    if (files.has(abs)) return files.get(abs);
    let parsed: unknown;
    try {
      parsed = parseYaml(readFileSync(abs, 'utf8'));
    } catch (err) {
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message.split('\n')[0];
      if (abs === root) throw new OpenApiDocumentError(file, '', `cannot load ${path}: ${reason}`);
      throw new OpenApiDocumentError(file, at, `${inFile(from)}cannot load ${name(abs)}: ${reason}`);
    }
    files.set(abs, parsed);
    return parsed;
  };
  const inFile = (from: string) => (from === root ? '' : `in ${name(from)}: `);

  const walk = (node: unknown, base: string, pointer: string): unknown => {
    if (Array.isArray(node)) return node.map((item, i) => walk(item, base, `${pointer}/${i}`));
    if (!node || typeof node !== 'object') return node;
    const object = node as Record<string, unknown>;
    const ref = object.$ref;
    if (typeof ref === 'string' && !(base === root && ref.startsWith('#'))) {
      const at = `${pointer}/$ref`;
      const hash = ref.indexOf('#');
      const target = hash < 0 ? ref : ref.slice(0, hash);
      const fragment = hash < 0 ? '' : ref.slice(hash + 1);
      let abs = base;
      if (target.startsWith('file:')) abs = fileURLToPath(target);
      else if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(target))
        throw new OpenApiDocumentError(file, at, `${inFile(base)}only references to files are followed, not "${ref}"`);
      else if (target !== '') abs = resolve(dirname(base), decodeURIComponent(target));
      if (abs === root) return { ...object, $ref: `#${fragment}` };
      const key = `${abs}#${fragment}`;
      const home = placed.get(key);
      if (home !== undefined) return { ...object, $ref: asFragment(home) };
      const value = atPointer(load(abs, at, base), fragment);
      if (value === undefined) throw new OpenApiDocumentError(file, at, `${inFile(base)}"${ref}" points to nothing`);
      placed.set(key, pointer);
      const { $ref: _ref, ...siblings } = object;
      const copy = structuredClone(value);
      // Keywords beside the $ref (a 3.1 schema's description) stay; the referenced part's win.
      const merged = copy && typeof copy === 'object' && !Array.isArray(copy) ? { ...siblings, ...copy } : copy;
      return walk(merged, abs, pointer);
    }
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(object)) out[key] = walk(value, base, `${pointer}/${escapePointer(key)}`);
    return out;
  };

  const doc = load(root, '', root);
  if (!doc || typeof doc !== 'object' || Array.isArray(doc))
    throw new OpenApiDocumentError(file, '', 'is not an OpenAPI document (not a mapping)');
  return walk(doc, root, '') as Record<string, unknown>;
}
