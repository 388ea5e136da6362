import { freePort } from '../dev/free-port.js';
import { waitForRedis } from '../dev/wait-for-redis.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, truncateSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CLI = join(REPO_ROOT, 'dist/cli/main.js');
export const CONFIG_DIR = join(REPO_ROOT, 'config');

let scratch: string | undefined;

/** The run's scratch directory (process logs, Redis, profiles), made on first use. */
export function workDir(): string {
  scratch ??= mkdtempSync(join(tmpdir(), 'tollgate-bench-'));
  return scratch;
}

/**
 * A process of the benchmark. Its stdout and stderr go to a file opened O_APPEND, not to a pipe:
 * nobody has to drain it (a pipe we do not read would stall the process), the logging cost stays
 * real (one write per batch, as on a container's stdout), and `truncateLog` keeps the file small
 * between phases without disturbing the writer.
 */
export class BenchProcess {
  private exitCode: number | null = null;
  private readonly exit: Promise<number | null>;

  private constructor(readonly name: string, readonly child: ChildProcess, readonly logFile: string) {
    this.exit = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.exitCode = code ?? (signal ? 128 : null);
        resolve(this.exitCode);
      }),
    );
  }

  static spawn(name: string, args: string[], env: Record<string, string | undefined>, execArgv: string[] = []): BenchProcess {
    const logFile = join(workDir(), `${name}.log`);
    const fd = openSync(logFile, 'a');
    const child = spawn(process.execPath, [...execArgv, ...args], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH, TOLLGATE_CONFIG_DIR: CONFIG_DIR, ...env },
      stdio: ['ignore', fd, fd],
    });
    closeSync(fd);
    return new BenchProcess(name, child, logFile);
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** The exit code (or 128 for a signal) once the process has ended, else null. */
  get exited(): number | null {
    return this.exitCode;
  }

  /** The last part of the process's log, for error messages. */
  logTail(chars = 3000): string {
    return readFileSync(this.logFile, 'utf8').slice(-chars);
  }

  /** Waits for a JSON log line whose `msg` is `msg`, and returns it parsed. */
  async waitForLog(msg: string, timeoutMs = 15_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      for (const line of readFileSync(this.logFile, 'utf8').split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>;
          if (parsed.msg === msg) return parsed;
        } catch {
          // a line being written
        }
      }
      if (this.exitCode !== null) break;
      await sleep(25);
    }
    throw new Error(`${this.name}: no "${msg}" log line (exit ${this.exitCode}); log:\n${this.logTail()}`);
  }

  /** Waits until the process accepts TCP connections on `port` (127.0.0.1). */
  async accepting(port: number, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && this.exitCode === null) {
      const ok = await new Promise<boolean>((resolve) => {
        const socket = connect({ host: '127.0.0.1', port }, () => {
          socket.destroy();
          resolve(true);
        });
        socket.on('error', () => resolve(false));
      });
      if (ok) return;
      await sleep(25);
    }
    throw new Error(`${this.name}: not accepting on port ${port} (exit ${this.exitCode}); log:\n${this.logTail()}`);
  }

  async listening(msg: string): Promise<string> {
    return String((await this.waitForLog(msg)).url);
  }

  /** Resident set size now and its peak (VmHWM), in KiB, from /proc (Linux). */
  memory(): { rssKiB: number; peakKiB: number } {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rssKiB: field('VmRSS'), peakKiB: field('VmHWM') };
  }

  /** Empties the log file (the writer appends, so it goes on at offset 0). */
  truncateLog(): void {
    truncateSync(this.logFile, 0);
  }

  /** Log lines at level warn or above (pino levels), for the report. */
  problems(): string[] {
    return readFileSync(this.logFile, 'utf8')
      .split('\n')
      .filter((line) => /"level":(40|50|60)\b/.test(line));
  }

  async stop(): Promise<number | null> {
    if (this.exitCode === null) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
    const code = await this.exit;
    clearTimeout(timer);
    return code;
  }
}

/** A redis-server of the benchmark's own on a free port, without persistence. */
export class BenchRedis {
  private constructor(readonly port: number, private readonly child: ChildProcess) {}

  static async start(): Promise<BenchRedis> {
    const port = await freePort();
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', workDir()];
    const child = spawn('redis-server', [...args, '--logfile', join(workDir(), 'redis.log')], { stdio: 'ignore' });
    const redis = new BenchRedis(port, child);
    await waitForRedis(redis.url);
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number {
    return this.child.pid!;
  }

  client(): Redis {
    return new Redis(this.url, { maxRetriesPerRequest: 1, connectionName: 'tollgate-bench' });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGTERM');
    await exited;
  }

}

/** Runs the tollgate CLI to completion and returns its stdout (throws on a non-zero exit). */
export function runCli(args: string[], env: Record<string, string | undefined>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH, TOLLGATE_CONFIG_DIR: CONFIG_DIR, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`tollgate ${args.join(' ')}: exit ${code}\n${stderr}`))));
  });
}

export { freePort };

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function removeWorkDir(): void {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  scratch = undefined;
}
