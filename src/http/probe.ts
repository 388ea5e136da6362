import { connect } from 'node:net';

/** True when a TCP connection to the URL's host and port opens within `timeoutMs`. */
export function canConnect(url: string, timeoutMs: number): Promise<boolean> {
  const target = new URL(url);
  const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
  return new Promise((resolve) => {
    const socket = connect({ host: target.hostname.replace(/^\[|\]$/g, ''), port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
