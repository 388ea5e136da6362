import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Site } from './site.js';
import { until, type InteropUpstream } from './upstream.js';

const SCRIPT = fileURLToPath(new URL('../../fixtures/interop/http10_server.py', import.meta.url));

/** Debian's python3, if installed (.ci/run installs it when missing). */
export function python3Binary(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v python3'], { encoding: 'utf8' }).stdout.trim();
  return found || undefined;
}

/**
 * test/fixtures/interop/http10_server.py: Python's http.server speaking HTTP/1.0 and closing after
 * every response. It prints a line per accepted connection and per request, which are the counts.
 */
export async function startPython(binary: string, site: Site): Promise<InteropUpstream> {
  const child = spawn(binary, ['-u', SCRIPT, site.files], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const errors: string[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
  child.stderr.on('data', (d: Buffer) => errors.push(d.toString()));
  const listening = () => lines.map((line) => /^listening (\d+)$/.exec(line)?.[1]).find(Boolean);
  if (!(await until(() => listening() !== undefined || child.exitCode !== null)) || !listening()) {
    child.kill('SIGKILL');
    throw new Error(`${SCRIPT} did not start: ${errors.join('')}`);
  }
  const count = (prefix: string) => lines.filter((line) => line.startsWith(prefix)).length;
  return {
    url: `http://127.0.0.1:${listening()}`,
    counts: () => Promise.resolve({ connections: count('connection '), requests: count('request ') }),
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
