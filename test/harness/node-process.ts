import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, truncateSync } from 'node:fs';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';

export interface NodeProcessOptions {
  /** The script and its arguments, after Node's own options. */
  args: string[];
  /** The whole environment of the child (nothing is inherited). */
  env: Record<string, string | undefined>;
  /** Node options, e.g. ['--cpu-prof']. */
  execArgv?: string[];
  cwd?: string;
  /**
   * Where stdout and stderr go. Unset: a pipe read line by line into memory (tests read a few
   * hundred lines). A path: a file opened O_APPEND, which nobody has to drain (a pipe left unread
   * stalls the writer) and which keeps the logging cost real under load (the benchmark writes one
   * access line per request); `truncateLog` empties it between phases.
   */
  logFile?: string;
  /** For error messages. */
  name?: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A Node process started by the tests or the benchmark (gateway, backend, a benchmark peer), with
 * its output collected, waits for readiness (a JSON log line, or a port accepting), and a stop.
 */
export class NodeProcess {
  private readonly memoryLines: string[] = [];
  private exitCode: number | null = null;
  private readonly exited: Promise<number | null>;
  readonly name: string;

  private constructor(
    readonly child: ChildProcess,
    private readonly logFile: string | undefined,
    name: string,
  ) {
    this.name = name;
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.exitCode = code ?? (signal ? 128 : null);
        resolve(this.exitCode);
      }),
    );
    if (!logFile) {
      for (const stream of [child.stdout!, child.stderr!]) {
        createInterface({ input: stream }).on('line', (line) => this.memoryLines.push(line));
      }
    }
  }

  static start(options: NodeProcessOptions): NodeProcess {
    const fd = options.logFile === undefined ? undefined : openSync(options.logFile, 'a');
    const child = spawn(process.execPath, [...(options.execArgv ?? []), ...options.args], {
      cwd: options.cwd,
      env: options.env,
      stdio: ['ignore', fd ?? 'pipe', fd ?? 'pipe'],
    });
    if (fd !== undefined) closeSync(fd);
    return new NodeProcess(child, options.logFile, options.name ?? options.args.join(' '));
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** The exit code (128 for a signal) once the process has ended, else null. */
  get exitStatus(): number | null {
    return this.exitCode;
  }

  /** Every line written to stdout and stderr so far. */
  get lines(): string[] {
    if (!this.logFile) return this.memoryLines;
    return readFileSync(this.logFile, 'utf8').split('\n').filter(Boolean);
  }

  /**
   * Waits for a JSON log line whose `msg` matches (and `where`, if given), and returns it parsed.
   * The deadline only decides how long a test takes to fail, so it is generous: on a loaded machine
   * a process may take many seconds to get to a line it logs at once on an idle one.
   */
  async waitForLog(
    msg: string | RegExp,
    timeoutMs = 60_000,
    where: (line: Record<string, unknown>) => boolean = () => true,
  ): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    const matches = (text: string) => (typeof msg === 'string' ? text === msg : msg.test(text));
    let seen = 0;
    while (Date.now() < deadline) {
      const lines = this.lines;
      for (; seen < lines.length; seen++) {
        const parsed = parseJson(lines[seen]!);
        if (parsed && typeof parsed.msg === 'string' && matches(parsed.msg) && where(parsed)) return parsed;
      }
      if (this.exitCode !== null) break;
      await sleep(20);
    }
    throw new Error(`${this.name}: no log "${msg}" (exit ${this.exitCode}); output:\n${this.outputTail()}`);
  }

  /**
   * Waits for the "<role> listening" log line and returns the base URL it names. A process that
   * never gets there is killed, so a failed start leaves nothing running. The wait is long: on a
   * loaded 2-core machine a start has been seen to take over 10 s, and over 25 s with both cores
   * kept busy while two test files start gateways (`npm run test:loaded`).
   */
  async listening(role: string, timeoutMs = 120_000): Promise<string> {
    try {
      const line = await this.waitForLog(`${role} listening`, timeoutMs);
      return String(line.url);
    } catch (err) {
      if (this.exitCode === null) this.child.kill('SIGKILL');
      throw err;
    }
  }

  /** Waits until the process accepts TCP connections on `port` (127.0.0.1): for a process that logs nothing. */
  async accepting(port: number, timeoutMs = 120_000): Promise<void> {
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
    throw new Error(`${this.name}: not accepting on port ${port} (exit ${this.exitCode}); output:\n${this.outputTail()}`);
  }

  /** The output lines that are JSON log lines, parsed. */
  logs(): Record<string, unknown>[] {
    return this.lines.map(parseJson).filter((x): x is Record<string, unknown> => x !== null);
  }

  output(): string {
    return this.lines.join('\n');
  }

  /** The last part of the output, for error messages. */
  outputTail(chars = 3000): string {
    return this.output().slice(-chars);
  }

  /** Log lines at level warn or above (pino levels 40, 50, 60). */
  problems(): string[] {
    return this.lines.filter((line) => /"level":(40|50|60)\b/.test(line));
  }

  /** Empties the log file (the writer appends, so it goes on at offset 0); the in-memory log is cleared. */
  truncateLog(): void {
    if (this.logFile) truncateSync(this.logFile, 0);
    else this.memoryLines.length = 0;
  }

  /** Resident set size now and its peak (VmHWM), in KiB, from /proc (Linux). */
  memory(): { rssKiB: number; peakKiB: number } {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rssKiB: field('VmRSS'), peakKiB: field('VmHWM') };
  }

  /** Sends `signal` and waits for the exit; SIGKILL after `killAfterMs`. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', killAfterMs = 10_000): Promise<number | null> {
    if (this.exitCode === null) this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), killAfterMs);
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
