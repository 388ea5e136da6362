import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../harness/tollgate.js';

// What ships is what `tollgate` runs (issue 13): the launcher, the compiled product, its config and
// interface; never the benchmark, the tests or their support. The Docker image copies dist/ too.
describe('the npm package', () => {
  const files = (
    JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: REPO_ROOT, encoding: 'utf8' })) as Array<{
      files: Array<{ path: string }>;
    }>
  )[0]!.files.map((f) => f.path);

  it('holds the launcher, the compiled CLI and the shipped config', () => {
    expect(files).toEqual(
      expect.arrayContaining([
        'bin/tollgate.js',
        'dist/cli/main.js',
        // The policy interface (`import { definePolicy } from 'tollgate'`) and its types.
        'dist/index.js',
        'dist/index.d.ts',
        'dist/plugins/policy-definition.d.ts',
        'config/gateway.yaml',
        'config/plans.yaml',
        'openapi.yaml',
        'openapi-admin.yaml',
      ]),
    );
  });

  it('holds no benchmark, test or TypeScript source file', () => {
    // A dist/bench or dist/dev here is stale output of an older tree: remove dist/ and build again.
    // Declarations (.d.ts) in dist/ are the public types, not sources.
    const source = (path: string) => path.endsWith('.ts') && !(path.startsWith('dist/') && path.endsWith('.d.ts'));
    const strays = files.filter((path) => /^(bench|test|src)\//.test(path) || /^dist\/(bench|dev)\//.test(path) || source(path));
    expect(strays).toEqual([]);
  });
});
