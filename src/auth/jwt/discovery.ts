import { endpointOf, openIdConfiguration } from '../../http/openid-discovery.js';

/** The jwks_uri of an OpenID Provider, from its discovery document (http/openid-discovery.ts). */
export async function discoverJwksUri(issuer: string, timeoutMs = 5000): Promise<string> {
  return endpointOf(await openIdConfiguration(issuer, timeoutMs), 'jwks_uri');
}
