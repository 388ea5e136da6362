import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { clientAddressOf } from '../../src/http/client-address.js';
import { forwardedValues } from '../../src/http/forwarded-headers.js';
import { ProxyTrust } from '../../src/http/proxy-trust.js';

const request = (peer: string, xff?: string | string[]) =>
  ({ socket: { remoteAddress: peer }, headers: xff === undefined ? {} : { 'x-forwarded-for': xff } }) as unknown as IncomingMessage;

const hops = (count: number) => new ProxyTrust({ trustProxyHops: count, trustedProxies: [] });
const networks = (...cidrs: string[]) => new ProxyTrust({ trustProxyHops: 0, trustedProxies: cidrs });

describe('client address for per-address limits', () => {
  it('is the socket peer when no proxy is trusted, whatever X-Forwarded-For says', () => {
    expect(clientAddressOf(request('10.0.0.5', '203.0.113.9'), hops(0))).toBe('10.0.0.5');
    expect(clientAddressOf(request('10.0.0.5', '203.0.113.9'), ProxyTrust.none)).toBe('10.0.0.5');
  });

  it('is the entry the trusted load balancer appended, not one the client sent', () => {
    // The client sent "198.51.100.1"; nginx appended the address it saw.
    expect(clientAddressOf(request('10.0.0.2', '198.51.100.1, 203.0.113.9'), hops(1))).toBe('203.0.113.9');
    expect(clientAddressOf(request('10.0.0.2', ['198.51.100.1', '203.0.113.9']), hops(1))).toBe('203.0.113.9');
    expect(clientAddressOf(request('10.0.0.2', '198.51.100.1, 203.0.113.9, 10.0.0.3'), hops(2))).toBe('203.0.113.9');
  });

  it('falls back to the peer when the header is missing, too short or not an address', () => {
    expect(clientAddressOf(request('10.0.0.2'), hops(1))).toBe('10.0.0.2');
    expect(clientAddressOf(request('10.0.0.2', '203.0.113.9'), hops(2))).toBe('10.0.0.2');
    expect(clientAddressOf(request('10.0.0.2', 'garbage'), hops(1))).toBe('10.0.0.2');
  });
});

describe('client address with trusted proxy networks', () => {
  it('is the socket peer when the peer is not a trusted proxy, whatever X-Forwarded-For says', () => {
    expect(clientAddressOf(request('203.0.113.7', '198.51.100.1'), networks('10.0.0.0/8'))).toBe('203.0.113.7');
  });

  it('is the right-most X-Forwarded-For entry outside the trusted networks', () => {
    const trust = networks('10.0.0.0/8', '192.168.0.0/16');
    // The client wrote 198.51.100.1 itself; 203.0.113.9 reached the outer proxy 192.168.1.1, which reached 10.0.0.2.
    expect(clientAddressOf(request('10.0.0.2', '198.51.100.1, 203.0.113.9, 192.168.1.1'), trust)).toBe('203.0.113.9');
    expect(clientAddressOf(request('10.0.0.2', ['198.51.100.1', '203.0.113.9']), trust)).toBe('203.0.113.9');
  });

  it('compares IPv4-mapped IPv6 peers as their IPv4 address, and matches IPv6 networks', () => {
    expect(clientAddressOf(request('::ffff:10.0.0.2', '203.0.113.9'), networks('10.0.0.0/8'))).toBe('203.0.113.9');
    expect(clientAddressOf(request('fd00::1', '2001:db8::5'), networks('fd00::/8'))).toBe('2001:db8::5');
  });

  it('is the left-most entry when every hop is trusted, and the peer without the header', () => {
    expect(clientAddressOf(request('10.0.0.2', '10.1.1.1, 10.2.2.2'), networks('10.0.0.0/8'))).toBe('10.1.1.1');
    expect(clientAddressOf(request('10.0.0.2'), networks('10.0.0.0/8'))).toBe('10.0.0.2');
  });

  it('stops at an entry that is not an address: the request counts under the proxy that wrote it', () => {
    expect(clientAddressOf(request('10.0.0.2', '203.0.113.9, garbage'), networks('10.0.0.0/8'))).toBe('10.0.0.2');
    expect(clientAddressOf(request('10.0.0.2', 'garbage, 10.0.0.9'), networks('10.0.0.0/8'))).toBe('10.0.0.9');
  });
});

describe('X-Forwarded-For sent upstream with trusted proxy networks', () => {
  it('keeps the entries from the client rightwards and appends the peer; what the client wrote is dropped', () => {
    const trust = networks('10.0.0.0/8');
    expect(forwardedValues(request('10.0.0.2', '198.51.100.1, 203.0.113.9, 10.0.0.3'), trust, 'h')['x-forwarded-for']).toBe(
      '203.0.113.9, 10.0.0.3, 10.0.0.2',
    );
    expect(forwardedValues(request('203.0.113.7', '198.51.100.1'), trust, 'h')['x-forwarded-for']).toBe('203.0.113.7');
  });
});
