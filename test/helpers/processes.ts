import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { TEST_ASSERTION_SECRET } from './assertion.js';

export const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CONFIG_DIR = fileURLToPath(new URL('../../config', import.meta.url));

/** A tollgate process (gateway, backend, up) started from the built CLI, spoken to over HTTP. */
export class TollgateProcess {
  readonly lines: string[] = [];
  private exitCode: number | null = null;
  private readonly exited: Promise<number | null>;

  private constructor(readonly child: ChildProcess) {
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.exitCode = code ?? (signal ? 128 : null);
        resolve(this.exitCode);
      }),
    );
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({ input: stream }).on('line', (line) => this.lines.push(line));
    }
  }

  static spawn(args: string[], env: Record<string, string | undefined>): TollgateProcess {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH, TOLLGATE_CONFIG_DIR: CONFIG_DIR, LOG_LEVEL: 'info', TOLLGATE_ASSERTION_SECRET: TEST_ASSERTION_SECRET, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new TollgateProcess(child);
  }

  /** Waits for a JSON log line whose `msg` matches (and `where`, if given), and returns it parsed. */
  async waitForLog(
    msg: string | RegExp,
    timeoutMs = 10_000,
    where: (line: Record<string, unknown>) => boolean = () => true,
  ): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    let seen = 0;
    while (Date.now() < deadline) {
      for (; seen < this.lines.length; seen++) {
        const parsed = parseJson(this.lines[seen]!);
        if (parsed && typeof parsed.msg === 'string' && (typeof msg === 'string' ? parsed.msg === msg : msg.test(parsed.msg)) && where(parsed)) {
          return parsed;
        }
      }
      if (this.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`no log "${msg}" (exit ${this.exitCode}); output:\n${this.lines.join('\n')}`);
  }

  /** Waits for the "listening" log line and returns the base URL it names. */
  async listening(role: string): Promise<string> {
    const line = await this.waitForLog(`${role} listening`);
    return String(line.url);
  }

  logs(): Record<string, unknown>[] {
    return this.lines.map(parseJson).filter((x): x is Record<string, unknown> => x !== null);
  }

  output(): string {
    return this.lines.join('\n');
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    if (this.exitCode === null) this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }

  wait(): Promise<number | null> {
    return this.exited;
  }
}

function parseJson(line: string): Record<string, unknown> | null {
  if (!line.startsWith('{')) return null;
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/** Runs the CLI to completion (for `keys …` and `check-config`). */
export function runCli(
  args: string[],
  env: Record<string, string | undefined>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH, TOLLGATE_CONFIG_DIR: CONFIG_DIR, TOLLGATE_ASSERTION_SECRET: TEST_ASSERTION_SECRET, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
