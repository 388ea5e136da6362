import { describe, expect, it } from 'vitest';
import { gatewayFileSchema } from '../../src/config/gateway-schema.js';
import { validated } from '../../src/config/load.js';

// The `jwt:` section of gateway.yaml: strict, and refused at load with the file and field named.

const issuer = (extra: Record<string, unknown> = {}) => ({
  name: 'pets-idp',
  issuer: 'https://idp.example/realms/pets',
  jwksUri: 'https://idp.example/realms/pets/protocol/openid-connect/certs',
  audiences: ['pets-api'],
  plan: { claim: 'plan', map: { gold: 'pro' }, default: 'free' },
  ...extra,
});
const load = (...issuers: object[]) => validated('gateway.yaml', gatewayFileSchema, { jwt: { issuers } });
const refusal = (...issuers: object[]) => {
  try {
    load(...issuers);
  } catch (err) {
    return (err as Error).message;
  }
  return 'accepted';
};

describe('jwt config', () => {
  it('takes the issue example with its defaults', () => {
    const [parsed] = load(issuer()).jwt!.issuers;
    expect(parsed).toMatchObject({
      algorithms: ['RS256', 'ES256', 'EdDSA'],
      subject: 'sub',
      clockSkewSeconds: 30,
      forwardToken: false,
      discovery: false,
    });
  });

  it('refuses HMAC and none, naming file and field', () => {
    expect(refusal(issuer({ algorithms: ['RS256', 'HS256'] }))).toMatch(
      /^gateway\.yaml: jwt\.issuers\.0\.algorithms\.1: "HS256": HMAC algorithms are refused/,
    );
    expect(refusal(issuer({ algorithms: ['none'] }))).toMatch(/jwt\.issuers\.0\.algorithms\.0: "none": "none" is refused/);
  });

  it('wants exactly one of jwksUri and discovery', () => {
    expect(refusal(issuer({ discovery: true }))).toMatch(/jwt\.issuers\.0\.jwksUri: set either jwksUri or discovery: true/);
    expect(refusal(issuer({ jwksUri: undefined }))).toMatch(/set either jwksUri or discovery/);
    expect(refusal(issuer({ jwksUri: undefined, discovery: true }))).toBe('accepted');
  });

  it('wants keys over https, plain http only on loopback', () => {
    expect(refusal(issuer({ jwksUri: 'http://idp.example/certs' }))).toMatch(/jwt\.issuers\.0\.jwksUri: must be https:\/\//);
    expect(refusal(issuer({ jwksUri: 'http://127.0.0.1:8080/certs' }))).toBe('accepted');
  });

  it('refuses a bad name, an unknown field, duplicate names and duplicate issuers', () => {
    expect(refusal(issuer({ name: 'Pets IdP' }))).toMatch(/jwt\.issuers\.0\.name: must be 1-32 of a-z/);
    expect(refusal(issuer({ audience: 'x' }))).toMatch(/jwt\.issuers\.0/);
    expect(refusal(issuer(), issuer({ issuer: 'https://other.example' }))).toMatch(/jwt\.issuers\.1\.name: "pets-idp" is named twice/);
    expect(refusal(issuer(), issuer({ name: 'other' }))).toMatch(/jwt\.issuers\.1\.issuer: .* is configured twice/);
  });

  it('wants audiences and a default plan', () => {
    expect(refusal(issuer({ audiences: [] }))).toMatch(/jwt\.issuers\.0\.audiences/);
    expect(refusal(issuer({ plan: { claim: 'plan' } }))).toMatch(/jwt\.issuers\.0\.plan\.default/);
  });
});
