import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './ports.js';
import { commandPath } from './needs-tool.js';

export const NGINX_CONF = fileURLToPath(new URL('../../config/nginx.conf', import.meta.url));

/** Debian's nginx, if installed (`apt-get install nginx`; .ci/run does). */
export function nginxBinary(): string | undefined {
  const onPath = commandPath('nginx');
  if (onPath) return onPath;
  return ['/usr/sbin/nginx', '/usr/local/sbin/nginx'].find((p) => existsSync(p));
}

/**
 * config/nginx.conf as shipped, with only what a test must change rewritten: the upstream servers
 * (the gateways' real addresses), the listen port (loopback, free), the pid and temp paths (a
 * temporary directory), `daemon off`, and the user (the current one). Every other directive
 * (keep-alive, headers, timeouts, retries) is the shipped one.
 */
export function nginxConfigFor(opts: { listenPort: number; gateways: string[]; dir: string; retries?: boolean }): string {
  const shipped = readFileSync(NGINX_CONF, 'utf8');
  const servers = opts.gateways.map((address) => `        server ${address} max_fails=2 fail_timeout=5s;`).join('\n');
  let text = shipped;
  const replace = (pattern: RegExp, by: string) => {
    if (!pattern.test(text)) throw new Error(`config/nginx.conf no longer matches ${pattern}: update test/helpers/nginx.ts`);
    text = text.replace(pattern, by);
  };
  // The gateway lines of the upstream block, replaced as one group.
  replace(/(?:^[ \t]*server gateway-\d+:8080[^\n]*\n)+/m, `${servers}\n`);
  replace(/^([ \t]*)listen 8080\b/m, `$1listen 127.0.0.1:${opts.listenPort}`);
  replace(/^pid [^;]+;/m, `pid ${join(opts.dir, 'nginx.pid')};`);
  replace(/\/tmp\/nginx-/g, `${opts.dir}/`);
  replace(/access_log \/dev\/stdout/, `access_log ${join(opts.dir, 'access.log')}`);
  // No retry on another replica: a balancer such as kube-proxy, which cannot hide a replica that
  // refuses or drops a connection.
  if (opts.retries === false) replace(/proxy_next_upstream error;/, 'proxy_next_upstream off;');
  const user = process.getuid?.() === 0 ? `user ${userInfo().username};\n` : '';
  return `daemon off;\n${user}${text}`;
}

/** Writes the derived config and runs `nginx -t` on it. */
export function checkNginxConfig(binary: string, config: string, dir: string): { code: number | null; output: string } {
  const file = join(dir, 'nginx.conf');
  writeFileSync(file, config);
  const result = spawnSync(binary, ['-t', '-c', file, '-p', dir, '-e', 'stderr'], { encoding: 'utf8' });
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
}

/** A real nginx process (Debian's) in front of the given gateways, on a free loopback port. */
export class TestNginx {
  private constructor(
    readonly url: string,
    readonly dir: string,
    private readonly child: ChildProcess,
    readonly output: string[],
    private readonly port: number,
    private readonly retries: boolean,
  ) {}

  /** `retries: false`: a failed try is the client's failure (proxy_next_upstream off). */
  static async start(binary: string, gateways: string[], options: { retries?: boolean } = {}): Promise<TestNginx> {
    const retries = options.retries ?? true;
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-nginx-'));
    const port = await freePort();
    const file = join(dir, 'nginx.conf');
    writeFileSync(file, nginxConfigFor({ listenPort: port, gateways, dir, retries }));
    const child = spawn(binary, ['-c', file, '-p', dir, '-e', 'stderr'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const output: string[] = [];
    for (const stream of [child.stdout, child.stderr]) stream.on('data', (d: Buffer) => output.push(d.toString()));
    const nginx = new TestNginx(`http://127.0.0.1:${port}`, dir, child, output, port, retries);
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`nginx exited (${child.exitCode}): ${output.join('')}`);
      try {
        await fetch(nginx.url);
        return nginx;
      } catch {
        if (Date.now() > deadline) throw new Error(`nginx did not answer on ${nginx.url}: ${output.join('')}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  /**
   * Points nginx at other gateways, as a configuration reload (SIGHUP): new workers take the new
   * upstream list, the old ones finish their requests and exit. What a Kubernetes ingress or
   * kube-proxy does when a pod leaves its Service's endpoints.
   */
  reconfigure(gateways: string[]): void {
    writeFileSync(join(this.dir, 'nginx.conf'), nginxConfigFor({ listenPort: this.port, gateways, dir: this.dir, retries: this.retries }));
    this.child.kill('SIGHUP');
  }

  accessLog(): string[] {
    const file = join(this.dir, 'access.log');
    return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGQUIT'); // graceful: finishes in-flight requests
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
