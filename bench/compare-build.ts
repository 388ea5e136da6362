// `--compare REF`: tollgate built from another commit, to run in the same rounds as this checkout.
// The commit's tree is exported with `git archive` (no worktree is added to the repository), its
// dependencies installed with `npm ci` and compiled with `npm run build`, in a directory named by
// the commit, so a second run against the same commit reuses the build.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../test/harness/tollgate.js';

export interface Build {
  /** What the report calls it: tollgate@REF. */
  name: string;
  commit: string;
  root: string;
  cli: string;
}

const git = (args: string[]) => execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8' }).trim();

export function buildRef(ref: string, say: (text: string) => void): Build {
  const commit = git(['rev-parse', '--verify', `${ref}^{commit}`]);
  const root = join(tmpdir(), 'tollgate-bench-builds', commit);
  const cli = join(root, 'dist/cli/main.js');
  const done = join(root, '.built');
  const build = { name: `tollgate@${ref}`, commit, root, cli };
  if (existsSync(done)) {
    say(`--compare ${ref}: reusing the build of ${commit.slice(0, 10)} in ${root}`);
    return build;
  }
  say(`--compare ${ref}: building ${commit.slice(0, 10)} in ${root} (git archive, npm ci, npm run build)`);
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  execFileSync('sh', ['-c', `git archive --format=tar ${commit} | tar -x -C "${root}"`], { cwd: REPO_ROOT, stdio: 'inherit' });
  const npm = (args: string[]) => execFileSync('npm', args, { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  npm(['ci', '--no-audit', '--no-fund']);
  npm(['run', 'build']);
  if (!existsSync(cli)) throw new Error(`--compare ${ref}: the build has no ${cli}`);
  writeFileSync(done, `${commit}\n`);
  return build;
}
