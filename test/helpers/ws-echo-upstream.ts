import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

export interface EchoUpstream {
  url: string;
  /** Every WebSocket handshake it received: the path and query, and the headers. */
  handshakes: Array<{ url: string; headers: IncomingHttpHeaders }>;
  close(): Promise<void>;
}

/**
 * An upstream with a WebSocket echo (`echo:<message>`) on every path, choosing the subprotocol
 * `chat` when offered and none otherwise, and a JSON answer to plain requests.
 */
export async function startEchoUpstream(): Promise<EchoUpstream> {
  const handshakes: EchoUpstream['handshakes'] = [];
  const server: Server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ path: req.url }));
  });
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (offered) => (offered.has('chat') ? 'chat' : false) });
  server.on('upgrade', (req, socket, head) => {
    handshakes.push({ url: req.url ?? '', headers: req.headers });
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('message', (data, isBinary) => ws.send(isBinary ? data : `echo:${String(data)}`, { binary: isBinary }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    handshakes,
    async close() {
      wss.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
