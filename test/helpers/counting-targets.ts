import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One request as a target saw it. */
export interface TargetHit {
  method: string;
  url: string;
  requestId: string;
  body: string;
}

/**
 * A service instance for upstream tests: a plain Node server with its defaults that records what
 * reached it (method, path as received, X-Request-Id, body) and answers a JSON echo naming itself,
 * unless a test installs another behaviour (slow, 5xx, early close). It can be killed (every
 * connection cut, the port closed) and started again on the same port.
 */
export class CountingTarget {
  readonly hits: TargetHit[] = [];
  connections = 0;
  behaviour: (req: IncomingMessage, res: ServerResponse, body: string) => void = (req, res, body) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ target: this.name, method: req.method, url: req.url, body }));
  };
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(readonly name: string) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    const server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        this.hits.push({ method: req.method ?? '', url: req.url ?? '', requestId: String(req.headers['x-request-id'] ?? ''), body });
        this.behaviour(req, res, body);
      });
    });
    server.on('connection', (socket: Socket) => {
      this.connections++;
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  /** Gone at once, as a crashed instance: open connections reset, the port refuses. */
  async kill(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  }

  hitsOf(method: string): TargetHit[] {
    return this.hits.filter((h) => h.method === method);
  }
}

/** gateway.yaml's `services:` section for the given services, replacing the shipped empty one. */
export function withServices(gatewayYaml: string, servicesYaml: string): string {
  if (!/^services: \[\]/m.test(gatewayYaml)) throw new Error('gateway.yaml has no `services: []` line to replace');
  return gatewayYaml.replace(/^services: \[\][^\n]*\n/m, servicesYaml.trimEnd() + '\n');
}
