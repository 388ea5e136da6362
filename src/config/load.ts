import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LineCounter, parseDocument, type Document } from 'yaml';
import type { z } from 'zod';
import { ConfigError, type ConfigProblem } from './config-error.js';
import { lineLocator, type LineOf } from './config-lines.js';
import { gatewayFileSchema, type GatewayFile } from './gateway-schema.js';
import { plansFileSchema, type PlansConfig } from './plans-schema.js';

export const PLANS_FILE = 'plans.yaml';
export const GATEWAY_FILE = 'gateway.yaml';

/** One config file's content (a YAML mapping) and where each field is in it. */
export interface YamlSource {
  raw: Record<string, unknown>;
  lineOf: LineOf;
}

/** One config file's content and lines; unreadable or malformed files are ConfigErrors (every YAML error, with its line). */
export function readYamlSource(dir: string, file: string): YamlSource {
  const path = join(dir, file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(file, '', `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  const { doc, counter } = parsedYaml(path, text);
  if (doc.errors.length > 0)
    throw ConfigError.of(
      doc.errors.map((err) => ({
        file,
        field: '',
        reason: `not valid YAML: ${err.message
          .split('\n')[0]!
          .replace(/ at line \d+, column \d+:?$/, '')
          .replace(/:$/, '')}`,
        line: err.linePos?.[0].line,
      })),
    );
  const raw: unknown = doc.toJS() ?? {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new ConfigError(file, '(top level)', 'must be a mapping of fields');
  return { raw: raw as Record<string, unknown>, lineOf: lineLocator(doc, counter) };
}

/**
 * The last parse of each file, by path, with the text it came from. A start reads gateway.yaml four
 * times and plans.yaml twice (the CLI's check, the gateway, each file's reloader): the same text is
 * parsed once (tens of milliseconds of CPU each time). Keyed by the whole text, not the file's time
 * or size, so any change to the file is parsed afresh; callers get a new `toJS()` copy every time.
 */
const parsed = new Map<string, { text: string; doc: Document; counter: LineCounter }>();

function parsedYaml(path: string, text: string): { doc: Document; counter: LineCounter } {
  const known = parsed.get(path);
  if (known?.text === text) return known;
  const counter = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: true, lineCounter: counter });
  parsed.set(path, { text, doc, counter });
  return { doc, counter };
}

/**
 * Validates raw config with its schema, frozen. Every issue becomes one problem of a ConfigError
 * naming the file, the field and (with `lineOf`) its line, unless `blame` attributes that field to
 * another source (an environment variable).
 */
export function validated<S extends z.ZodType>(
  file: string,
  schema: S,
  raw: unknown,
  blame?: (path: readonly PropertyKey[], reason: string) => ConfigError | undefined,
  lineOf?: LineOf,
): Readonly<z.output<S>> {
  const result = schema.safeParse(raw);
  if (!result.success) {
    const problems: ConfigProblem[] = result.error.issues.flatMap((issue) => {
      // zod reports a bad record key (a plan name) as invalid_key with the useful reason nested.
      const reason = (issue.code === 'invalid_key' ? issue.issues[0]?.message : undefined) ?? issue.message;
      const blamed = blame?.(issue.path, reason);
      if (blamed) return blamed.problems;
      // An unknown field is on its own line, not its mapping's.
      const at = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]!] : issue.path;
      return [{ file, field: issue.path.map(String).join('.') || '(top level)', reason, line: lineOf?.(at) }];
    });
    throw ConfigError.of(problems);
  }
  return deepFreeze(result.data);
}

export function loadPlans(dir: string): PlansConfig {
  const { raw, lineOf } = readYamlSource(dir, PLANS_FILE);
  return validated(PLANS_FILE, plansFileSchema, raw, undefined, lineOf);
}

export function loadGatewayFile(dir: string): GatewayFile {
  const { raw, lineOf } = readYamlSource(dir, GATEWAY_FILE);
  return validated(GATEWAY_FILE, gatewayFileSchema, raw, undefined, lineOf);
}

/**
 * `err` with the line of each of its problems that names a field of a config file in `dir` but no
 * line yet (the checks made after the schema: plan-services.ts, compiled policies), read from the
 * file now; anything else as it is.
 */
export function withLines(err: unknown, dir: string): unknown {
  if (!(err instanceof ConfigError) || err.problems.every((p) => p.line !== undefined || !p.field)) return err;
  const sources = new Map<string, LineOf | undefined>();
  const lineOf = (file: string) => {
    if (!sources.has(file)) {
      let source: LineOf | undefined;
      try {
        source = [GATEWAY_FILE, PLANS_FILE].includes(file) ? readYamlSource(dir, file).lineOf : undefined;
      } catch {
        source = undefined;
      }
      sources.set(file, source);
    }
    return sources.get(file);
  };
  return ConfigError.of(
    err.problems.map((p) => (p.line !== undefined || !p.field ? p : { ...p, line: lineOf(p.file)?.(p.field.split('.')) })),
  );
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
