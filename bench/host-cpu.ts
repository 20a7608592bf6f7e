/**
 * CPU time on this host, read from /proc: the benchmark's database and its worker processes run
 * here, so where a slow window's time went (the worker, the database, the harness, or processes
 * outside the benchmark, or the hypervisor taking the cores away) can be read beside it.
 *
 * Counted in clock ticks (10 ms each): read over whole drains or 30-second samples, not single calls.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Linux's USER_HZ: /proc reports CPU time in these ticks. */
const TICKS_PER_SECOND = 100;

/**
 * CPU time (user + system, ms) of every `postgres` process on this machine. Another database's
 * work on this cluster counts too, so read it on a quiet machine. A process that exits meanwhile
 * (an autovacuum worker, a backend whose client disconnected) drops out of the second reading with
 * all its CPU, so a drain long enough to outlive some (a million jobs) can read far too low.
 */
export function postgresCpuMs(): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited since the listing
    }
    if (!stat.includes('(postgres)')) continue;
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return (ticks * 1000) / TICKS_PER_SECOND;
}

/** The whole host's CPU time so far, summed over its cores (ms), from /proc/stat's first line. */
export interface HostCpuTimes {
  /** Time the cores ran anything (user, nice, system, irq, softirq). */
  busyMs: number;
  /** Time the cores were idle or waiting on I/O. */
  idleMs: number;
  /** Time the hypervisor ran something else while this VM wanted the core. */
  stealMs: number;
}

/** Reads /proc/stat's aggregate line; zeros where /proc is not Linux's. */
export function hostCpuTimes(): HostCpuTimes {
  let line: string | undefined;
  try {
    line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  } catch {
    line = undefined;
  }
  if (!line?.startsWith('cpu ')) return { busyMs: 0, idleMs: 0, stealMs: 0 };
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest time is inside user).
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line
    .split(/\s+/)
    .slice(1, 9)
    .map((field) => (Number(field) * 1000) / TICKS_PER_SECOND);
  return {
    busyMs: (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0),
    idleMs: (idle ?? 0) + (iowait ?? 0),
    stealMs: steal ?? 0,
  };
}

/** What share (0..1) of the host's cores was busy and stolen between two readings. */
export function hostCpuShares(before: HostCpuTimes, after: HostCpuTimes): { busy: number; steal: number } {
  const busy = after.busyMs - before.busyMs;
  const steal = after.stealMs - before.stealMs;
  const total = busy + steal + (after.idleMs - before.idleMs);
  return total > 0 ? { busy: busy / total, steal: steal / total } : { busy: Number.NaN, steal: Number.NaN };
}
