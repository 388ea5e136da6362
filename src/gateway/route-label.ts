/**
 * A bounded metrics label for a request path: `/v1/pets/123` → `/v1/pets/{param}`. Numeric, id-like,
 * long or unusual segments become `{param}`, at most four segments are kept, and after `maxLabels`
 * distinct labels anything new is `other`, so clients sending random paths cannot blow up the
 * metrics' cardinality.
 */
export function routeLabeler(maxLabels = 100): (url: string | undefined) => string {
  const seen = new Set<string>();
  // Most requests repeat a few URLs: remember their labels (bounded; cleared when full).
  const byUrl = new Map<string, string>();
  return (url = '/') => {
    const known = byUrl.get(url);
    if (known !== undefined) return known;
    const label = labelOf(url);
    if (byUrl.size >= 1000) byUrl.clear();
    byUrl.set(url, label);
    return label;
  };

  function labelOf(url: string): string {
    const path = url.split('?', 1)[0]!;
    const segments = path.split('/').filter(Boolean).slice(0, 4);
    const label = '/' + segments.map((s) => (isParam(s) ? '{param}' : s)).join('/');
    if (seen.has(label)) return label;
    if (seen.size >= maxLabels) return 'other';
    seen.add(label);
    return label;
  }
}

/** Numbers, id-like tokens (digits in six or more characters), long or unusual segments. */
function isParam(segment: string): boolean {
  return (
    /^\d+$/.test(segment) ||
    (segment.length >= 6 && /\d/.test(segment)) ||
    segment.length > 24 ||
    !/^[A-Za-z0-9._-]+$/.test(segment)
  );
}
