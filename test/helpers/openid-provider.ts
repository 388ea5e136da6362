import type { Server } from 'node:http';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import Provider from 'oidc-provider';

/** The resource (RFC 8707) whose access tokens the gateway admits, and the audience they carry. */
export const RESOURCE = 'https://pets.api.test';
export const AUDIENCE = 'pets-api';
export const CLIENT_ID = 'pets-client';
const CLIENT_SECRET = 'pets-client-secret-for-tests-only';

/** A private signing key for the provider's JWKS. */
export async function providerKey(kid: string): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
}

/**
 * A real OpenID Provider (panva's certified oidc-provider) on 127.0.0.1:`port`: discovery, a JWKS
 * of `keys`, and the client-credentials grant issuing JWT access tokens (RFC 9068) for RESOURCE,
 * with a `tier` claim the gateway maps to a plan. Restarting it on the same port with other keys
 * is a key rotation as an IdP does it.
 */
export class OpenIdProvider {
  private server?: Server;
  readonly issuer: string;

  constructor(
    readonly port: number,
    private readonly keys: JWK[],
    private readonly tier = 'gold',
    /** More clients (client credentials, the same secret), each a subject of its own, with its `org` claim. */
    private readonly orgs: Readonly<Record<string, string>> = {},
  ) {
    this.issuer = `http://127.0.0.1:${port}`;
  }

  async start(): Promise<this> {
    const { tier, orgs } = this;
    const client = (clientId: string) => ({
      client_id: clientId,
      client_secret: CLIENT_SECRET,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      scope: 'pets:read',
    });
    const provider = new Provider(this.issuer, {
      clients: [client(CLIENT_ID), ...Object.keys(orgs).map(client)],
      jwks: { keys: this.keys },
      scopes: ['pets:read'],
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => RESOURCE,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx, resource) => {
            if (resource !== RESOURCE) throw new Error(`unknown resource ${resource}`);
            return {
              scope: 'pets:read',
              audience: AUDIENCE,
              accessTokenFormat: 'jwt',
              accessTokenTTL: 600,
              jwt: { sign: { alg: 'RS256' } },
            };
          },
        },
      },
      extraTokenClaims: (_ctx, token) => {
        const org = 'clientId' in token && token.clientId ? orgs[token.clientId] : undefined;
        return org === undefined ? { tier } : { tier, org };
      },
      ttl: { ClientCredentials: 600 },
    });
    this.server = await listenOn(provider, this.port);
    return this;
  }

  /** An access token from the token endpoint, as a service holding the client secret gets one. */
  async accessToken(clientId = CLIENT_ID): Promise<string> {
    const res = await fetch(`${this.issuer}/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${clientId}:${CLIENT_SECRET}`).toString('base64')}`,
      },
      body: new URLSearchParams({ grant_type: 'client_credentials', resource: RESOURCE, scope: 'pets:read' }),
    });
    const body = (await res.json()) as { access_token?: string; error?: string; error_description?: string };
    if (!body.access_token) throw new Error(`token endpoint: ${res.status} ${body.error}: ${body.error_description}`);
    return body.access_token;
  }

  async stop(): Promise<void> {
    await closeServer(this.server);
    this.server = undefined;
  }
}

/** `provider` listening on 127.0.0.1:`port`. */
export async function listenOn(provider: Provider, port: number): Promise<Server> {
  const server = provider.listen(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  return server;
}

/** Closes `server` and its open connections (none: nothing to do). */
export async function closeServer(server: Server | undefined): Promise<void> {
  if (!server) return;
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}
