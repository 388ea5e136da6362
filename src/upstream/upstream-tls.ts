import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { configDirFrom } from '../config/config-dir.js';

/**
 * TLS towards an https:// upstream (a service's targets, or upstream.url). Certificates are always
 * verified (Node's default CA store, or `ca` for a private CA: then only that bundle is trusted);
 * there is no switch to turn verification off. The server name sent (SNI) and checked against the
 * certificate is the target URL's host name unless `servername` says otherwise; `cert` and `key`
 * present a client certificate for upstreams that require one (mTLS). Paths are PEM files,
 * relative to the config directory or absolute, read when a target's pool is made (a target
 * already running keeps the files it was made with until it is removed).
 */
export const upstreamTlsSchema = z
  .strictObject({
    /** CA bundle (PEM) trusted instead of Node's default store: for upstreams under a private CA. */
    ca: z.string().min(1).optional(),
    /** Client certificate chain (PEM), for upstreams that require one (mTLS); with `key`. */
    cert: z.string().min(1).optional(),
    /** Private key (PEM) of `cert`. */
    key: z.string().min(1).optional(),
    /** Server name for SNI and the certificate check, when it differs from the target URL's host. */
    servername: z.string().min(1).optional(),
  })
  .superRefine((tls, ctx) => {
    if (Boolean(tls.cert) !== Boolean(tls.key))
      ctx.addIssue({ code: 'custom', path: [tls.cert ? 'key' : 'cert'], message: 'cert and key go together (mTLS)' });
    for (const field of ['ca', 'cert', 'key'] as const) {
      const path = tls[field];
      if (path === undefined) continue;
      try {
        readPem(path);
      } catch (err) {
        ctx.addIssue({ code: 'custom', path: [field], message: `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? err}` });
      }
    }
  })
  .optional();

export type UpstreamTls = z.infer<typeof upstreamTlsSchema>;

/** undici's `connect` options for a pool to `origin` (undefined for plain http or no settings). */
export function tlsConnectOptions(origin: string, tls: UpstreamTls) {
  if (!origin.startsWith('https:') || !tls) return undefined;
  return {
    rejectUnauthorized: true,
    ...(tls.ca && { ca: readPem(tls.ca) }),
    ...(tls.cert && { cert: readPem(tls.cert) }),
    ...(tls.key && { key: readPem(tls.key) }),
    ...(tls.servername && { servername: tls.servername }),
  };
}

/** A PEM file, relative to this process's config directory. */
function readPem(path: string): Buffer {
  return readFileSync(resolve(configDirFrom(process.env), path));
}
