const CONSOLE = '/admin/console';

/**
 * Where the console may send a browser after sign-in: a path of the console itself, never another
 * site (an open redirect would lend the console's name to a phishing page). Absent: the console's
 * page. Null when refused.
 */
export function consoleReturnPath(value: string | undefined): string | null {
  if (value === undefined || value === '') return `${CONSOLE}/`;
  if (value.length > 512 || !value.startsWith(`${CONSOLE}/`) || /[\\\u0000-\u001f\u007f]/.test(value)) return null;
  // Resolved as a browser would: whatever it is, it must stay on this origin and under the console.
  const base = 'http://console.invalid';
  const resolved = new URL(value, base);
  if (resolved.origin !== base || !resolved.pathname.startsWith(`${CONSOLE}/`)) return null;
  return `${resolved.pathname}${resolved.search}${resolved.hash}`;
}
