/** The line (from 1) of a config text's only line matching `pattern`, as config errors give it. */
export function lineOf(text: string, pattern: string | RegExp): number {
  const lines = text.split('\n');
  const matches = (line: string) => (typeof pattern === 'string' ? line.includes(pattern) : pattern.test(line));
  const found = lines.flatMap((line, i) => (matches(line) ? [i + 1] : []));
  if (found.length !== 1) throw new Error(`${found.length} lines match ${String(pattern)}`);
  return found[0]!;
}
