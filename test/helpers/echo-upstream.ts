import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/**
 * A real upstream for proxy tests: records what arrived and answers with a JSON echo, or with the
 * behaviour a test installs (slow, reset, custom status).
 */
export class EchoUpstream {
  readonly seen: SeenRequest[] = [];
  behaviour: (req: IncomingMessage, res: ServerResponse, body: string) => void = (req, res, body) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }));
  };
  server!: Server;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        this.seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        this.behaviour(req, res, body);
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
