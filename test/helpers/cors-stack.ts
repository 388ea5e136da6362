import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * One request from a chosen loopback source address (127.0.0.x), so the per-address
 * failed-authentication limit one test fills does not spill into another's.
 */
export function call(
  url: string,
  options: { method?: string; headers?: Record<string, string>; from?: string; body?: string } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers, localAddress: options.from }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The preflight a browser sends before a cross-origin request it may not make simply. */
export function preflight(url: string, origin: string, method = 'GET', requestHeaders = 'authorization', from?: string): Promise<Reply> {
  return call(url, {
    method: 'OPTIONS',
    from,
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': requestHeaders },
  });
}

/** Every Access-Control-Allow-* field of a response. */
export function allowFields(headers: IncomingHttpHeaders): string[] {
  return Object.keys(headers).filter((name) => name.startsWith('access-control-allow-'));
}
