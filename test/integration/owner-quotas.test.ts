import { describe, expect, it } from 'vitest';
import { pollUntil } from '../helpers/poll.js';
import { quotaStack } from '../helpers/quota-stack.js';
import { bearer, keysCli } from '../helpers/stack.js';
import { awayFromDayEdge } from '../helpers/windows.js';

// Owner quotas: under a `scope: owner` plan every key of one owner (`keys create --owner`) counts
// against one set of windows and one ban state, kept under the owner's hash tag. Three gateways on
// one Redis, and `tollgate up` on the embedded store (whose demo keys share the owner "demo").
// Days as small as minutes: a minute edge changes nothing.

const PLANS = `
plans:
  team:  { perMinute: 5, perDay: 5, scope: owner }
  teamb: { perMinute: 5, perDay: 5, scope: owner }
ban: { afterRejections: 3, window: 600, duration: 600 }
`;
const stack = quotaStack(PLANS);

const codeOf = async (res: Response) => (res.status === 200 ? 'ok' : ((await res.json()) as { code: string }).code);

describe('owner quotas across three replicas on Redis', () => {
  it('share one set of windows and one ban among the keys of an owner, and only them', async () => {
    await awayFromDayEdge(20);
    const [a, b, other, ownerless] = await Promise.all([
      stack.newKey(['--plan', 'team', '--owner', 'acme']),
      stack.newKey(['--plan', 'team', '--owner', 'acme']),
      stack.newKey(['--plan', 'team', '--owner', 'globex']),
      stack.newKey(['--plan', 'team']),
    ]);
    const rush = await Promise.all(Array.from({ length: 20 }, (_, i) => stack.send((i % 2 ? a : b).key, i).then(codeOf)));
    const count = (codes: string[], code: string) => codes.filter((c) => c === code).length;
    expect([count(rush, 'ok'), count(rush, 'rate_limit_exceeded'), count(rush, 'api_key_banned')]).toEqual([5, 2, 13]);
    // The ban is the owner's: both keys are banned, on every replica.
    for (let i = 0; i < 3; i++) expect(await codeOf(await stack.send(a.key, i))).toBe('api_key_banned');
    for (let i = 0; i < 3; i++) expect(await codeOf(await stack.send(b.key, i))).toBe('api_key_banned');

    // Another owner and a key without one have windows of their own.
    for (const key of [other, ownerless]) {
      const codes = [];
      for (let i = 0; i < 7; i++) codes.push(await codeOf(await stack.send(key.key, i)));
      expect(codes).toEqual([...Array(5).fill('ok'), 'rate_limit_exceeded', 'rate_limit_exceeded']);
    }

    // One state in Redis, under the owner's hash tag (one Cluster slot).
    const client = stack.redis().client();
    expect(await client.hget('tg:quota:{owner:acme}', 'dc')).toBe('5');
    expect(await client.exists(`tg:quota:{${a.id}}`, `tg:quota:{${b.id}}`)).toBe(0);
    client.disconnect();

    // Usage of either key shows the owner's; unbanning one key lifts the owner's ban for both.
    const usage = JSON.parse((await keysCli(stack.redis(), ['usage', a.id, '--json'], stack.configDir())).stdout);
    expect(usage).toMatchObject({ day: { used: 5 }, bannedUntil: expect.any(String) });
    const unban = await keysCli(stack.redis(), ['unban', b.id], stack.configDir());
    expect(unban.stdout).toContain('ban lifted');
    // (Two refusals: the third would be the next ban.) Each replica is asked until the pushed unban
    // has reached it: until then it answers the cached ban from memory, counting no refusal.
    for (let i = 0; i < 2; i++) {
      const code = await pollUntil(
        () => stack.send(a.key, i).then(codeOf),
        (c) => c !== 'api_key_banned',
        { deadline: Date.now() + 30_000 },
      );
      expect(code).toBe('rate_limit_exceeded');
    }
  });

  it('refuses an owner name that could not be a hash tag', async () => {
    const result = await keysCli(stack.redis(), ['create', '--plan', 'team', '--owner', 'ac}me'], stack.configDir());
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('--owner');
  });
});

describe('owner quotas on the embedded store', () => {
  it('share the windows of the demo owner across keys, even of different owner-scoped plans', async () => {
    await awayFromDayEdge(20);
    const { url, keyOf } = stack.embedded();
    const codes = [];
    for (let i = 0; i < 6; i++)
      codes.push(await codeOf(await fetch(`${url}/v1/categories`, { headers: bearer(keyOf(i < 3 ? 'team' : 'teamb')) })));
    expect(codes).toEqual([...Array(5).fill('ok'), 'rate_limit_exceeded']);
  });
});
