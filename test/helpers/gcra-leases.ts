import type { Quota } from '../../src/config/plans-schema.js';
import { gcraMinute } from '../../src/quota/gcra.js';
import type { QuotaStack } from './quota-stack.js';
import { configCopy, slackRedisTimeout } from './stack.js';

/**
 * A config directory for lease tests: `plans` as plans.yaml, and gateway.yaml with `replicas`,
 * the `leases` line given, and a patient Redis command timeout (a loaded machine).
 */
export function leaseConfig(plans: string, replicas: number, leases: string): string {
  return configCopy({
    'plans.yaml': () => plans,
    'gateway.yaml': (y) =>
      slackRedisTimeout(y)
        .replace(/^ {2}replicas: 1 .*$/m, `  replicas: ${replicas}`)
        .replace(/^ {2}leases: .*$/m, leases),
  });
}

/** gateway.yaml for three replicas with quota leases (docs/quota-leases.md), small enough for a test's key. */
export function withLeases(gatewayYaml: string): string {
  return gatewayYaml
    .replace(/^ {2}replicas: 1 .*$/m, '  replicas: 3')
    .replace(/^ {2}leases: .*$/m, '  leases: { enabled: true, leaseMs: 500, hotPerSecond: 3, minBlock: 4, maxBlock: 200, spread: 1 }');
}

export interface Answer {
  gateway: number;
  status: number;
  /** A refusal's error code (revoked_api_key, rate_limit_exceeded, api_key_banned, …). */
  code?: string;
  /** RateLimit-Policy: the quota the gateway judged it under (a key moved to another plan shows the new one). */
  policy: string | null;
  /** The client's clock when the request was sent and when its answer came: it was decided in between. */
  sentMs: number;
  receivedMs: number;
}

/** `concurrency` clients sending `key`'s requests round robin over the three gateways until `until()`. */
export async function hammer(stack: QuotaStack, key: string, until: (sent: number) => boolean, concurrency = 12): Promise<Answer[]> {
  const answers: Answer[] = [];
  let sent = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (!until(sent)) {
        const gateway = sent++ % 3;
        const sentMs = Date.now();
        answers.push(await answerOf(stack.send(key, gateway), gateway, sentMs));
      }
    }),
  );
  return answers;
}

/** One request's answer, with its refusal's code. */
export async function answerOf(sending: Promise<Response>, gateway: number, sentMs = Date.now()): Promise<Answer> {
  const res = await sending;
  const body = await res.text();
  const code = res.status === 200 ? undefined : (JSON.parse(body) as { code?: string }).code;
  return { gateway, status: res.status, code, policy: res.headers.get('ratelimit-policy'), sentMs, receivedMs: Date.now() };
}

/**
 * GCRA's promise over the admitted answers (quota-leases.ts, rule 7): every span [a, b] holds at
 * most burst + ⌊(b − a) / T⌋ units, so at most `limit` in any 60 s. Only what the client can know
 * is counted: the answers sent at or after a and received by b were certainly admitted in [a, b].
 * Returns the largest excess over that bound (≤ 0 when kept) and the most such answers in a span
 * shorter than 60 s.
 */
export function worstSpans(answers: Answer[], quota: Quota): { excess: number; most60s: number } {
  const { burst, intervalUs } = gcraMinute(quota);
  const admitted = answers.filter((a) => a.status === 200).sort((x, y) => x.sentMs - y.sentMs);
  let excess = -Infinity;
  let most60s = 0;
  for (let i = 0; i < admitted.length; i++) {
    const from = admitted[i]!.sentMs;
    // Received by each end: the most in [from, end] is at an end that is one of their answers.
    const received = admitted
      .slice(i)
      .map((a) => a.receivedMs)
      .sort((x, y) => x - y);
    received.forEach((end, k) => {
      excess = Math.max(excess, k + 1 - (burst + Math.floor(((end - from) * 1000) / intervalUs)));
      if (end - from < 60_000) most60s = Math.max(most60s, k + 1);
    });
  }
  return { excess, most60s };
}

/** Requests the gateways admitted on a lease, from their metrics. */
export async function leasedRequests(stack: Pick<QuotaStack, 'gateways'>): Promise<number> {
  let total = 0;
  for (const gateway of stack.gateways()) {
    const text = await fetch(`${gateway.adminUrl}/metrics`).then(
      (r) => r.text(),
      () => '',
    );
    for (const m of text.matchAll(/^tollgate_quota_decisions_total\{[^}]*source="lease"[^}]*\} (\d+)/gm)) total += Number(m[1]);
  }
  return total;
}

/** tollgate_quota_recalls_total over the gateways still running. */
export const leaseRecalls = (stack: Pick<QuotaStack, 'gateways'>) => counterSum(stack, 'tollgate_quota_recalls_total');

/**
 * tollgate_quota_recalls_unanswered_total over the gateways still running: recalled requests whose
 * wait ran out before the units came back (on a starved machine, a live holder slower than the
 * bound): each was decided without them, so a burst may be under-admitted, never over.
 */
export const recallsUnanswered = (stack: Pick<QuotaStack, 'gateways'>) => counterSum(stack, 'tollgate_quota_recalls_unanswered_total');

async function counterSum(stack: Pick<QuotaStack, 'gateways'>, name: string): Promise<number> {
  let total = 0;
  for (const gateway of stack.gateways()) {
    if (gateway.process.exitStatus !== null) continue;
    const text = await fetch(`${gateway.adminUrl}/metrics`).then((r) => r.text());
    total += Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  }
  return total;
}
