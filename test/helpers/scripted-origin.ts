import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** What the origin answers for one path: status, fields and body, decided per request. */
export type Script = (
  req: IncomingMessage,
  seen: number,
) => { status?: number; headers?: Record<string, string | string[] | undefined>; body?: string; delayMs?: number };

/** One request as the origin saw it. */
export interface OriginHit {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
}

/**
 * An upstream for cache tests: each path answers by its script (Cache-Control, ETag, Vary, …) and
 * every request that reached it is recorded, so a test counts exactly what the cache let through.
 * An unscripted path answers 404.
 */
export class ScriptedOrigin {
  readonly hits: OriginHit[] = [];
  private readonly scripts = new Map<string, Script>();
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  url = '';

  script(path: string, script: Script): this {
    this.scripts.set(path, script);
    return this;
  }

  hitsOf(path: string, method?: string): OriginHit[] {
    return this.hits.filter((h) => h.path === path && (method === undefined || h.method === method));
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => this.answer(req, res));
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  private answer(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    req.on('end', () => {
      const path = req.url ?? '/';
      this.hits.push({ method: req.method ?? '', path, headers: req.headers });
      const script = this.scripts.get(path.split('?')[0]!) ?? this.scripts.get(path);
      if (!script) {
        res.statusCode = 404;
        res.end('{"code":"not_found"}');
        return;
      }
      const answer = script(req, this.hitsOf(path).length);
      const send = () => {
        res.statusCode = answer.status ?? 200;
        for (const [name, value] of Object.entries(answer.headers ?? {})) if (value !== undefined) res.setHeader(name, value);
        if (!res.hasHeader('content-type')) res.setHeader('content-type', 'application/json');
        res.end(answer.body ?? '');
      };
      if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
}
