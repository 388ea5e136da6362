/** A JSON pointer token: `~` and `/` escaped (RFC 6901). */
export function escapePointer(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** The value a JSON pointer (`/a/b~1c`, percent-decoded as in a `$ref` fragment) names in `doc`, or undefined. */
export function atPointer(doc: unknown, pointer: string): unknown {
  let node = doc;
  for (const raw of pointer.split('/').slice(1)) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined;
    }
    if (!node || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/** A JSON pointer as a `$ref` fragment: each token percent-encoded, so `{id}` or `%` survive. */
export function asFragment(pointer: string): string {
  return `#${pointer
    .split('/')
    .map((token) => encodeURIComponent(token))
    .join('/')}`;
}
