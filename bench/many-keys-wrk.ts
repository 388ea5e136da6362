/**
 * `tollgate-2000-keys`: the shipped config (leases on) in the throughput phase, called by wrk with
 * another key on every request, round robin over --wrk-keys keys (2,000 by default; records
 * written straight into Redis, ./keys.ts, with quotas no load reaches). The realistic mix of an API
 * with many customers who each call now and then: no key is hot, each takes a warm key's lease
 * until its minute's end (docs/quota-leases.md) once the gateway has seen it steadily for
 * 5 s, and before that its requests are quota script calls, batched per turn. Beside
 * `tollgate` (one key) in the same rounds, it
 * shows what many warm keys cost: requests per second, p99, Redis commands and Redis CPU per
 * request. Its run: npm run bench -- --phases throughput --targets bare,tollgate,tollgate-2000-keys --upstreams plain
 */
export const MANY_KEYS_WRK_TARGET = 'tollgate-2000-keys';
const MANY_KEYS_SUFFIX = MANY_KEYS_WRK_TARGET.slice('tollgate'.length);
/** The many-keys side of a --compare/--variant build (`tollgate@main-2000-keys`). */
export const manyKeysBuildName = (build: string) => `${build}${MANY_KEYS_SUFFIX}`;

/**
 * wrk's per-request Lua: the Authorization header of the next key. Each wrk thread has its own Lua
 * state; a thread starts at its own offset (setup numbers the threads), so threads do not send
 * the same key at the same moment.
 */
export function rotatingAuthorizationScript(keys: string[]): string {
  if (keys.some((key) => !/^[\w.~-]+$/.test(key)))
    throw new Error('wrk: a key with other characters than [A-Za-z0-9_.~-] cannot be rotated');
  return `
local keys = { ${keys.map((key) => `"${key}"`).join(', ')} }
local threads = 0
setup = function(thread)
  thread:set("offset", threads * 7919)
  threads = threads + 1
end
local i = nil
request = function()
  if i == nil then i = tonumber(offset) or 0 end
  i = i + 1
  wrk.headers["Authorization"] = "Bearer " .. keys[(i % #keys) + 1]
  return wrk.format()
end
`;
}

/** What the many-keys rows are judged against: the targets of many warm keys beside one key. */
export const MANY_KEYS_WANTED = { throughputRatio: 0.95, commandsPerRequest: 1.05, redisCpuUs: 15 };

interface ManyKeysSide {
  name: string;
  upstream?: string;
  roundsRequestsPerSecond: number[];
  latency: { p99Ms: number };
  cpuUsPerRequest: Record<string, number>;
  redis?: { commandsPerRequest: number };
  leasedShare?: number;
}

export interface ManyKeysTarget {
  what: string;
  target: string;
  measured: string;
  met: boolean;
}

/**
 * The throughput phase's many-keys rows, per upstream: requests per second round by round over
 * `tollgate`'s (one key, same rounds), and Redis commands and Redis CPU per request.
 */
export function manyKeysWrkTargets(sides: ManyKeysSide[] | undefined, keys: number): ManyKeysTarget[] {
  const rows: ManyKeysTarget[] = [];
  // This checkout's row, then each --compare/--variant build's, against that build's one key.
  for (const many of sides?.filter((s) => s.name.endsWith(MANY_KEYS_SUFFIX)) ?? []) {
    const build = many.name.slice(0, -MANY_KEYS_SUFFIX.length);
    const one = sides!.find((s) => s.name === build && s.upstream === many.upstream);
    const of = build === 'tollgate' ? '' : `${build}, `;
    const where = `${many.upstream ?? 'bundled'} upstream, ${of}${keys.toLocaleString('en-US')} keys round robin`;
    if (one) {
      const ratios = many.roundsRequestsPerSecond.map((x, i) => x / one.roundsRequestsPerSecond[i]!).sort((a, b) => a - b);
      const ratio = ratios[Math.floor(ratios.length / 2)]!;
      rows.push({
        what: `${where}: requests/s over one key's (median of rounds)`,
        target: `≥ ${MANY_KEYS_WANTED.throughputRatio}×`,
        measured: `${ratio.toFixed(2)}× (p99 ${many.latency.p99Ms.toFixed(1)} vs ${one.latency.p99Ms.toFixed(1)} ms)`,
        met: ratio >= MANY_KEYS_WANTED.throughputRatio,
      });
    }
    const commands = many.redis?.commandsPerRequest ?? NaN;
    const cpu = many.cpuUsPerRequest.redis ?? NaN;
    const leased = many.leasedShare === undefined ? '' : ` (${(100 * many.leasedShare).toFixed(0)}% answered from leases)`;
    rows.push({
      what: `${where}: Redis commands / Redis CPU per request`,
      target: `≤ ${MANY_KEYS_WANTED.commandsPerRequest} / ≤ ${MANY_KEYS_WANTED.redisCpuUs} µs`,
      measured: `${commands.toFixed(3)} / ${cpu.toFixed(1)} µs${leased}`,
      met: commands <= MANY_KEYS_WANTED.commandsPerRequest && cpu <= MANY_KEYS_WANTED.redisCpuUs,
    });
  }
  return rows;
}
