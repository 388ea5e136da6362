import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { clientAddressOf } from '../../src/http/client-address.js';

const request = (peer: string, xff?: string | string[]) =>
  ({ socket: { remoteAddress: peer }, headers: xff === undefined ? {} : { 'x-forwarded-for': xff } }) as unknown as IncomingMessage;

describe('client address for per-address limits', () => {
  it('is the socket peer when no proxy is trusted, whatever X-Forwarded-For says', () => {
    expect(clientAddressOf(request('10.0.0.5', '203.0.113.9'), 0)).toBe('10.0.0.5');
  });

  it('is the entry the trusted load balancer appended, not one the client sent', () => {
    // The client sent "198.51.100.1"; nginx appended the address it saw.
    expect(clientAddressOf(request('10.0.0.2', '198.51.100.1, 203.0.113.9'), 1)).toBe('203.0.113.9');
    expect(clientAddressOf(request('10.0.0.2', ['198.51.100.1', '203.0.113.9']), 1)).toBe('203.0.113.9');
    expect(clientAddressOf(request('10.0.0.2', '198.51.100.1, 203.0.113.9, 10.0.0.3'), 2)).toBe('203.0.113.9');
  });

  it('falls back to the peer when the header is missing, too short or not an address', () => {
    expect(clientAddressOf(request('10.0.0.2'), 1)).toBe('10.0.0.2');
    expect(clientAddressOf(request('10.0.0.2', '203.0.113.9'), 2)).toBe('10.0.0.2');
    expect(clientAddressOf(request('10.0.0.2', 'garbage'), 1)).toBe('10.0.0.2');
  });
});
