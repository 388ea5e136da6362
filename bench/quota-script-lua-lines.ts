/**
 * Where MULTI_QUOTA_SCRIPT's Lua spends its VM instructions per warm-key section, line by line:
 * the script run by Debian's `lua5.1` (apt-get install lua5.1; Redis embeds Lua 5.1 too) with a
 * count hook on every VM instruction, `redis.call` answered by a small in-memory stand-in (TIME,
 * HMGET, HSET, HINCRBY, HSETNX, PEXPIRE: what a warm key's step sends), warm keys of a fixed-window
 * plan with usage kept, --per-call sections a call, after one unmeasured pass over every key.
 * Redis's own work (the commands, turning replies into Lua values) is not in these counts:
 * quota-script-instructions.ts counts all of it under callgrind. Prints the VM instructions per
 * section and the --lines busiest lines of the script with theirs.
 *   node --import tsx bench/quota-script-lua-lines.ts [--dist DIR] [--per-call 6]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    dist: { type: 'string', default: resolve(import.meta.dirname, '../dist') },
    'per-call': { type: 'string', default: '6' },
    calls: { type: 'string', default: '200' },
    keys: { type: 'string', default: '2000' },
    lines: { type: 'string', default: '30' },
  },
});
const { MULTI_QUOTA_SCRIPT } = (await import(
  `${values.dist}/store/redis/multi-quota-script.js`
)) as typeof import('../src/store/redis/multi-quota-script.js');
const { QUOTA_ARGS_BEFORE_COSTS } = (await import(
  `${values.dist}/store/redis/quota-script.js`
)) as typeof import('../src/store/redis/quota-script.js');

// One plan: QUOTA_SCRIPT's arguments before the costs (redis-quota-store.ts buildQuotaArgs), a
// fixed window far from its limits, usage kept 400 days; '' for Redis's clock (the stand-in's TIME,
// 2026-11-29T14:28:55Z), the day's and the month's four edges (calendar.ts) around it, in UTC.
const PLAN = [
  ...['1000000000', '1000000000000', '3', '60000', '120000', '0', '0', '0', '0', '', '0', '0'],
  ...['1795824000000', '1795910400000', '1795996800000', '1796083200000'],
  ...['1790812800000', '1793491200000', '1796083200000', '1798761600000'],
  ...['0', '34560000000'],
];
if (PLAN.length !== QUOTA_ARGS_BEFORE_COSTS)
  throw new Error(`the plan's arguments changed: ${QUOTA_ARGS_BEFORE_COSTS}, not ${PLAN.length}`);

const HARNESS = `
local src = io.open(arg[1]):read('*a')
local chunk = assert(loadstring(src, 'script'))
local store = {}
local function hash(k) local h = store[k]; if not h then h = {}; store[k] = h end; return h end
local function text(v) if type(v) == 'number' then return string.format('%.17g', v) end return v end
redis = {}
function redis.call(cmd, k, ...)
  local a = {...}
  if cmd == 'TIME' then return { '1795974535', '314289' } end
  if cmd == 'HMGET' then local h = hash(k); local r = {}; for i = 1, #a do r[i] = h[a[i]] or false end; return r end
  if cmd == 'HSET' then local h = hash(k); for i = 1, #a, 2 do h[a[i]] = text(a[i + 1]) end; return 1 end
  if cmd == 'HINCRBY' then local h = hash(k); local v = (tonumber(h[a[1]]) or 0) + tonumber(a[2]); h[a[1]] = tostring(v); return v end
  if cmd == 'HSETNX' then local h = hash(k); if h[a[1]] then return 0 end; h[a[1]] = a[2]; return 1 end
  if cmd == 'PEXPIRE' then return 1 end
  error('not stood in for: ' .. cmd)
end
redis.pcall = redis.call
function redis.error_reply(m) return { err = m } end
local plan = { ${PLAN.map((a) => `'${a}'`).join(', ')} }
local perCall, calls, keys, lines = tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4]), tonumber(arg[5])
local n = 0
local function oneCall()
  local KEYS, ARGV = {}, { '1' }
  for i = 1, #plan do ARGV[#ARGV + 1] = plan[i] end
  for s = 1, perCall do
    KEYS[s] = 'tg:quota:{key' .. (n % keys) .. '}'
    n = n + 1
    ARGV[#ARGV + 1] = '1'; ARGV[#ARGV + 1] = '1'; ARGV[#ARGV + 1] = '1'
  end
  setfenv(chunk, setmetatable({ KEYS = KEYS, ARGV = ARGV, redis = redis }, { __index = _G }))
  for _, v in ipairs(chunk()) do if type(v) == 'table' then error(v.err) end end
end
for i = 1, math.ceil(keys / perCall) do oneCall() end
local counts, total = {}, 0
debug.sethook(function()
  local info = debug.getinfo(2, 'Sl')
  if info and info.source == 'script' then counts[info.currentline] = (counts[info.currentline] or 0) + 1 end
  total = total + 1
end, '', 1)
for i = 1, calls do oneCall() end
debug.sethook()
local sections = calls * perCall
print(string.format('%.0f Lua VM instructions a section (%d a call)', total / sections, total / calls))
local text, order = {}, {}
for l in src:gmatch('([^\\n]*)\\n?') do text[#text + 1] = l end
for l in pairs(counts) do order[#order + 1] = l end
table.sort(order, function(a, b) return counts[a] > counts[b] end)
for i = 1, math.min(lines, #order) do
  local l = order[i]
  print(string.format('%6.1f  line %4d  %s', counts[l] / sections, l, (text[l] or ''):sub(1, 100)))
end
`;

const dir = mkdtempSync(join(tmpdir(), 'tollgate-lua-lines-'));
try {
  writeFileSync(join(dir, 'script.lua'), MULTI_QUOTA_SCRIPT);
  writeFileSync(join(dir, 'harness.lua'), HARNESS);
  const args = [join(dir, 'harness.lua'), join(dir, 'script.lua'), values['per-call'], values.calls, values.keys, values.lines];
  process.stdout.write(execFileSync('lua5.1', args, { encoding: 'utf8' }));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
