import type { Server } from 'node:http';
import Provider, { type KoaContextWithOIDC } from 'oidc-provider';
import { closeServer, listenOn, providerKey } from './openid-provider.js';

/** A person at the provider: the login typed on its page is their account id and subject. */
export interface IdpUser {
  email: string;
  groups: string[];
  /** The one owner whose keys they manage (a partner team's member). */
  tollgate_owner?: string;
}

/**
 * A real OpenID Provider (panva's oidc-provider) for the console's sign-in: the authorization code
 * flow with PKCE for one confidential client, its own login page (any password; the login names
 * the account of `users`), and ID tokens carrying `email`, `groups` and `tollgate_owner`. Its
 * issuer is http://localhost:<port> while it listens on 127.0.0.1: another site than a console on
 * 127.0.0.1, so its redirect back is a cross-site navigation, as with a company's provider.
 * Consent is given without a page (a first-party client).
 */
export class ConsoleIdp {
  readonly clientId = 'tollgate-console';
  readonly clientSecret = 'console-client-secret-for-tests-only-0123';
  readonly issuer: string;
  private server?: Server;

  constructor(
    readonly port: number,
    private readonly redirectUri: string,
    private readonly users: Record<string, IdpUser>,
  ) {
    this.issuer = `http://localhost:${port}`;
  }

  async start(): Promise<this> {
    const users = this.users;
    const provider = new Provider(this.issuer, {
      clients: [
        {
          client_id: this.clientId,
          client_secret: this.clientSecret,
          redirect_uris: [this.redirectUri],
          grant_types: ['authorization_code'],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
      jwks: { keys: [await providerKey('console-idp')] },
      claims: { openid: ['sub'], email: ['email'], groups: ['groups', 'tollgate_owner'] },
      // The claims of the scopes asked for go into the ID token itself (the console reads only that).
      conformIdTokenClaims: false,
      cookies: { keys: ['console-idp-cookie-key-for-tests-only'] },
      features: { devInteractions: { enabled: true } },
      findAccount: (_ctx: KoaContextWithOIDC, id: string) =>
        Object.hasOwn(users, id) ? { accountId: id, claims: () => ({ sub: id, ...users[id]! }) } : undefined,
      loadExistingGrant: async (ctx: KoaContextWithOIDC) => {
        const { Grant } = ctx.oidc.provider;
        const existing = ctx.oidc.session!.grantIdFor(ctx.oidc.client!.clientId);
        if (existing) return Grant.find(existing);
        const grant = new Grant({ clientId: ctx.oidc.client!.clientId, accountId: ctx.oidc.session!.accountId! });
        grant.addOIDCScope('openid email groups');
        await grant.save();
        return grant;
      },
    });
    this.server = await listenOn(provider, this.port);
    return this;
  }

  async stop(): Promise<void> {
    await closeServer(this.server);
    this.server = undefined;
  }
}

/** The `console:` section of gateway.yaml for a provider of `issuer` and a console on `adminUrl`, with the tests' roles. */
export function consoleOidcYaml(issuer: string, clientId: string, adminUrl: string, secretEnv: string): string {
  return `
console:
  oidc:
    issuer: ${issuer}
    clientId: ${clientId}
    clientSecretEnv: ${secretEnv}
    redirectUri: ${adminUrl}/admin/console/oidc/callback
    roleClaim: groups
    roles: { tollgate-viewers: viewer, tollgate-operators: operator, partners: operator }
    ownerClaim: tollgate_owner
    scopes: [email, groups]
`;
}
