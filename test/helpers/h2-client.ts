import { execFile } from 'node:child_process';
import { connect, type ClientHttp2Session, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import { promisify } from 'node:util';

export interface H2Response {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A session of Node's own http2 client to a TLS listener (test certificates: not verified). */
export function h2Session(url: string, options: { servername?: string } = {}): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = connect(url, { rejectUnauthorized: false, servername: options.servername });
    // Resolved once the server's SETTINGS have arrived (remoteSettings are defaults before).
    session.once('remoteSettings', () => resolve(session));
    session.once('error', reject);
  });
}

/** One request on `session`; `body` chunks are written one by one (no Content-Length unless given). */
export function h2Request(session: ClientHttp2Session, headers: OutgoingHttpHeaders, body?: Array<string | Buffer>): Promise<H2Response> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers, { endStream: body === undefined });
    let status = 0;
    let responseHeaders: IncomingHttpHeaders = {};
    let text = '';
    stream.on('response', (h) => {
      status = Number(h[':status']);
      responseHeaders = h;
    });
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => (text += chunk));
    stream.on('end', () => resolve({ status, headers: responseHeaders, body: text }));
    stream.on('error', reject);
    if (body) {
      for (const chunk of body) stream.write(chunk);
      stream.end();
    }
  });
}

/** `curl` with `args` (protocol and trust flags) for GET `url` with `key`: "<http_version> <status>", e.g. "2 200". */
export async function curlVersionAndStatus(args: string[], url: string, key: string): Promise<string> {
  const { stdout } = await promisify(execFile)('curl', [
    '-sS',
    ...args,
    '-o',
    '/dev/null',
    '-w',
    '%{http_version} %{http_code}',
    '-H',
    `Authorization: Bearer ${key}`,
    url,
  ]);
  return stdout;
}
