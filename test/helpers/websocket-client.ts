import WebSocket from 'ws';

/** How a tunnel closed, as its client saw it (`atMs`: this process's clock). */
export interface Closed {
  code: number;
  reason: string;
  atMs: number;
}

/** An opened WebSocket with its close to come, or the status and body of a refused handshake. */
export interface Opened {
  ws?: WebSocket;
  closed?: Promise<Closed>;
  status?: number;
  body?: string;
}

/** Opens a WebSocket; resolves once it is open, or with the answer of a refused handshake. */
export function openWebSocket(url: string, protocols?: string[]): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols);
    const closed = new Promise<Closed>((done) =>
      ws.once('close', (code, reason) => done({ code, reason: String(reason), atMs: Date.now() })),
    );
    ws.once('open', () => resolve({ ws, closed }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    ws.once('error', reject);
  });
}

/** The echo of a ping (test/helpers/ws-echo-upstream.ts), or `closed` when the tunnel closes first. */
export async function echoes(ws: WebSocket): Promise<string> {
  if (ws.readyState !== WebSocket.OPEN) return 'closed';
  const reply = new Promise<string>((resolve) => {
    ws.once('message', (data) => resolve(String(data)));
    ws.once('close', () => resolve('closed'));
  });
  ws.send('ping');
  return reply;
}
