import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { JWTPayload } from 'jose';
import { mint, signingKey, type SigningKey } from './jwks-server.js';

/** What the scripted provider recorded of one authorization request. */
export interface Authorization {
  state: string;
  nonce: string;
  challenge: string;
  challengeMethod: string;
  redirectUri: string;
  clientId: string;
  scope: string;
}

/**
 * An OpenID provider under the test's control, to play the parts a real provider never plays: its
 * ID tokens can carry another nonce, issuer or audience, or be signed by a key it does not publish
 * (`idToken` edits the claims; `foreignKey` signs). Its issuer is http://localhost:<port> (it
 * listens on 127.0.0.1): another site than a console on 127.0.0.1. The authorization endpoint
 * answers at once (no login) with a redirect to the redirect_uri, with a code; the token endpoint
 * checks the client's secret and the PKCE verifier as a real one does. The real provider
 * (oidc-provider) plays the honest parts: test/helpers/console-idp.ts.
 */
export class ScriptedIdp {
  readonly clientId = 'tollgate-console';
  readonly clientSecret = 'console-client-secret-for-tests-only-0123';
  issuer = '';
  /** Claims of the next ID tokens (sub, email, groups…); iss, aud, nonce, iat and exp are added. */
  claims: JWTPayload = {};
  /** Edits the ID token's claims just before signing (a wrong nonce, issuer or audience). */
  idToken: (claims: JWTPayload) => JWTPayload = (claims) => claims;
  /** Seconds an ID token lives. */
  ttlSeconds = 600;
  /** Signs with a key not in its JWKS. */
  foreignKey = false;
  /** The token endpoint fails with this status (0: it works). */
  tokenFailure = 0;
  /** Every authorization request, in order. */
  readonly authorizations: Authorization[] = [];
  /** Every ID token it issued (none may appear in the gateway's output). */
  readonly issued: string[] = [];
  private readonly codes = new Map<string, Authorization>();
  private key!: SigningKey;
  private other!: SigningKey;
  private server!: Server;

  async start(): Promise<this> {
    this.key = await signingKey('idp-1');
    this.other = await signingKey('idp-1');
    this.server = createServer((req, res) => void this.serve(req.url ?? '/', req, res));
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.issuer = `http://localhost:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  private async serve(url: string, req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) {
    const { pathname, searchParams } = new URL(url, this.issuer);
    const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (pathname === '/.well-known/openid-configuration')
      return json(200, {
        issuer: this.issuer,
        authorization_endpoint: `${this.issuer}/authorize`,
        token_endpoint: `${this.issuer}/token`,
        jwks_uri: `${this.issuer}/jwks`,
      });
    if (pathname === '/jwks') return json(200, { keys: [this.key.publicJwk] });
    if (pathname === '/authorize') {
      const auth: Authorization = {
        state: searchParams.get('state') ?? '',
        nonce: searchParams.get('nonce') ?? '',
        challenge: searchParams.get('code_challenge') ?? '',
        challengeMethod: searchParams.get('code_challenge_method') ?? '',
        redirectUri: searchParams.get('redirect_uri') ?? '',
        clientId: searchParams.get('client_id') ?? '',
        scope: searchParams.get('scope') ?? '',
      };
      this.authorizations.push(auth);
      const code = `code-${this.authorizations.length}-${Math.random().toString(36).slice(2)}`;
      this.codes.set(code, auth);
      const back = new URL(auth.redirectUri);
      back.searchParams.set('code', code);
      back.searchParams.set('state', auth.state);
      return res.writeHead(302, { location: back.href }).end();
    }
    if (pathname === '/token' && req.method === 'POST') {
      if (this.tokenFailure) return json(this.tokenFailure, { message: 'down for maintenance' });
      let text = '';
      for await (const chunk of req) text += chunk;
      const form = new URLSearchParams(text);
      const basic = `Basic ${Buffer.from(`${this.clientId}:${this.clientSecret}`).toString('base64')}`;
      if (req.headers.authorization !== basic) return json(401, { error: 'invalid_client' });
      const auth = this.codes.get(form.get('code') ?? '');
      this.codes.delete(form.get('code') ?? '');
      const verified = createHash('sha256')
        .update(form.get('code_verifier') ?? '')
        .digest('base64url');
      if (!auth || verified !== auth.challenge || form.get('redirect_uri') !== auth.redirectUri)
        return json(400, { error: 'invalid_grant' });
      const now = Math.floor(Date.now() / 1000);
      const claims = this.idToken({
        ...this.claims,
        iss: this.issuer,
        aud: this.clientId,
        nonce: auth.nonce,
        iat: now,
        exp: now + this.ttlSeconds,
      });
      const idToken = await mint(this.foreignKey ? this.other : this.key, claims);
      this.issued.push(idToken);
      return json(200, { access_token: 'opaque-access-token', token_type: 'Bearer', expires_in: 600, id_token: idToken });
    }
    res.writeHead(404).end();
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}
