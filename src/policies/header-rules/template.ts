/** The variables a header value may use, and where each comes from. */
export const HEADER_VARIABLES = ['consumer.id', 'consumer.plan', 'request.id'] as const;
export type HeaderVariable = (typeof HEADER_VARIABLES)[number];

/** The values of one request. Each is made of safe characters (a key id, a plan name, a checked request id). */
export type HeaderValues = Readonly<Record<HeaderVariable, string>>;

const VARIABLE = /\$\{([^}]*)\}/g;

/** A header value compiled once: a constant, or literal parts around variables. */
export type CompiledValue = string | ((values: HeaderValues) => string);

/** `"v2-${consumer.plan}"` → a function of the request's values; an unknown variable → its reason. */
export function compileValue(text: string): CompiledValue | { error: string } {
  const literals: string[] = [];
  const variables: HeaderVariable[] = [];
  let last = 0;
  for (const match of text.matchAll(VARIABLE)) {
    const name = match[1]!;
    if (!(HEADER_VARIABLES as readonly string[]).includes(name))
      return { error: `unknown variable \${${name.slice(0, 40)}} (known: ${HEADER_VARIABLES.map((v) => `\${${v}}`).join(', ')})` };
    literals.push(text.slice(last, match.index));
    variables.push(name as HeaderVariable);
    last = match.index + match[0].length;
  }
  if (variables.length === 0) return text;
  const tail = text.slice(last);
  return (values) => {
    let out = '';
    for (let i = 0; i < variables.length; i++) out += literals[i]! + values[variables[i]!];
    return out + tail;
  };
}
