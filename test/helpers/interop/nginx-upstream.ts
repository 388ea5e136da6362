import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../ports.js';
import { PATHS, UPLOAD_LIMIT_BYTES, type Site } from './site.js';
import { until, type InteropUpstream, type UpstreamCounts } from './upstream.js';

export { nginxBinary } from '../nginx.js';

/** Path of the location that answers `return 413` whatever the body (nginx's early answer without a size limit involved). */
export const NGINX_REFUSE_PATH = '/v1/interop/refuse';
const SINK_PATH = '/v1/interop/sink';

/**
 * Debian's nginx as an origin server, run as test/helpers/nginx.ts runs it (free loopback port,
 * a temporary prefix, `daemon off`, the current user): static JSON and a large static file from
 * the site directory, a 204, a POST that is read and discarded, an upload location with a small
 * `client_max_body_size` (413 on the Content-Length, before the body), a `return 413` location,
 * and a short `keepalive_timeout`, which nginx does not announce in a Keep-Alive header. Each
 * request is logged with nginx's connection serial number (`$connection`), so the test counts the
 * connections nginx accepted.
 */
export function nginxOriginConfig(opts: { port: number; dir: string; root: string; keepaliveTimeoutMs: number }): string {
  const user = process.getuid?.() === 0 ? `user ${userInfo().username};\n` : '';
  return `daemon off;
${user}worker_processes 1;
pid ${join(opts.dir, 'nginx.pid')};
error_log ${join(opts.dir, 'error.log')} warn;
events { worker_connections 1024; }
http {
    log_format interop '$connection $connection_requests $request_method $uri $status $request_length';
    access_log ${join(opts.dir, 'access.log')} interop;
    client_body_temp_path ${join(opts.dir, 'client-body')};
    proxy_temp_path ${join(opts.dir, 'proxy')};
    fastcgi_temp_path ${join(opts.dir, 'fastcgi')};
    uwsgi_temp_path ${join(opts.dir, 'uwsgi')};
    scgi_temp_path ${join(opts.dir, 'scgi')};
    server_tokens off;
    keepalive_timeout ${opts.keepaliveTimeoutMs}ms;
    server {
        listen 127.0.0.1:${opts.port};
        root ${opts.root};
        location = ${PATHS.json} { default_type application/json; }
        location = ${PATHS.big} { default_type application/octet-stream; }
        location = ${PATHS.empty} { return 204; }
        # A POST read to its end before the answer: the mirror module reads the whole body first
        # (unlike \`return\`, which answers at once and discards the body after), then the static
        # handler refuses POST (405) and error_page turns that into the file, as a GET, with 200.
        location = ${PATHS.echo} {
            client_max_body_size 16m;
            mirror ${SINK_PATH};
            mirror_request_body on;
            default_type application/json;
            error_page 405 =200 ${PATHS.echo};
        }
        location = ${SINK_PATH} { internal; return 204; }
        location = ${PATHS.upload} {
            client_max_body_size ${UPLOAD_LIMIT_BYTES / 1024}k;
            default_type application/json;
            return 200 '{"read":true}';
        }
        location = ${NGINX_REFUSE_PATH} { return 413; }
    }
}
`;
}

export async function startNginx(binary: string, site: Site, opts: { keepaliveTimeoutMs: number }): Promise<InteropUpstream> {
  const dir = join(site.dir, 'nginx');
  const port = await freePort();
  const file = join(site.dir, 'nginx.conf');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(site.files, 'echo'), '{"read":true}');
  writeFileSync(file, nginxOriginConfig({ port, dir, root: site.dir, keepaliveTimeoutMs: opts.keepaliveTimeoutMs }));
  const child = spawn(binary, ['-c', file, '-p', dir, '-e', join(dir, 'error.log')], { stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  for (const stream of [child.stdout, child.stderr]) stream.on('data', (d: Buffer) => output.push(d.toString()));
  const url = `http://127.0.0.1:${port}`;
  const errorLog = () => (existsSync(join(dir, 'error.log')) ? readFileSync(join(dir, 'error.log'), 'utf8') : '');
  const up = await until(async () => {
    if (child.exitCode !== null) return true;
    try {
      await fetch(`${url}${PATHS.json}`);
      return true;
    } catch {
      return false;
    }
  });
  if (!up || child.exitCode !== null) {
    child.kill('SIGKILL');
    throw new Error(`nginx did not start on ${url}: ${output.join('')}${errorLog()}`);
  }
  const accessLog = join(dir, 'access.log');
  const counts = (): Promise<UpstreamCounts> => {
    const lines = existsSync(accessLog) ? readFileSync(accessLog, 'utf8').split('\n').filter(Boolean) : [];
    const serials = new Set(lines.map((line) => line.split(' ')[0]));
    return Promise.resolve({ connections: serials.size, requests: lines.length });
  };
  return {
    url,
    counts,
    stop: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}
