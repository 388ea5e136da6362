import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lineOf } from '../helpers/config-lines.js';
import { call, EdgeRulesStack } from '../helpers/edge-rules-stack.js';

// A gateway.yaml reload with several mistakes is refused whole: the log names every mistake with
// its field and line, and the config in force before keeps serving.

const withMistakes = (yaml: string) =>
  yaml.replace(/^( {2}deny: )\[\]/m, '$1[10.0.0.0/40]').replace(/^( {2}perMinute: )60( +# failed authentications)/m, '$10$2');

describe('a refused reload of a config file with several mistakes', () => {
  let stack: EdgeRulesStack;

  beforeAll(async () => {
    stack = await EdgeRulesStack.start((yaml) => yaml);
  }, 120_000);
  afterAll(() => stack?.close());

  it('logs every mistake with its line, and the previous config stays in force', async () => {
    const refused = await stack.reload(withMistakes, 'config reload refused');
    const text = withMistakes(stack.shipped);
    const errors = refused.errors as string[];
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/^gateway\.yaml: unauthenticated\.perMinute: .*>=1/);
    expect(errors[0]).toContain(`(line ${lineOf(text, /^ {2}perMinute: 0 /)})`);
    expect(errors[1]).toBe(
      `gateway.yaml: ipRules.deny.0: "10.0.0.0/40": an IPv4 prefix length is at most 32 (line ${lineOf(text, 'deny: [10.0.0.0/40]')})`,
    );
    expect(refused.error).toBe(errors.join('\n'));
    expect((await call(`${stack.gateway.url}/v1/openapi.json`)).status).toBe(200);
  });
});
