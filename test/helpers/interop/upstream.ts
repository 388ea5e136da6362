import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A real server nobody here wrote, started by a test in front of the gateway (see ./site.ts for its routes). */
export interface InteropUpstream {
  readonly url: string;
  /** Connections the server accepted and requests it saw so far, by the server's own count. */
  counts(): Promise<UpstreamCounts>;
  stop(): Promise<void>;
}

export interface UpstreamCounts {
  connections: number;
  requests: number;
}

/** How a server in Node (node:http, Express, Fastify) is counted: its own `connection` and `request` events. */
export function countNodeServer(server: Server): () => Promise<UpstreamCounts> {
  const counts: UpstreamCounts = { connections: 0, requests: 0 };
  server.on('connection', () => counts.connections++);
  server.on('request', () => counts.requests++);
  return () => Promise.resolve({ ...counts });
}

export function urlOf(server: Server): string {
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export function closeNodeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `condition` until it holds or `boundMs` passes (a bound against hanging, never a speed check). */
export async function until(condition: () => Promise<boolean> | boolean, boundMs = 10_000): Promise<boolean> {
  const end = Date.now() + boundMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() > end) return false;
    await sleep(20);
  }
}
