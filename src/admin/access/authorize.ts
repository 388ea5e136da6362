import { KEY_ID_PATTERN } from '../../keys/format.js';
import type { KeyStore } from '../../store/key-store.js';
import { ACTIONS, refusal, type Action, type Principal } from './roles.js';

/** The parts of a call the owner of what it touches is read from. */
export interface CallParts {
  params: Record<string, string>;
  /** Pinned here to the principal's owner for a listing (the route then filters by it). */
  query: Record<string, string>;
  /** The parsed body, read once (the route gets the same object, with the owner filled in here). */
  body(): Promise<unknown>;
}

/**
 * The admin API's one enforcement point, before a route runs: null when `principal` may take the
 * route's `action` on what the call touches, else why not (a 403 insufficient_role; nothing has
 * been read for the caller, changed or audited). The owner comes from where ACTIONS says.
 */
export async function authorize(principal: Principal, action: Action, call: CallParts, keys: KeyStore): Promise<string | null> {
  const byRole = refusal(principal, action, principal.owner);
  if (byRole || principal.owner === undefined) return byRole;
  const scoped = principal.owner;
  switch (ACTIONS[action].owner) {
    case 'none':
      return null;
    case 'global':
      return refusal(principal, action, 'global');
    case 'list': {
      // A listing is filtered, not refused; asking for another owner's is refused.
      const asked = call.query.owner;
      if (asked !== undefined && asked !== scoped) return refusal(principal, action, asked);
      call.query.owner = scoped;
      return null;
    }
    case 'key': {
      const id = call.params.id ?? '';
      // An unknown or malformed id is the route's 404 to give: it names nobody's key.
      const record = KEY_ID_PATTERN.test(id) ? await keys.get(id) : undefined;
      return record ? refusal(principal, action, record.owner) : null;
    }
    case 'new-key': {
      const body = await call.body();
      if (body === null || typeof body !== 'object' || Array.isArray(body)) return null; // the route's 400
      const fields = body as Record<string, unknown>;
      if (fields.owner === undefined) fields.owner = scoped;
      return refusal(principal, action, typeof fields.owner === 'string' ? fields.owner : undefined);
    }
  }
}
