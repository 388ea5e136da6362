import { copyFileSync, cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONFIG_DIR, REPO_ROOT } from '../test/harness/tollgate.js';
import { workDir } from './processes.js';

export type ConfigEdits = Record<string, (yaml: string) => string>;

/**
 * A copy of the shipped config/ in the run's scratch directory, named `name`, with one edit per
 * file; throws if an edit changes nothing (the shipped file no longer has the line it edits), so a
 * target never silently measures the shipped config instead of its own. `from`: another build's
 * config/ (its schema may differ from this checkout's).
 */
export function editedConfig(name: string, edits: ConfigEdits, from = CONFIG_DIR): string {
  const dir = join(workDir(), `config-${name}`);
  cpSync(from, dir, { recursive: true });
  for (const [file, edit] of Object.entries(edits)) {
    const before = readFileSync(join(dir, file), 'utf8');
    const after = edit(before);
    if (after === before) throw new Error(`${name}: the shipped ${file} has no line to edit`);
    writeFileSync(join(dir, file), after);
  }
  return dir;
}

/** An edit replacing the line `pattern` matches; throws if none does (even when another edit of the same file changes it). */
export const replaceLine =
  (pattern: RegExp, line: string) =>
  (yaml: string): string => {
    if (!pattern.test(yaml)) throw new Error(`the shipped config has no line matching ${pattern}`);
    return yaml.replace(pattern, line);
  };

/** gateway.yaml's `services: []` replaced by one service, given as its YAML lines (the first `- name: …`). */
export const withService =
  (lines: string[]) =>
  (yaml: string): string =>
    yaml.replace(/^services: \[\].*$/m, ['services:', ...lines.map((line, i) => `${i === 0 ? '  - ' : '    '}${line}`)].join('\n'));

/** The repository's openapi.yaml copied beside a config's gateway.yaml (`validate: { openapi: openapi.yaml }`). */
export function copyOpenApi(dir: string): void {
  copyFileSync(join(REPO_ROOT, 'openapi.yaml'), join(dir, 'openapi.yaml'));
}
