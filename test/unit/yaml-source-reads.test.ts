import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readYamlSource } from '../../src/config/load.js';

// A config file read again with the same text is not parsed again (src/config/load.ts): what the
// callers get must still be what a fresh parse gives, and an edit must be seen on the next read.

describe('reading a config file again', () => {
  it('gives each caller its own copy, and sees an edit on the next read, with its lines', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-yaml-reads-'));
    const file = join(dir, 'f.yaml');
    writeFileSync(file, 'plans:\n  free: { perMinute: 60 }\n');
    const first = readYamlSource(dir, 'f.yaml');
    (first.raw.plans as { free: { perMinute: number } }).free.perMinute = 1;
    expect(readYamlSource(dir, 'f.yaml').raw).toEqual({ plans: { free: { perMinute: 60 } } });

    // Same length as before: an edit is told by the text, never by size or time.
    writeFileSync(file, 'plans:\n  free: { perMinute: 90 }\n');
    expect(readYamlSource(dir, 'f.yaml').raw).toEqual({ plans: { free: { perMinute: 90 } } });

    writeFileSync(file, '# a comment\nplans:\n  pro: { perMinute: 300 }\n');
    const edited = readYamlSource(dir, 'f.yaml');
    expect(edited.raw).toEqual({ plans: { pro: { perMinute: 300 } } });
    expect(edited.lineOf(['plans', 'pro'])).toBe(3);
  });
});
