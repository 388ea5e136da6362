import { readFileSync } from 'node:fs';

// Linux reports process CPU time in clock ticks of 1/100 s (USER_HZ; 100 on every mainstream
// architecture), so a 10 s round measures a process's CPU to ~0.1%.
const TICKS_PER_SECOND = 100;

/**
 * CPU time (user + system) a process has used so far, in milliseconds; with `mainThreadOnly`,
 * only its main thread's (the one running JavaScript; its thread id is the process id).
 */
export function cpuMsOf(pid: number, mainThreadOnly = false): number {
  const stat = readFileSync(mainThreadOnly ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which is in parentheses and may contain spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1000) / TICKS_PER_SECOND;
}

/** CPU use of several processes over a span of time. */
export class CpuMeter {
  private readonly startMs: Map<string, number>;

  constructor(
    private readonly pids: Record<string, number>,
    private readonly mainThreadOnly = false,
  ) {
    this.startMs = new Map(Object.entries(pids).map(([name, pid]) => [name, cpuMsOf(pid, mainThreadOnly)]));
  }

  /** CPU milliseconds each process used since construction. */
  read(): Record<string, number> {
    const used: Record<string, number> = {};
    for (const [name, pid] of Object.entries(this.pids)) used[name] = cpuMsOf(pid, this.mainThreadOnly) - this.startMs.get(name)!;
    return used;
  }
}
