import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { ROLE_NAMES } from '../config/console-schema.js';
import { cookie, cookieValue } from './cookies.js';

export const SESSION_COOKIE = 'tg_console';
export const CSRF_HEADER = 'x-csrf-token';
/** 256 random bits, base64url: session ids and sign-in states. */
export const RANDOM_ID = /^[A-Za-z0-9_-]{43}$/;
/** A session ends after this long without a request, and in any case after MAX_AGE_MS. */
export const IDLE_MS = 15 * 60_000;
export const MAX_AGE_MS = 8 * 60 * 60_000;
/** Past this many live sessions the oldest goes first: sign-ins cannot grow the heap without bound. */
const MAX_SESSIONS = 1000;

/** Who signed in: an admin token's holder or a person from the OpenID provider (admin/access/roles.ts). */
export interface SessionPrincipal {
  /** The audit's actor for every change made in this session: a token's label or an OpenID subject. */
  actor: string;
  role: (typeof ROLE_NAMES)[number];
  owner?: string;
  email?: string;
}

export interface Session {
  principal: SessionPrincipal;
  /** Sent back by the page in X-CSRF-Token on every change; bound to this session only. */
  csrf: string;
  createdAtMs: number;
  expiresAtMs: number;
  /** The latest end: MAX_AGE_MS after sign-in, or sooner when the provider's session ends sooner. */
  endsAtMs: number;
}

export type SessionCheck = { principal: SessionPrincipal } | { refused: 'no_session' | 'expired' | 'csrf' | 'cross_origin' };

/**
 * Console sign-ins, kept in this process only: the admin listener is reached on one replica at a
 * time, and a restart signs everyone out (they sign in again with their token). The cookie holds
 * only a random id (256 bits); the admin token itself is never stored, here or in the browser.
 */
export class ConsoleSessions {
  private readonly sessions = new Map<string, Session>();

  constructor(private readonly now: () => number = Date.now) {}

  /** A new session of `principal`, ending at the latest at `endsAtMs` (an OpenID provider's session end). */
  create(principal: SessionPrincipal, endsAtMs = Infinity): { id: string; session: Session } {
    this.sweep();
    while (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    const nowMs = this.now();
    const id = randomBytes(32).toString('base64url');
    const ends = Math.min(nowMs + MAX_AGE_MS, endsAtMs);
    const session = {
      principal,
      csrf: randomBytes(32).toString('base64url'),
      createdAtMs: nowMs,
      expiresAtMs: Math.min(nowMs + IDLE_MS, ends),
      endsAtMs: ends,
    };
    this.sessions.set(id, session);
    return { id, session };
  }

  /** The live session of this id, its idle time restarted; undefined when unknown or ended. */
  touch(id: string | undefined): Session | undefined {
    if (id === undefined) return undefined;
    const session = this.sessions.get(id);
    if (!session) return undefined;
    const nowMs = this.now();
    if (session.expiresAtMs <= nowMs) {
      this.sessions.delete(id);
      return undefined;
    }
    session.expiresAtMs = Math.min(nowMs + IDLE_MS, session.endsAtMs);
    return session;
  }

  /**
   * A request's session from its cookie: the actor, or why not. A change (any method but GET and
   * HEAD) must also carry the session's CSRF token: a cross-site page can make the browser send
   * the cookie (SameSite=Strict already stops that in current browsers) but cannot read the token.
   */
  check(req: IncomingMessage): SessionCheck {
    const id = sessionIdOf(req.headers.cookie);
    if (id === undefined) return { refused: 'no_session' };
    const change = req.method !== 'GET' && req.method !== 'HEAD';
    if (change && !sameOrigin(req)) return { refused: 'cross_origin' };
    const session = this.touch(id);
    if (!session) return { refused: 'expired' };
    const csrf = req.headers[CSRF_HEADER];
    if (change && !sameSecret(typeof csrf === 'string' ? csrf : '', session.csrf)) return { refused: 'csrf' };
    return { principal: session.principal };
  }

  end(id: string | undefined): void {
    if (id !== undefined) this.sessions.delete(id);
  }

  private sweep(): void {
    const nowMs = this.now();
    for (const [id, session] of this.sessions) if (session.expiresAtMs <= nowMs) this.sessions.delete(id);
  }
}

/** The session cookie of a new session: it lasts no longer than the session may. */
export function sessionCookie(req: IncomingMessage, id: string, session: Session): string {
  return cookie(req, SESSION_COOKIE, id, Math.max(1, Math.floor((session.endsAtMs - session.createdAtMs) / 1000)));
}

/** The session id of a Cookie header, or undefined. */
export function sessionIdOf(cookieHeader: string | undefined): string | undefined {
  return cookieValue(cookieHeader, SESSION_COOKIE, RANDOM_ID);
}

export function sameSecret(presented: string, expected: string): boolean {
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * False when the request names another origin than the one it was sent to (a second line of
 * defence under SameSite=Strict and the CSRF token). Browsers send Origin on every POST, PATCH and
 * DELETE; a request without one (curl) is not a browser's cross-site request.
 */
export function sameOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  const host = req.headers.host;
  return host !== undefined && (origin === `http://${host}` || origin === `https://${host}`);
}
