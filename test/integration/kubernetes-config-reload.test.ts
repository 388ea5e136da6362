import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TollgateProcess } from '../helpers/processes.js';
import { TestRedis } from '../helpers/redis-server.js';
import { bearer, configCopy, createKey, slackRedisTimeout, startGateway } from '../helpers/stack.js';
import { EchoUpstream } from '../helpers/echo-upstream.js';

// How the kubelet updates a mounted ConfigMap, reproduced on disk: every file of the volume is a
// symlink `plans.yaml -> ..data/plans.yaml`, `..data` is a symlink to a timestamped directory, and
// an update writes a new timestamped directory, points a temporary symlink at it and renames that
// over `..data` (one atomic flip of all files), then deletes the old directory. No file is ever
// written in place, so a watcher of the file's inode (inotify on plans.yaml) sees nothing; the
// gateway's reload (config/reloading.ts) stats the path every second, which follows the symlinks.

const PLANS = (freePerMinute: number) => `
plans:
  free: { perMinute: ${freePerMinute}, perDay: 100000 }
ban: { afterRejections: 1000, window: 60, duration: 60 }
`;

/** A directory laid out as the kubelet lays out a ConfigMap volume. */
class ConfigMapVolume {
  readonly dir = mkdtempSync(join(tmpdir(), 'tollgate-configmap-'));
  private generation = 0;

  constructor(private readonly files: Record<string, string>) {
    this.flip(files);
    for (const name of Object.keys(files)) symlinkSync(join('..data', name), join(this.dir, name));
  }

  /** Publishes new contents as the kubelet does: new directory, temporary link, rename over ..data, old directory removed. */
  flip(changed: Record<string, string>): void {
    Object.assign(this.files, changed);
    const previous = readdirSync(this.dir).filter((name) => name.startsWith('..20'));
    const timestamped = `..2026_01_01_00_00_${String(++this.generation).padStart(2, '0')}.000000001`;
    mkdirSync(join(this.dir, timestamped));
    for (const [name, text] of Object.entries(this.files)) writeFileSync(join(this.dir, timestamped, name), text);
    symlinkSync(timestamped, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
    for (const old of previous) rmSync(join(this.dir, old), { recursive: true });
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

let redis: TestRedis;
let upstream: EchoUpstream;
let volume: ConfigMapVolume;
let gateway: TollgateProcess | undefined;

beforeAll(async () => {
  redis = await TestRedis.start();
  upstream = await new EchoUpstream().start();
  // The shipped files, as `configMapGenerator` puts them in the ConfigMap.
  const shipped = configCopy({ 'gateway.yaml': slackRedisTimeout, 'plans.yaml': () => PLANS(7) });
  const files: Record<string, string> = {};
  for (const name of readdirSync(shipped)) files[name] = readFileSync(join(shipped, name), 'utf8');
  rmSync(shipped, { recursive: true });
  volume = new ConfigMapVolume(files);
}, 30_000);

afterAll(async () => {
  await gateway?.stop();
  await upstream?.stop();
  await redis?.stop();
  volume?.remove();
});

it('takes a new plan quota from a ConfigMap update (symlink flip) without a restart', async () => {
  const handle = await startGateway({ REDIS_URL: redis.url, TOLLGATE_CONFIG_DIR: volume.dir, UPSTREAM_URL: upstream.url });
  gateway = handle.process;
  const key = await createKey(redis, ['--plan', 'free'], volume.dir);
  const limit = async () => (await fetch(`${handle.url}/v1/anything`, { headers: bearer(key.key) })).headers.get('x-ratelimit-limit');
  expect(await limit()).toBe('7');

  volume.flip({ 'plans.yaml': PLANS(11) });
  await handle.process.waitForLog('config reloaded', 10_000, (line) => String(line.file).endsWith('plans.yaml'));
  expect(await limit()).toBe('11');

  // A second update: the watch follows the path, not the first target's inode.
  volume.flip({ 'plans.yaml': PLANS(13) });
  await expect.poll(limit, { timeout: 10_000 }).toBe('13');
  expect(handle.process.problems()).toEqual([]);
}, 60_000);

it('keeps the last good plans when a ConfigMap update is invalid, and takes the next valid one', async () => {
  const handle = await startGateway({ REDIS_URL: redis.url, TOLLGATE_CONFIG_DIR: volume.dir, UPSTREAM_URL: upstream.url });
  try {
    const key = await createKey(redis, ['--plan', 'free'], volume.dir);
    const limit = async () => (await fetch(`${handle.url}/v1/anything`, { headers: bearer(key.key) })).headers.get('x-ratelimit-limit');
    const before = await limit();
    volume.flip({ 'plans.yaml': 'plans:\n  free: { perMinute: -1, perDay: 5 }\n' });
    await handle.process.waitForLog('config reload refused; the previous config stays in force');
    expect(await limit()).toBe(before);
    volume.flip({ 'plans.yaml': PLANS(17) });
    await expect.poll(limit, { timeout: 10_000 }).toBe('17');
  } finally {
    await handle.process.stop();
  }
}, 60_000);
