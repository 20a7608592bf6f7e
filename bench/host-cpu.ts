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
 * CPU time (user + system, ms) of each `postgres` process on this machine, by process id. Another
 * database's work on this cluster counts too, so read it on a quiet machine.
 */
export function postgresCpuByPid(): Map<number, number> {
  const byPid = new Map<number, number>();
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
    byPid.set(Number(pid), ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND);
  }
  return byPid;
}

/**
 * The `postgres` processes' CPU (ms) between two {@link postgresCpuByPid} readings: what each
 * process alive at the second reading spent since the first (all of it, for one started since).
 * A process that exited in between (a pooled connection closed after idling, an autovacuum worker)
 * is left out with whatever it spent in the interval, so the figure can read low, never negative:
 * a plain sum over the two readings went negative by a whole long-lived backend's CPU when one
 * exited (a soak window read -1,807 µs a job).
 */
export function postgresCpuSinceMs(before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>): number {
  let ms = 0;
  for (const [pid, cpuMs] of after) ms += Math.max(0, cpuMs - (before.get(pid) ?? 0));
  return ms;
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

/**
 * What share (0..1) of the host's cores was busy and stolen between two readings, the busy time
 * itself, and the cores' whole time in between (ms, summed over cores), against which a process's
 * CPU is a share too.
 */
export function hostCpuShares(
  before: HostCpuTimes,
  after: HostCpuTimes,
): { busy: number; steal: number; busyMs: number; totalMs: number } {
  const busyMs = after.busyMs - before.busyMs;
  const steal = after.stealMs - before.stealMs;
  const totalMs = busyMs + steal + (after.idleMs - before.idleMs);
  return totalMs > 0
    ? { busy: busyMs / totalMs, steal: steal / totalMs, busyMs, totalMs }
    : { busy: Number.NaN, steal: Number.NaN, busyMs, totalMs: 0 };
}
