import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { admin, ADMIN_TOKENS, OPS_TOKEN } from '../helpers/admin-client.js';
import { leasedRequests } from '../helpers/gcra-leases.js';
import { pollUntil } from '../helpers/poll.js';
import { threeGateways } from '../helpers/quota-stack.js';
import { bearer, configCopy, keysCli, slackRedisTimeout } from '../helpers/stack.js';

// Prepaid credits (plans.yaml `credits: required`) on three real gateways sharing one real
// redis-server, gateway.yaml as shipped (quota leases on) but for a key counted hot from 5 requests
// a second instead of 50, so that the loops below use leases however loaded the machine is (at
// load 20 they did not reach 50 a second, and the leased path went untested): each admitted request spends its
// cost from the balance, in the quota script's step or from a lease's block of credits taken from it
// (quota-leases.ts, rule 14), a request the balance cannot cover is refused 402 (after a recall of the
// blocks out) and spends nothing, and the balance never goes below zero. Balances change only
// through the CLI here (audited with the actor and the reason).

const PLANS = (later = '') => `
plans:
  prepaid:      { perMinute: 100000, perDay: 100000000, credits: required }
  prepaidowner: { perMinute: 100000, perDay: 100000000, credits: required, scope: owner }
  plain:        { perMinute: 100000, perDay: 100000000 }
  later:        { perMinute: 100000, perDay: 100000000${later} }
ban:
  afterRejections: 20
  window: 60
  duration: 60
`;

const VIEWER = `viewer:viewer:${'viewer-token-0123456789abcdefghijklmnopqr'}`;
const hotSooner = (text: string) => {
  const edited = slackRedisTimeout(text).replace(/^( {2}leases: \{ enabled: true)( \})/m, '$1, hotPerSecond: 5$2');
  if (!edited.includes('hotPerSecond: 5')) throw new Error('gateway.yaml no longer has the quota.leases line this test edits');
  return edited;
};
const stack = threeGateways(() => configCopy({ 'plans.yaml': () => PLANS(), 'gateway.yaml': hotSooner }), {
  TOLLGATE_ADMIN_TOKENS: `${ADMIN_TOKENS},${VIEWER}`,
});
const cli = async (args: string[]) => {
  const result = await keysCli(stack.redis(), [...args, '--json'], stack.configDir());
  return { ...result, json: result.code === 0 ? (JSON.parse(result.stdout) as Record<string, unknown>) : undefined };
};

interface Answer {
  status: number;
  code?: string;
  credits: string | null;
  retryAfter: string | null;
}

/** An answer of `loops`, with the admissions every loop had been answered before it was sent. */
type Timed = Answer & { admittedBefore: number };

async function answerOf(res: Response): Promise<Answer> {
  const body = await res.text();
  const code = res.status === 200 ? undefined : (JSON.parse(body) as { code?: string }).code;
  return { status: res.status, code, credits: res.headers.get('tollgate-credits-remaining'), retryAfter: res.headers.get('retry-after') };
}

/**
 * `perGateway` loops on each of the three gateways, each sending `key`'s requests one after another
 * until its first refusal. A 503 gateway_overloaded (a replica too busy to hear Redis in time sheds
 * the request, counting and spending nothing: enforce-quota.ts) is no refusal: the loop sends again.
 */
async function loops(key: string, perGateway: number): Promise<Timed[]> {
  const answers: Timed[] = [];
  let admitted = 0;
  await Promise.all(
    Array.from({ length: 3 * perGateway }, async (_, loop) => {
      for (;;) {
        const admittedBefore = admitted;
        const answer = await answerOf(await stack.send(key, loop % 3));
        if (answer.status === 503 && answer.code === 'gateway_overloaded') continue;
        if (answer.status === 200) admitted++;
        answers.push({ ...answer, admittedBefore });
        if (answer.status !== 200) return;
      }
    }),
  );
  return answers;
}

describe('prepaid credits with leases on, over three gateways', { timeout: 300_000 }, () => {
  it('admits exactly the balance under 3 × 30 concurrent loops, never below zero, then 402 insufficient_credits', async () => {
    const key = await stack.newKey(['--plan', 'prepaid']);
    const added = await cli(['credits', 'add', key.id, '500', '--reason', 'order 1001 paid']);
    expect(added.json).toMatchObject({ id: key.id, credits: 500, required: true });

    const leasedBefore = await leasedRequests(stack);
    const answers = await loops(key.key, 30);
    // Hot: some were admitted from blocks of credits the gateways leased (quota-leases.ts, rule 14).
    expect((await leasedRequests(stack)) - leasedBefore).toBeGreaterThan(0);
    const admitted = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status !== 200);
    expect(admitted).toHaveLength(500);
    // The balance told never exceeds what was truly left: the requests admitted before it was sent,
    // and itself, had spent theirs (a leased answer tells Redis's balance plus its own block's
    // unused credits; the others' blocks are left out).
    for (const answer of admitted) expect(Number(answer.credits)).toBeLessThanOrEqual(499 - answer.admittedBefore);
    expect(Math.min(...admitted.map((a) => Number(a.credits)))).toBe(0);
    // Every loop ended on a 402 (none on a 429: a refusal for credits counts towards no ban).
    expect(refused).toHaveLength(90);
    for (const answer of refused)
      expect(answer).toEqual({
        status: 402,
        code: 'insufficient_credits',
        credits: '0',
        retryAfter: null,
        admittedBefore: expect.any(Number),
      });

    // The spent total equals the balance change, and the windows counted the same units.
    expect((await cli(['credits', 'show', key.id])).json).toMatchObject({ credits: 0 });
    const usage = await cli(['usage', key.id]);
    expect(usage.json).toMatchObject({ credits: 0, minute: expect.anything(), day: { used: 500 } });

    // A top-up lets requests through again.
    await cli(['credits', 'add', key.id, '2', '--reason', 'goodwill']);
    expect((await answerOf(await stack.send(key.key, 1))).credits).toBe('1');
  });

  it('set, add and show through the CLI, audited with actor and reason; a change below zero is refused whole', async () => {
    const key = await stack.newKey(['--plan', 'prepaid']);
    expect((await cli(['credits', 'set', key.id, '7', '--reason', 'migrated balance'])).json).toMatchObject({ credits: 7 });
    expect((await cli(['credits', 'add', key.id, '-3', '--reason', 'refund reversed'])).json).toMatchObject({ credits: 4 });
    const below = await cli(['credits', 'add', key.id, '-5', '--reason', 'too much']);
    expect(below.code).not.toBe(0);
    expect(below.stderr).toMatch(/below zero/);
    const noReason = await cli(['credits', 'add', key.id, '5']);
    expect(noReason.code).not.toBe(0);
    expect(noReason.stderr).toMatch(/--reason/);
    expect((await cli(['credits', 'show', key.id])).json).toMatchObject({ credits: 4 });

    const audit = (await cli(['audit', '--limit', '20'])).json as { entries: Array<Record<string, unknown>> };
    const mine = audit.entries.filter((e) => e.keyId === key.id && e.action === 'key.credits');
    expect(mine.map((e) => [e.actor, e.reason, e.changes])).toEqual([
      ['cli', 'refund reversed', { credits: { before: 7, after: 4 } }],
      ['cli', 'migrated balance', { credits: { before: 0, after: 7 } }],
    ]);

    // The balance on every answer and in the key's own usage.
    const res = await stack.send(key.key, 0);
    expect(res.headers.get('tollgate-credits-remaining')).toBe('3');
    const usage = (await (await stack.send(key.key, 2, '/v1/usage')).json()) as { credits: number };
    expect(usage.credits).toBe(3);
  });

  it('an owner-scoped plan spends the owner’s one balance from all of its keys; a plan without credits shows none', async () => {
    const owner = `acme-${Date.now()}`;
    const first = await stack.newKey(['--plan', 'prepaidowner', '--owner', owner]);
    const second = await stack.newKey(['--plan', 'prepaidowner', '--owner', owner]);
    expect((await cli(['credits', 'add', first.id, '3', '--reason', 'owner top-up'])).json).toMatchObject({ subject: `owner:${owner}` });
    const answers = [];
    for (const key of [first, second, second, first]) answers.push(await answerOf(await stack.send(key.key, answers.length)));
    expect(answers.map((a) => [a.status, a.credits])).toEqual([
      [200, '2'],
      [200, '1'],
      [200, '0'],
      [402, '0'],
    ]);
    const plain = await stack.newKey(['--plan', 'plain']);
    const res = await stack.send(plain.key, 0);
    expect(res.status).toBe(200);
    expect(res.headers.get('tollgate-credits-remaining')).toBeNull();
  });

  it('the admin API reads and changes the balance: an operator (or admin) may change it, a viewer only read it', async () => {
    const key = await stack.newKey(['--plan', 'prepaid']);
    const adminUrl = stack.gateways()[1]!.adminUrl;
    const viewer = VIEWER.split(':')[2]!;
    const changed = await admin(adminUrl, 'POST', `/keys/${key.id}/credits`, {
      token: OPS_TOKEN,
      body: { add: 2, reason: 'api top-up' },
    });
    expect([changed.status, changed.body]).toEqual([200, { id: key.id, subject: key.id, credits: 2, required: true }]);
    const refused = await admin(adminUrl, 'POST', `/keys/${key.id}/credits`, { token: viewer, body: { add: 2, reason: 'no' } });
    expect(refused.status).toBe(403);
    const below = await admin(adminUrl, 'POST', `/keys/${key.id}/credits`, {
      token: OPS_TOKEN,
      body: { add: -3, reason: 'too much' },
    });
    expect([below.status, below.body.code]).toEqual([409, 'credits_below_zero']);
    const noReason = await admin(adminUrl, 'POST', `/keys/${key.id}/credits`, { token: OPS_TOKEN, body: { set: 1 } });
    expect([noReason.status, noReason.body.code]).toEqual([400, 'invalid_body']);
    // Spent through another replica: every replica reads the one balance.
    expect((await stack.send(key.key, 0)).headers.get('tollgate-credits-remaining')).toBe('1');
    const read = await admin(adminUrl, 'GET', `/keys/${key.id}/credits`, { token: viewer });
    expect([read.status, read.body.credits]).toEqual([200, 1]);
    const audit = await admin(adminUrl, 'GET', '/audit?limit=50', { token: OPS_TOKEN });
    const entry = (audit.body.entries as Array<Record<string, unknown>>).find((e) => e.keyId === key.id && e.action === 'key.credits');
    expect(entry).toMatchObject({ actor: 'ops', reason: 'api top-up', changes: { credits: { before: 0, after: 2 } } });
  });

  // Last: it changes plans.yaml under the gateways.
  it('a plans reload that requires credits takes effect on every gateway without a restart', async () => {
    const key = await stack.newKey(['--plan', 'later']);
    await cli(['credits', 'set', key.id, '2', '--reason', 'before the plan needs it']);
    const before = await stack.send(key.key, 0);
    expect([before.status, before.headers.get('tollgate-credits-remaining')]).toEqual([200, null]);
    writeFileSync(join(stack.configDir(), 'plans.yaml'), PLANS(', credits: required'));
    // A usage read spends nothing: it shows when each gateway has the new plans.
    const deadline = Date.now() + 60_000;
    for (const gateway of stack.gateways()) {
      const told = await pollUntil(
        async () => (await fetch(`${gateway.url}/v1/usage`, { headers: bearer(key.key) })).headers.get('tollgate-credits-remaining'),
        (credits) => credits !== null,
        { deadline },
      );
      expect(told).toBe('2');
    }
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await answerOf(await stack.send(key.key, i)));
    expect(answers.map((a) => [a.status, a.credits])).toEqual([
      [200, '1'],
      [200, '0'],
      [402, '0'],
    ]);
  });
});
