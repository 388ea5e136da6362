import { createHash, randomBytes } from 'node:crypto';

/** A sign-in must come back from the provider within this time. */
export const PENDING_MS = 10 * 60_000;
/** Past this many sign-ins under way the oldest goes first: starts cannot grow the heap without bound. */
const MAX_PENDING = 1000;

/** What a sign-in under way remembers until the provider sends the browser back. */
export interface PendingSignIn {
  /** Sent to the provider; must come back inside the ID token (a token minted for another sign-in is refused). */
  nonce: string;
  /** PKCE (RFC 7636): only the one who started the sign-in can redeem its code. */
  verifier: string;
  /** Where the console goes once signed in: a path of the console, checked at the start. */
  returnTo: string;
  startedAtMs: number;
}

/**
 * Sign-ins under way, by their `state`, in this process only (like the sessions they end in). Each
 * state is taken once: a callback replayed with a state already used, unknown or too old is
 * refused.
 */
export class PendingSignIns {
  private readonly pending = new Map<string, PendingSignIn>();

  constructor(private readonly now: () => number = Date.now) {}

  start(returnTo: string): { state: string; nonce: string; challenge: string } {
    const nowMs = this.now();
    for (const [state, entry] of this.pending) if (entry.startedAtMs + PENDING_MS <= nowMs) this.pending.delete(state);
    while (this.pending.size >= MAX_PENDING) this.pending.delete(this.pending.keys().next().value!);
    const state = random();
    const entry = { nonce: random(), verifier: random(), returnTo, startedAtMs: nowMs };
    this.pending.set(state, entry);
    return { state, nonce: entry.nonce, challenge: createHash('sha256').update(entry.verifier).digest('base64url') };
  }

  /** The sign-in of `state`, removed: undefined when unknown, already taken or too old. */
  take(state: string): PendingSignIn | undefined {
    const entry = this.pending.get(state);
    if (!entry) return undefined;
    this.pending.delete(state);
    return entry.startedAtMs + PENDING_MS > this.now() ? entry : undefined;
  }
}

function random(): string {
  return randomBytes(32).toString('base64url');
}
