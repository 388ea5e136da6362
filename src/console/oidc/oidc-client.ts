import { createRemoteJWKSet, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { ConsoleOidcConfig } from '../../config/console-schema.js';
import { JWT_ALGORITHMS } from '../../config/jwt-schema.js';
import { endpointOf, openIdConfiguration } from '../../http/openid-discovery.js';
import { readBounded } from '../../http/read-bounded.js';

const TIMEOUT_MS = 5000;
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;
/** Clock skew allowed between this machine and the provider on `iat`, `exp` and `nbf`. */
const CLOCK_TOLERANCE_SECONDS = 30;

/** Why a sign-in was refused, for the log: never a token, a code or a claim's value. */
export class SignInRefused extends Error {}
/** The provider could not be reached or answered nonsense (an operator's or the provider's fault). */
export class ProviderUnavailable extends Error {}

interface Endpoints {
  authorization: string;
  token: string;
  keys: JWTVerifyGetKey;
}

/**
 * The console's client of the team's OpenID provider: the authorization URL of a sign-in, the
 * code's exchange for an ID token (with the client secret and the PKCE verifier), and the ID
 * token's verification with jose: signature by the provider's published keys (asymmetric
 * algorithms only), `iss` the configured issuer, `aud` this client, `nonce` the sign-in's own.
 * Discovery is read once per client (a reload with other settings makes a new client); jose keeps
 * and refreshes the keys.
 */
export class OidcClient {
  private endpoints?: Promise<Endpoints>;

  constructor(readonly config: ConsoleOidcConfig) {}

  async authorizationUrl(sign: { state: string; nonce: string; challenge: string }): Promise<string> {
    const url = new URL((await this.discover()).authorization);
    const params = {
      response_type: 'code',
      client_id: this.config.clientId,
      redirect_uri: this.config.redirectUri,
      scope: ['openid', ...this.config.scopes].join(' '),
      state: sign.state,
      nonce: sign.nonce,
      code_challenge: sign.challenge,
      code_challenge_method: 'S256',
    };
    for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
    return url.href;
  }

  /** The verified claims of the ID token the provider gives for `code`. */
  async signIn(code: string, verifier: string, nonce: string): Promise<JWTPayload> {
    const { token, keys } = await this.discover();
    const idToken = await this.exchange(token, code, verifier);
    try {
      const { payload } = await jwtVerify(idToken, keys, {
        issuer: this.config.issuer,
        audience: this.config.clientId,
        algorithms: [...JWT_ALGORITHMS],
        requiredClaims: ['sub', 'iat', 'exp', 'nonce'],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
      });
      // OpenID Connect Core 3.1.3.7: with several audiences the token must have been issued to us.
      if (Array.isArray(payload.aud) && payload.aud.length > 1 && payload.azp !== this.config.clientId)
        throw new SignInRefused('the ID token was issued to another client (azp)');
      if (payload.nonce !== nonce) throw new SignInRefused('the ID token carries another sign-in’s nonce');
      return payload;
    } catch (err) {
      if (err instanceof SignInRefused) throw err;
      const { code: joseCode, claim } = err as { code?: string; claim?: string };
      // No jose code: the key set could not be fetched at all (a network error), the provider's fault.
      if (joseCode === undefined || joseCode === 'ERR_JWKS_TIMEOUT' || joseCode === 'ERR_JWKS_INVALID' || joseCode === 'ERR_JOSE_GENERIC')
        throw new ProviderUnavailable('the provider’s keys could not be read');
      throw new SignInRefused(`the ID token was refused (${joseCode}${claim ? `, claim ${claim}` : ''})`);
    }
  }

  private async exchange(tokenEndpoint: string, code: string, verifier: string): Promise<string> {
    const secret = process.env[this.config.clientSecretEnv];
    if (!secret) throw new ProviderUnavailable(`${this.config.clientSecretEnv} (console.oidc.clientSecretEnv) is not set`);
    // client_secret_basic (RFC 6749 §2.3.1): id and secret form-encoded before base64.
    const basic = Buffer.from(`${encodeURIComponent(this.config.clientId)}:${encodeURIComponent(secret)}`).toString('base64');
    let res: Response;
    try {
      res = await fetch(tokenEndpoint, {
        method: 'POST',
        headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          redirect_uri: this.config.redirectUri,
          code_verifier: verifier,
        }),
        redirect: 'error',
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch {
      throw new ProviderUnavailable('the token endpoint could not be reached');
    }
    const text = await readBounded(res, MAX_TOKEN_RESPONSE_BYTES).catch(() => '');
    let body: { id_token?: unknown; error?: unknown } = {};
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      // an answer that is not JSON is judged by its status below
    }
    // A refused code (used, expired, another client's, wrong verifier) is the browser's problem, not ours.
    if (res.status === 400 && typeof body.error === 'string')
      throw new SignInRefused(`the provider refused the code (${body.error.slice(0, 40)})`);
    if (res.status !== 200 || typeof body.id_token !== 'string')
      throw new ProviderUnavailable(`the token endpoint answered ${res.status} without an ID token`);
    return body.id_token;
  }

  private discover(): Promise<Endpoints> {
    this.endpoints ??= openIdConfiguration(this.config.issuer, TIMEOUT_MS).then(
      (doc) => ({
        authorization: endpointOf(doc, 'authorization_endpoint'),
        token: endpointOf(doc, 'token_endpoint'),
        keys: createRemoteJWKSet(new URL(endpointOf(doc, 'jwks_uri')), { timeoutDuration: TIMEOUT_MS }),
      }),
      (err: unknown) => {
        this.endpoints = undefined; // tried again on the next sign-in
        throw new ProviderUnavailable(`discovery failed: ${(err as Error).message}`);
      },
    );
    return this.endpoints;
  }
}
