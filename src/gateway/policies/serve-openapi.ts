import { CONTINUE, reject, type Answer, type Policy } from '../context.js';
import { loadOpenApiDocument } from '../openapi-document.js';

/**
 * The public API description at `path` (e.g. /v1/openapi.json), answered before authentication
 * and without quota: a client needs it to learn how to authenticate. The body is prepared once at
 * start. Other methods on the path get 405 with `Allow`; every other path continues down the chain.
 * An empty `path` turns it off.
 */
export function serveOpenApi({ path, file }: { path: string; file: string }, configDir: string): Policy {
  if (path === '') return () => CONTINUE;
  const json = loadOpenApiDocument(file, configDir);
  const document: Answer = {
    status: 200,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'public, max-age=300' },
    body: json,
  };
  return (ctx) => {
    const url = ctx.req.url ?? '';
    // The path exactly, with or without a query string.
    if (!url.startsWith(path) || (url.length > path.length && url.charCodeAt(path.length) !== 63) /* ? */) return CONTINUE;
    const method = ctx.req.method;
    if (method === 'GET' || method === 'HEAD') return document;
    return reject('method_not_allowed', `${method} is not allowed on ${path}.`, { allow: 'GET, HEAD' });
  };
}
