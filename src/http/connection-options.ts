/**
 * The field names a `Connection` header lists (RFC 9110 §7.6.1: connection options, hop-by-hop
 * for this one connection), lower-cased; undefined when there is no such header.
 */
export function connectionOptions(value: string | string[] | undefined): string[] | undefined {
  if (typeof value !== 'string') return undefined;
  return value
    .toLowerCase()
    .split(',')
    .map((name) => name.trim());
}
