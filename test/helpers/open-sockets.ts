import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** Open sockets of a process (Linux /proc), to catch leaks after faults, aborts and soaks. */
export function openSockets(pid: number): number {
  let count = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) count++;
    } catch {
      // closed while we looked
    }
  }
  return count;
}

/** Resident memory of a process in bytes (Linux /proc). */
export function residentBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /VmRSS:\s+(\d+) kB/.exec(status);
  return match ? Number(match[1]) * 1024 : 0;
}
