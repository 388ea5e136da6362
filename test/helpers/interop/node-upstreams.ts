import { createReadStream } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import express from 'express';
import Fastify from 'fastify';
import { PATHS, sha256, UPLOAD_LIMIT_BYTES, type Site } from './site.js';
import { closeNodeServer, countNodeServer, urlOf, type InteropUpstream } from './upstream.js';

// The upstreams our users most often run behind a Node gateway, each written the way its own docs
// show, with its defaults unless a test asks otherwise (`keepAliveTimeoutMs`: a shorter idle
// timeout, for the spaced-request tests, so they take seconds rather than minutes).

export interface NodeUpstreamOptions {
  keepAliveTimeoutMs?: number;
}

const etagOf = (body: Buffer) => `"${sha256(body).slice(0, 16)}"`;

async function digestOf(req: IncomingMessage): Promise<{ length: number; sha256: string }> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return digest(Buffer.concat(chunks));
}

/** What the echo routes answer for a body a framework parsed as a Buffer (none: empty). */
function digest(body: unknown): { length: number; sha256: string } {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.alloc(0);
  return { length: bytes.length, sha256: sha256(bytes) };
}

/** A plain `http.createServer`, all defaults (Node's keepAliveTimeout: 5 s, announced as `Keep-Alive: timeout=5`). */
export async function startPlainNode(site: Site, options: NodeUpstreamOptions = {}): Promise<InteropUpstream> {
  const etag = etagOf(site.json);
  const server = createServer(async (req, res) => {
    if (req.url === PATHS.json) {
      if (req.headers['if-none-match'] === etag) return res.writeHead(304, { etag }).end();
      return res.writeHead(200, { 'content-type': 'application/json', 'content-length': site.json.length, etag }).end(site.json);
    }
    if (req.url === PATHS.empty) return res.writeHead(204).end();
    if (req.url === PATHS.big) {
      // No Content-Length: Node streams it chunked.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      return createReadStream(join(site.files, 'big')).pipe(res);
    }
    if (req.method === 'POST' && req.url === PATHS.upload && Number(req.headers['content-length']) > UPLOAD_LIMIT_BYTES) {
      // Answered on the Content-Length, before reading the body (Node then discards the rest itself).
      return res.writeHead(413, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'payload too large' }));
    }
    if (req.method === 'POST' && (req.url === PATHS.echo || req.url === PATHS.upload)) {
      const digest = await digestOf(req);
      return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(digest));
    }
    res.writeHead(404).end();
  });
  if (options.keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = options.keepAliveTimeoutMs;
  const counts = countNodeServer(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: urlOf(server), counts, stop: () => closeNodeServer(server) };
}

/** Express (its own server: `app.listen`), with its own ETag/304 handling, static file sending and body-parser limits. */
export async function startExpress(site: Site, options: NodeUpstreamOptions = {}): Promise<InteropUpstream> {
  const app = express();
  const anyType = () => true;
  // res.send sets a (weak) ETag and answers 304 to a matching If-None-Match; app.get serves HEAD too.
  app.get(PATHS.json, (_req, res) => {
    res.type('application/json').send(site.json);
  });
  app.get(PATHS.empty, (_req, res) => {
    res.status(204).end();
  });
  app.get(PATHS.big, (_req, res) => {
    res.sendFile(join(site.files, 'big'));
  });
  app.post(PATHS.echo, express.raw({ type: anyType, limit: '16mb' }), (req, res) => {
    res.json(digest(req.body));
  });
  // body-parser refuses a Content-Length over the limit with 413 before reading the body.
  app.post(PATHS.upload, express.raw({ type: anyType, limit: UPLOAD_LIMIT_BYTES }), (req, res) => {
    res.json(digest(req.body));
  });
  const server = await new Promise<ReturnType<typeof app.listen>>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  if (options.keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = options.keepAliveTimeoutMs;
  const counts = countNodeServer(server);
  return { url: urlOf(server), counts, stop: () => closeNodeServer(server) };
}

/** Fastify (its own keepAliveTimeout default: 72 s), with its bodyLimit, HEAD routes and stream replies. */
export async function startFastify(site: Site, options: NodeUpstreamOptions = {}): Promise<InteropUpstream> {
  const app = Fastify(options.keepAliveTimeoutMs === undefined ? {} : { keepAliveTimeout: options.keepAliveTimeoutMs });
  const etag = etagOf(site.json);
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.get(PATHS.json, (request, reply) => {
    reply.header('etag', etag);
    if (request.headers['if-none-match'] === etag) return reply.code(304).send();
    return reply.type('application/json').send(site.json);
  });
  app.get(PATHS.empty, (_request, reply) => reply.code(204).send());
  app.get(PATHS.big, (_request, reply) => reply.type('application/octet-stream').send(createReadStream(join(site.files, 'big'))));
  app.post(PATHS.echo, { bodyLimit: 16 * 1024 * 1024 }, (request) => digest(request.body));
  // bodyLimit: a Content-Length over it is a 413 (FST_ERR_CTP_BODY_TOO_LARGE) before the body is read.
  app.post(PATHS.upload, { bodyLimit: UPLOAD_LIMIT_BYTES }, (request) => digest(request.body));
  await app.listen({ port: 0, host: '127.0.0.1' });
  const counts = countNodeServer(app.server);
  return {
    url: urlOf(app.server),
    counts,
    stop: async () => {
      app.server.closeAllConnections();
      await app.close();
    },
  };
}
