import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  createSecureServer,
  type Http2SecureServer,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
} from 'node:http2';
import type { Socket } from 'node:net';
import { limitedWarn } from '../observability/limited-warn.js';
import type { Logger } from '../observability/log.js';
import { MAX_HEADER_LIST_BYTES } from './h2-request.js';
import { MAX_HEADER_FIELDS } from './request-framing.js';
import { TlsContextReloader } from './tls-context-reloader.js';
import { secureContextOptions, sniContext, type TlsFiles } from './tls-context.js';

export type AnyRequest = IncomingMessage | Http2ServerRequest;
export type AnyResponse = ServerResponse | Http2ServerResponse;

/** HTTP/1.1's `maxHeaderSize` on this listener, as on the plain one (server.ts). */
const MAX_HEAD_BYTES = 16 * 1024;

/**
 * HTTP/2 limits of the public listener (docs/security.md, "HTTP/2"). Node's defaults leave
 * concurrent streams unlimited; Envoy's edge guide uses 100. nghttp2 (1.61 in Node 20.20) closes a
 * session that resets streams faster than it allows (rapid reset, CVE-2023-44487) or sends
 * CONTINUATION frames past its header limits (CVE-2024-27983); Node closes one that leaves more than
 * `maxOutstandingPings` PINGs or SETTINGS unanswered or sends more than `maxSessionInvalidFrames`
 * invalid frames.
 */
const H2_SETTINGS = {
  maxConcurrentStreams: 100,
  // Advertised only: h2-request.ts enforces it (431).
  maxHeaderListSize: MAX_HEADER_LIST_BYTES,
  enablePush: false,
} as const;
/** An HTTP/2 session with no open stream and no bytes for this long is closed with GOAWAY (HTTP/1.1's keepAliveTimeout). */
const H2_IDLE_MS = 65_000;
/**
 * Rapid reset (CVE-2023-44487): a stream reset by its client no longer counts against
 * `maxConcurrentStreams`, so opening and resetting streams costs the client nothing and the gateway
 * one handler run each. nghttp2's own rate limit did not stop 10,000 of them (measured: another
 * client waited 3.6 s for its handshake while they were worked off). A session whose client resets
 * more than this many unanswered streams within RESET_WINDOW_MS is ended with GOAWAY
 * ENHANCE_YOUR_CALM, as Envoy and nginx do; a browser cancelling a few navigations stays far below.
 */
const MAX_CLIENT_RESETS = 100;
const RESET_WINDOW_MS = 10_000;
const NGHTTP2_ENHANCE_YOUR_CALM = 0xb;

export interface TlsListenerOptions {
  files: TlsFiles;
  timeouts: { headersTimeoutMs: number; requestTimeoutMs: number };
  logger: Logger;
}

export interface TlsListener {
  server: Http2SecureServer;
  reloader: TlsContextReloader;
}

/** The connections of each TLS listener, for closeGracefully (listen.ts). */
const listeners = new WeakMap<Http2SecureServer, (hard: boolean) => void>();

/**
 * Sends GOAWAY to every HTTP/2 session of a TLS listener (their open streams finish; new ones go
 * elsewhere); `hard` destroys every connection left. False for a server that is not one.
 */
export function closeTlsConnections(server: object, hard: boolean): boolean {
  const close = listeners.get(server as Http2SecureServer);
  close?.(hard);
  return close !== undefined;
}

/**
 * The public listener with TLS: one server for HTTP/1.1 and HTTP/2, chosen by ALPN (`h2`, then
 * `http/1.1`; a client without ALPN speaks HTTP/1.1). HTTP/1.1 requests reach `handler` as
 * IncomingMessage/ServerResponse with the same limits as the plain listener (server.ts); HTTP/2
 * streams as Http2ServerRequest/Response (made to read alike by http/h2-request.ts).
 */
export function createTlsListener(options: TlsListenerOptions, handler: (req: AnyRequest, res: AnyResponse) => void): TlsListener {
  const { files, timeouts, logger } = options;
  const warnResets = limitedWarn(logger, 'HTTP/2 session ended: too many streams reset by the client');
  // Applied on reloads only, once `server` exists.
  const reloader = new TlsContextReloader(files, (material) => server.setSecureContext(secureContextOptions(material.default)), logger);
  const server = createSecureServer(
    {
      allowHTTP1: true,
      ALPNProtocols: ['h2', 'http/1.1'],
      ...secureContextOptions(reloader.current().default),
      // Read at each handshake, so a reload reaches the SNI certificates too.
      SNICallback: (serverName, callback) => callback(null, sniContext(reloader.current(), serverName)),
      // A client that never finishes its handshake holds a socket no longer than one that never
      // finishes its request head.
      handshakeTimeout: timeouts.headersTimeoutMs,
      settings: H2_SETTINGS,
      // Pseudo-header fields come on top of the regular ones request-framing.ts and h2-request.ts
      // count (a list over them is answered 431 there; past this, nghttp2 resets the stream).
      maxHeaderListPairs: MAX_HEADER_FIELDS + 28,
    },
    handler,
  );
  // The HTTP/1.1 side of the listener reads these as the plain server's options (server.ts).
  Object.assign(server, {
    headersTimeout: timeouts.headersTimeoutMs,
    requestTimeout: timeouts.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1000, timeouts.headersTimeoutMs),
    keepAliveTimeout: 65_000,
    maxHeaderSize: MAX_HEAD_BYTES,
    maxHeadersCount: 0,
  });

  const sockets = new Set<Socket>();
  const sessions = new Set<ServerHttp2Session>();
  server.on('secureConnection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    let openStreams = 0;
    let resets = 0;
    let windowStartMs = 0;
    const onReset = () => {
      const nowMs = performance.now();
      if (nowMs - windowStartMs > RESET_WINDOW_MS) {
        windowStartMs = nowMs;
        resets = 0;
      }
      if (++resets > MAX_CLIENT_RESETS && !session.destroyed) {
        warnResets({ peer: session.socket?.remoteAddress, resets });
        session.goaway(NGHTTP2_ENHANCE_YOUR_CALM);
        session.destroy();
      }
    };
    session.on('stream', (stream) => {
      openStreams++;
      stream.once('close', () => openStreams--);
      // Reset by the client before the response was complete.
      stream.once('aborted', onReset);
    });
    session.setTimeout(H2_IDLE_MS, () => {
      if (openStreams === 0) session.close();
    });
  });
  // A handshake that fails (a TLS 1.1 client, no shared cipher, a scanner) ends only its socket.
  server.on('tlsClientError', (err: NodeJS.ErrnoException, socket) => {
    logger.debug({ code: err.code, message: err.message, peer: socket.remoteAddress }, 'TLS handshake failed');
  });

  listeners.set(server, (hard) => {
    for (const session of sessions) {
      if (hard) session.destroy();
      else if (!session.closed) session.close();
    }
    if (hard) for (const socket of sockets) socket.destroy();
  });
  server.once('close', () => reloader.close());
  return { server, reloader };
}
