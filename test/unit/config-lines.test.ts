import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../src/config/config-error.js';
import { readYamlSource, validated } from '../../src/config/load.js';

// Config mistakes carry the line of their field: every zod issue, each on its own line.

const TEXT = ['top:', '  port: 70000', '  items:', '    - a', '    - 7', '  nested:', '    other: 1', 'flow: { x: 1, y: "two" }', ''].join(
  '\n',
);

const schema = z.strictObject({
  top: z.strictObject({
    port: z.number().max(65535),
    items: z.array(z.string()),
    nested: z.strictObject({ needed: z.number() }),
  }),
  flow: z.strictObject({ x: z.number(), y: z.number() }),
});

function problems(): ConfigError['problems'] {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-lines-'));
  writeFileSync(join(dir, 'f.yaml'), TEXT);
  const { raw, lineOf } = readYamlSource(dir, 'f.yaml');
  try {
    validated('f.yaml', schema, raw, undefined, lineOf);
  } catch (err) {
    return (err as ConfigError).problems;
  }
  throw new Error('accepted');
}

describe('config mistakes with their lines', () => {
  it('reports every issue, with the line of its field, of a list item, of the mapping missing a field, of an unknown key', () => {
    expect(problems().map((p) => `${p.field}@${p.line}`)).toEqual([
      'top.port@2',
      'top.items.1@5',
      'top.nested.needed@6',
      'top.nested@7',
      'flow.y@8',
    ]);
  });

  it('joins them one per line in the message', () => {
    const error = ConfigError.of(problems());
    expect(error.message.split('\n')).toHaveLength(5);
    expect(error.message.split('\n')[0]).toMatch(/^f\.yaml: top\.port: .* \(line 2\)$/);
  });
});
