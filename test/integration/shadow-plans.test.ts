import { describe, expect, it } from 'vitest';
import { pollUntil } from '../helpers/poll.js';
import { quotaStack } from '../helpers/quota-stack.js';
import { bearer, keysCli } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// Shadow plans (docs/clients.md, "Shadow plans"): decided and counted as usual, but a would-be refusal is
// admitted, and shows in tollgate_quota_decisions_total{decision="shadow_limited"}, in the access
// log and in X-RateLimit-Shadow. Shadow refusals never ban. Three gateways on one Redis, and
// `tollgate up` on the embedded store. Days as small as minutes: a minute edge changes nothing.

const PLANS = `
plans:
  trial: { perMinute: 2, perDay: 2, shadow: true }
  tiny:  { perMinute: 2, perDay: 2 }
ban: { afterRejections: 2, window: 600, duration: 600 }
`;
const stack = quotaStack(PLANS);

/** Sum of one quota-decision counter over the three Redis gateways. */
async function decisions(plan: string, decision: string): Promise<number> {
  let total = 0;
  for (const g of stack.gateways()) {
    const text = await (await fetch(`${g.adminUrl}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (
        line.startsWith('tollgate_quota_decisions_total{') &&
        line.includes(`plan="${plan}"`) &&
        line.includes(`decision="${decision}"`)
      ) {
        total += Number(line.split(' ').at(-1));
      }
    }
  }
  return total;
}

/** Six requests one at a time: all admitted, the last four told what the plan would have answered. */
async function sixAdmitted(send: (i: number) => Promise<Response>) {
  const answers = [];
  for (let i = 0; i < 6; i++) answers.push(await send(i));
  expect(answers.map((r) => r.status)).toEqual(Array(6).fill(200));
  expect(answers.map((r) => r.headers.get('x-ratelimit-shadow'))).toEqual([null, null, ...Array(4).fill('rate_limit_exceeded')]);
  // The headers tell the shadow plan's truth (nothing left), with no Retry-After on an admitted answer.
  expect(answers.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['1', '0', '0', '0', '0', '0']);
  expect(answers.every((r) => !r.headers.has('retry-after'))).toBe(true);
}

describe('shadow plans across three replicas on Redis', () => {
  it('admit what the plan would refuse, and count, log and tell it, with no ban however many', async () => {
    await awayFromDayEdge(20);
    const before = await decisions('trial', 'shadow_limited');
    const key = await stack.newKey(['--plan', 'trial']);
    await sixAdmitted((i) => stack.send(key.key, i));
    expect((await decisions('trial', 'shadow_limited')) - before).toBe(4);
    // The access log line is written when the response closes, in batches: wait for all four.
    const shadowRefused = () =>
      stack
        .gateways()
        .flatMap((g) => g.process.logs().filter((l) => l.msg === 'request' && l.keyId === key.id))
        .filter((l) => l.shadowRefusal === 'rate_limit_exceeded');
    const logged = await pollUntil(
      async () => shadowRefused(),
      (lines) => lines.length >= 4,
      { deadline: Date.now() + 30_000 },
    );
    expect(logged).toHaveLength(4);
    const usage = JSON.parse((await keysCli(stack.redis(), ['usage', key.id, '--json'], stack.configDir())).stdout);
    expect(usage).toMatchObject({ bannedUntil: null, day: { used: 2 } });
  });

  it('apply to a key made shadow on its own (keys create --shadow, keys set-quota --shadow)', async () => {
    await awayFromDayEdge(20);
    const key = await stack.newKey(['--plan', 'tiny', '--shadow']);
    await sixAdmitted((i) => stack.send(key.key, i));

    // A key of the same plan without the override is refused and banned at the 2nd refusal...
    const plain = await stack.newKey(['--plan', 'tiny']);
    const codes = [];
    for (let i = 0; i < 4; i++) {
      const res = await stack.send(plain.key, i);
      codes.push(res.status === 200 ? 'ok' : (await res.json()).code);
    }
    expect(codes).toEqual(['ok', 'ok', 'rate_limit_exceeded', 'api_key_banned']);
    // ...and a shadow override admits even a banned key, telling why it would not have.
    expect((await keysCli(stack.redis(), ['set-quota', plain.id, '--shadow'], stack.configDir())).code).toBe(0);
    // Replica 0 answered the ban and holds it in memory until the pushed change reaches it; asked
    // meanwhile, it answers from memory and counts nothing.
    const res = await pollUntil(
      () => stack.send(plain.key, 0),
      (r) => r.status === 200,
      { deadline: Date.now() + 30_000 },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-shadow')).toBe('api_key_banned');
  });
});

describe('shadow plans on the embedded store', () => {
  it('behave the same in `tollgate up`', async () => {
    await awayFromDayEdge(20);
    const { url, keyOf } = stack.embedded();
    const key = keyOf('trial');
    await sixAdmitted(() => fetch(`${url}/v1/categories`, { headers: bearer(key) }));
  });
});
