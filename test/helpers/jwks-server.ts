import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from 'jose';

export interface SigningKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

/** A fresh key pair with its public JWK (kid, alg and use set as IdPs publish them). */
export async function signingKey(kid: string, alg = 'RS256'): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, publicJwk };
}

/** A signed JWT: standard claims from `claims`, header alg and kid from the key unless `header` overrides. */
export function mint(key: SigningKey, claims: JWTPayload, header: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT', ...header }).sign(key.privateKey);
}

/**
 * An identity provider's key endpoint under the test's control: serves `keys` as a JWKS at
 * /jwks with the given Cache-Control, counts fetches, and can be made to fail (`status`).
 */
export class JwksServer {
  keys: JWK[] = [];
  cacheControl = 'max-age=300';
  status = 200;
  fetches = 0;
  url = '';
  private server!: Server;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      if (req.url !== '/jwks') {
        res.writeHead(404).end();
        return;
      }
      this.fetches++;
      if (this.status !== 200) {
        res.writeHead(this.status).end();
        return;
      }
      res
        .writeHead(200, { 'content-type': 'application/json', 'cache-control': this.cacheControl })
        .end(JSON.stringify({ keys: this.keys }));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/jwks`;
    return this;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
