import { copyOpenApi, editedConfig, withService } from './config-edit.js';
import type { BenchResults, Side, Target } from './report.js';
import { median } from './samples.js';

/**
 * `tollgate-post` and `tollgate-post-validated`: `POST /v1/categories` with a small valid JSON
 * body, through one service claiming the path, without and with OpenAPI validation of the
 * request against the shipped openapi.yaml (docs/policies.md, `validate: { openapi: openapi.yaml,
 * mode: enforce }`): the two differ in that one line only, and run in the same rounds, so their
 * ratio is the cost of validation. wrk sends the POST (bench/wrk.ts, a Lua script setting method
 * and body).
 *
 * Only in front of the plain Node upstream, which answers every request the same 200 whatever
 * its method and body: the bundled backend would create a category per POST, so the list (and
 * the backend's work) would grow from round to round, and its own body check would be work
 * behind one side that is not the gateway's; neither belongs in a ratio of two gateways.
 */
export const POST_TARGETS = { 'tollgate-post': false, 'tollgate-post-validated': true } as const;
export type PostTarget = keyof typeof POST_TARGETS;
export const POST_TARGET_NAMES = Object.keys(POST_TARGETS) as PostTarget[];

export interface RequestSpec {
  method: string;
  body: string;
  headers: Record<string, string>;
}

/** The body NewCategory (openapi.yaml) accepts. */
export const POST_REQUEST: RequestSpec = {
  method: 'POST',
  body: JSON.stringify({ name: 'Bench', description: 'A small category' }),
  headers: { 'content-type': 'application/json' },
};
/** Refused by the validated side (NewCategory requires `name`): proves validation is on, and off on the other. */
const INVALID_BODY = JSON.stringify({ description: 'no name' });

/** Validated over unvalidated throughput it aims at (within 10 %). */
const MIN_RATIO = 0.9;

/** The shipped config with a service claiming `path` for `upstreamUrl`, validated or not. */
export function postConfig(name: PostTarget, upstreamUrl: string, path: string, suffix: string): string {
  const service = [`name: bench-post`, `paths: [${path}]`, `targets: [${upstreamUrl}]`];
  if (POST_TARGETS[name]) service.push('validate: { openapi: openapi.yaml, mode: enforce }');
  const dir = editedConfig(`${name}${suffix}`, { 'gateway.yaml': withService(service) });
  copyOpenApi(dir);
  return dir;
}

/** Throws unless the valid body is forwarded by both sides and the invalid one refused (400) by the validated side only. */
export async function checkPostTarget(name: PostTarget, url: string, headers: Record<string, string>): Promise<void> {
  const send = async (body: string) => {
    const res = await fetch(url, { method: 'POST', headers: { ...headers, ...POST_REQUEST.headers }, body });
    await res.arrayBuffer();
    return res.status;
  };
  const valid = await send(POST_REQUEST.body);
  const invalid = await send(INVALID_BODY);
  const wantInvalid = POST_TARGETS[name] ? 400 : 200;
  if (valid !== 200 || invalid !== wantInvalid)
    throw new Error(`${name}: POST answered ${valid} to a valid body and ${invalid} to an invalid one (expected 200 and ${wantInvalid})`);
}

/** The targets-table row: validated over unvalidated, in front of the plain upstream. */
export function postTargets(r: BenchResults): Target[] {
  const pair = postPair(r.throughput?.plainSides ?? []);
  if (!pair) return [];
  const { plain, validated, ratio } = pair;
  const cpu = (proxy: number | undefined) => (proxy ?? NaN).toFixed(1);
  return [
    {
      issue: '–',
      what: 'plain Node upstream: POST /v1/categories throughput, OpenAPI-validated vs not',
      target: `≥ ${MIN_RATIO}× (within 10 %)`,
      measured: `${ratio.toFixed(3)}× round median; proxy CPU ${cpu(validated.cpuUsPerRequest.proxy)} vs ${cpu(plain.cpuUsPerRequest.proxy)} µs/request`,
      met: ratio >= MIN_RATIO,
    },
  ];
}

/** The two POST sides of a table, and validated over unvalidated (median of the round ratios). */
function postPair(sides: Side[]): { plain: Side; validated: Side; ratio: number } | undefined {
  const plain = sides.find((s) => s.name === 'tollgate-post');
  const validated = sides.find((s) => s.name === 'tollgate-post-validated');
  if (!plain || !validated) return undefined;
  return { plain, validated, ratio: median(validated.roundsRequestsPerSecond.map((x, i) => x / plain.roundsRequestsPerSecond[i]!)) };
}

/** Under a throughput table with the POST targets: what they send, and their ratio. */
export function postNote(sides: Side[]): string {
  if (!sides.some((s) => s.name in POST_TARGETS)) return '';
  const pair = postPair(sides);
  return (
    `\n\n${POST_TARGET_NAMES.join(' and ')}: \`POST /v1/categories\` with a ${POST_REQUEST.body.length}-byte JSON body (not GET), through one service, ` +
    `without and with OpenAPI validation (enforce); the upstream answers 200 to both.` +
    (pair ? ` Validated over unvalidated: ${pair.ratio.toFixed(3)}× (median of the round ratios).` : '')
  );
}
