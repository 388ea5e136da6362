import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { configDirFrom, SHIPPED_CONFIG_DIR } from '../../src/config/config-dir.js';

// Where the config is read from: TOLLGATE_CONFIG_DIR, else ./config when it holds a gateway.yaml,
// else the config/ shipped with tollgate (so an installed package runs in an empty folder).

const scratch: string[] = [];
const folder = () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-config-dir-'));
  scratch.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('configDirFrom', () => {
  it('is the shipped config/ beside dist/ and src/', () => {
    expect(SHIPPED_CONFIG_DIR).toBe(fileURLToPath(new URL('../../config', import.meta.url)));
  });

  it('falls back to the shipped config in a folder without one', () => {
    expect(configDirFrom({}, folder())).toBe(SHIPPED_CONFIG_DIR);
  });

  it('ignores a ./config that holds no gateway.yaml (some other tool’s folder)', () => {
    const cwd = folder();
    mkdirSync(join(cwd, 'config'));
    writeFileSync(join(cwd, 'config', 'default.json'), '{}');
    expect(configDirFrom({}, cwd)).toBe(SHIPPED_CONFIG_DIR);
  });

  it('takes ./config when it holds a gateway.yaml', () => {
    const cwd = folder();
    mkdirSync(join(cwd, 'config'));
    writeFileSync(join(cwd, 'config', 'gateway.yaml'), '');
    expect(configDirFrom({}, cwd)).toBe(join(cwd, 'config'));
  });

  it('takes TOLLGATE_CONFIG_DIR over both, relative to the working directory', () => {
    const cwd = folder();
    mkdirSync(join(cwd, 'config'));
    writeFileSync(join(cwd, 'config', 'gateway.yaml'), '');
    expect(configDirFrom({ TOLLGATE_CONFIG_DIR: 'elsewhere' }, cwd)).toBe(join(cwd, 'elsewhere'));
    expect(configDirFrom({ TOLLGATE_CONFIG_DIR: '/etc/tollgate' }, cwd)).toBe('/etc/tollgate');
  });

  it('treats an empty TOLLGATE_CONFIG_DIR as unset', () => {
    expect(configDirFrom({ TOLLGATE_CONFIG_DIR: '' }, folder())).toBe(SHIPPED_CONFIG_DIR);
  });
});
