/**
 * Throwaway PostgreSQL 15 clusters, each in its own cgroup v1 `cpu` group, for the shard benchmark
 * and the sharded chaos run (tests may use them too).
 *
 * Why a cluster per shard and a cgroup per cluster: the shard benchmark must show what adding a
 * database buys when each database has the same, fixed CPU share, as N database hosts would. On a
 * 2-core machine shared with the workers, uncapped clusters would all fight for the same cores and
 * show nothing; a CFS quota (`cpu.cfs_quota_us` / `cpu.cfs_period_us`) gives each cluster exactly
 * its share, whatever the others do.
 *
 * Invariants:
 * - Every process of a cluster is in its group: `start()` runs pg_ctl from a shell that first
 *   writes its own pid into the group's `cgroup.procs`, so the postmaster, and every backend and
 *   auxiliary process it forks later, inherit the group. `processesOutsideGroup()` checks it.
 * - fsync and synchronous_commit stay on: a throughput that needs them off is not a throughput.
 * - Nothing outlives the harness: `destroy()` stops the cluster, removes its data directory and its
 *   group; an exit hook does the same (SIGKILL of the group's own processes) when the harness
 *   dies without calling it. The group's process list is the only list of pids ever signalled.
 * - Port 5432 (the shared main cluster) and ports already listening are refused.
 *
 * Must run as root (cgroups, runuser); the servers run as user `postgres`.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const execFileAsync = promisify(execFile);

/** The PostgreSQL 15 binaries the brief names (Debian's postgresql-15 package). */
export const PG_BIN = process.env.DOCKET_PG_BIN ?? '/usr/lib/postgresql/15/bin';
/** The cgroup v1 `cpu` hierarchy this machine mounts. */
export const CPU_CGROUP_ROOT = process.env.DOCKET_CPU_CGROUP_ROOT ?? '/sys/fs/cgroup/cpu';
/** The cgroup v1 `cpuacct` hierarchy: the cluster joins a group there too, to measure what it used. */
export const CPUACCT_CGROUP_ROOT = process.env.DOCKET_CPUACCT_CGROUP_ROOT ?? '/sys/fs/cgroup/cpuacct';
/** CFS period: 100 ms, the kernel's default; the quota is a share of it. */
const CFS_PERIOD_US = 100_000;
/**
 * cpu.shares of every group made here (the kernel's default is 1024). A quota only caps: on a
 * machine whose cores are busy with other work, a group at the default weight competes as one
 * task against every runnable task of the root group and can get far less than its quota (here
 * 0.1 core of a 0.25 quota with 20 runnable tasks). A high weight makes the quota the one limit.
 */
export const GROUP_CPU_SHARES = 16_384;

/**
 * postgresql.conf for a small box: 2 cores, several clusters and the workers on one machine.
 * fsync and synchronous_commit are written out explicitly so nobody reads them as forgotten.
 */
export const SMALL_BOX_SETTINGS: Readonly<Record<string, string>> = {
  listen_addresses: "'127.0.0.1'",
  max_connections: '60',
  shared_buffers: "'64MB'",
  work_mem: "'4MB'",
  maintenance_work_mem: "'32MB'",
  // The claim statement is planned in microseconds; JIT compiling it under a quarter core would
  // cost more than the query. Parallel workers would leave the group's quota to several processes
  // of one query and blur the cap measurement.
  jit: 'off',
  max_parallel_workers_per_gather: '0',
  max_wal_size: "'1GB'",
  min_wal_size: "'80MB'",
  checkpoint_timeout: "'5min'",
  fsync: 'on',
  synchronous_commit: 'on',
  full_page_writes: 'on',
  logging_collector: 'off',
  log_min_messages: 'warning',
  log_line_prefix: "'%m [%p] '",
};

/** What a set of capped clusters looks like. */
export interface CappedClustersOptions {
  /** One cluster per port; each must be free and not 5432. */
  ports: readonly number[];
  /** Cores each cluster may use (0.25: a quarter core); null: no cap, the group only holds its processes. */
  cpuCores: number | null;
  /** Settings on top of {@link SMALL_BOX_SETTINGS}. */
  settings?: Readonly<Record<string, string>>;
  log?: (line: string) => void;
}

/** The cgroup v1 `cpu.stat` counters of a group. */
export interface CpuStat {
  periods: number;
  throttledPeriods: number;
  throttledMs: number;
}

/** Every cluster still alive in this process, destroyed synchronously if the process exits first. */
const live = new Set<CappedCluster>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const cluster of live) cluster.destroySync();
  });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    // Only when nobody else handles it: then the default would kill us without running 'exit'.
    if (process.listenerCount(signal) === 0) process.once(signal, () => process.exit(130));
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Whether something accepts TCP connections on 127.0.0.1:port. */
export function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** One throwaway cluster in its own CPU group. */
export class CappedCluster {
  /** The group's directory, e.g. /sys/fs/cgroup/cpu/docket-shard-5481 (named by port, so two harnesses never share one). */
  readonly cgroupDir: string;
  /** Its twin in the cpuacct hierarchy (CPU time used), when this machine mounts one. */
  readonly cpuacctDir: string | null;
  readonly dataDir: string;
  private readonly logFile: string;
  private destroyed = false;

  constructor(
    readonly port: number,
    readonly cpuCores: number | null,
    private readonly baseDir: string,
  ) {
    this.cgroupDir = join(CPU_CGROUP_ROOT, `docket-shard-${port}`);
    this.cpuacctDir = existsSync(join(CPUACCT_CGROUP_ROOT, 'cgroup.procs'))
      ? join(CPUACCT_CGROUP_ROOT, `docket-shard-${port}`)
      : null;
    this.dataDir = join(baseDir, `pg-${port}`);
    this.logFile = join(baseDir, `pg-${port}.log`);
  }

  /** The URL of a database on this cluster, user postgres (trust authentication, loopback). */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** initdb as postgres, the settings written, the group created with its quota. */
  init(settings: Readonly<Record<string, string>>): void {
    mkdirSync(this.dataDir, { mode: 0o700 });
    chownSync(this.dataDir, postgresUid(), postgresGid());
    writeFileSync(this.logFile, '');
    chownSync(this.logFile, postgresUid(), postgresGid());
    // --no-sync only for initdb's own files: the server itself runs with fsync on.
    runAsPostgres([
      join(PG_BIN, 'initdb'),
      '-D',
      this.dataDir,
      '-U',
      'postgres',
      '--auth=trust',
      '--no-sync',
      '--no-instructions',
      '-E',
      'UTF8',
      '--locale=C',
    ]);
    const lines = Object.entries({
      ...SMALL_BOX_SETTINGS,
      ...settings,
      port: String(this.port),
      unix_socket_directories: `'${this.dataDir}'`,
    }).map(([key, value]) => `${key} = ${value}`);
    appendFileSync(join(this.dataDir, 'postgresql.conf'), `\n# docket capped cluster\n${lines.join('\n')}\n`);
    if (existsSync(this.cgroupDir)) {
      if (this.groupPids().length > 0) {
        throw new Error(`cgroup ${this.cgroupDir} exists and holds processes: another harness owns port ${this.port}`);
      }
    } else {
      mkdirSync(this.cgroupDir);
    }
    if (this.cpuacctDir && !existsSync(this.cpuacctDir)) mkdirSync(this.cpuacctDir);
    writeFileSync(join(this.cgroupDir, 'cpu.shares'), String(GROUP_CPU_SHARES));
    writeFileSync(join(this.cgroupDir, 'cpu.cfs_period_us'), String(CFS_PERIOD_US));
    const quota = this.cpuCores === null ? -1 : Math.round(this.cpuCores * CFS_PERIOD_US);
    writeFileSync(join(this.cgroupDir, 'cpu.cfs_quota_us'), String(quota));
  }

  /**
   * Starts the server inside its group and waits until it accepts queries. The shell joins the
   * group before it execs pg_ctl, so the postmaster is born inside it and so is every child.
   */
  async start(timeoutMs = 60_000): Promise<void> {
    const pgCtl = [join(PG_BIN, 'pg_ctl'), '-D', this.dataDir, '-l', this.logFile, '-w', '-t', '60', 'start'];
    const joinAcct = this.cpuacctDir ? ` && echo $$ > ${this.cpuacctDir}/cgroup.procs` : '';
    const script = `echo $$ > ${this.cgroupDir}/cgroup.procs${joinAcct} && exec runuser -u postgres -- ${pgCtl.map(shellQuote).join(' ')}`;
    try {
      await execFileAsync('sh', ['-c', script], { timeout: timeoutMs });
    } catch (error) {
      throw new Error(`cluster on port ${this.port} did not start: ${(error as Error).message}\n${this.logTail()}`);
    }
    await this.waitReady(timeoutMs);
  }

  /** Waits until a query succeeds. */
  async waitReady(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    while (Date.now() < deadline) {
      const client = new pg.Client({ connectionString: this.url(), connectionTimeoutMillis: 2_000 });
      try {
        await client.connect();
        await client.query('SELECT 1');
        return;
      } catch (error) {
        last = error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      } finally {
        await client.end().catch(() => {});
      }
    }
    throw new Error(`cluster on port ${this.port} not ready after ${timeoutMs} ms: ${String(last)}\n${this.logTail()}`);
  }

  /** Stops the server (`fast`: sessions ended, checkpoint; `immediate`: no checkpoint, crash recovery at next start). */
  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    if (this.postmasterPid() === null) return;
    await execFileAsync('runuser', [
      '-u',
      'postgres',
      '--',
      join(PG_BIN, 'pg_ctl'),
      '-D',
      this.dataDir,
      '-m',
      mode,
      '-w',
      '-t',
      '60',
      'stop',
    ]);
    await this.waitGroupEmpty(10_000);
  }

  /**
   * `kill -9` of the postmaster, as a crashed database host: then the rest of the group (the
   * backends would notice their parent's death on their own, but a start waits for them), so the
   * next start runs crash recovery at once. Returns when no process of the cluster is left.
   */
  async kill9(): Promise<void> {
    const postmaster = this.postmasterPid();
    if (postmaster !== null) signal(postmaster, 'SIGKILL');
    for (const pid of this.groupPids()) signal(pid, 'SIGKILL');
    await this.waitGroupEmpty(10_000);
    // The killed postmaster can linger as a zombie (this container's init reaps late), and the
    // next postmaster would take its stale postmaster.pid for a live server. The group is empty,
    // so no server of this data directory runs: its lock files are stale for certain.
    for (const file of ['postmaster.pid', `.s.PGSQL.${this.port}.lock`, `.s.PGSQL.${this.port}`]) {
      rmSync(join(this.dataDir, file), { force: true });
    }
  }

  /**
   * The postmaster's pid while it runs, from postmaster.pid; null when down. Alive means in the
   * group: a zombie has left it, while kill(pid, 0) would still succeed on one.
   */
  postmasterPid(): number | null {
    try {
      const pid = Number(readFileSync(join(this.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      return Number.isInteger(pid) && pid > 0 && this.groupPids().includes(pid) ? pid : null;
    } catch {
      return null;
    }
  }

  /** The pids in the group (every process of this cluster). */
  groupPids(): number[] {
    try {
      return readFileSync(join(this.cgroupDir, 'cgroup.procs'), 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map(Number);
    } catch {
      return [];
    }
  }

  /**
   * The postmaster and its children that are NOT in the group; empty when the cap covers the whole
   * cluster, which is what the harness asserts after each start.
   */
  processesOutsideGroup(): number[] {
    const postmaster = this.postmasterPid();
    if (postmaster === null) return [];
    const children = spawnSync('ps', ['-o', 'pid=', '--ppid', String(postmaster)], { encoding: 'utf8' })
      .stdout.split('\n')
      .map((line) => Number(line.trim()))
      .filter((pid) => pid > 0);
    const inGroup = new Set(this.groupPids());
    return [postmaster, ...children].filter((pid) => !inGroup.has(pid));
  }

  /** The group's throttling counters. */
  cpuStat(): CpuStat {
    const fields = Object.fromEntries(
      readFileSync(join(this.cgroupDir, 'cpu.stat'), 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => {
          const [key, value] = line.split(' ');
          return [key, Number(value)];
        }),
    ) as Record<string, number>;
    return {
      periods: fields.nr_periods ?? 0,
      throttledPeriods: fields.nr_throttled ?? 0,
      throttledMs: (fields.throttled_time ?? 0) / 1e6,
    };
  }

  /** CPU time every process of the cluster has used since its group was made, ms (NaN without cpuacct). */
  cpuUsedMs(): number {
    if (!this.cpuacctDir) return Number.NaN;
    return Number(readFileSync(join(this.cpuacctDir, 'cpuacct.usage'), 'utf8')) / 1e6;
  }

  /** The last lines of the server log, for error messages. */
  logTail(lines = 20): string {
    try {
      return readFileSync(this.logFile, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }

  private async waitGroupEmpty(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.groupPids().length > 0) {
      if (Date.now() > deadline) {
        throw new Error(`cluster on port ${this.port}: processes ${this.groupPids().join(', ')} still alive`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Stops the server, removes its data directory and its group. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    try {
      await this.stop('immediate');
    } catch {
      // Falls through to the synchronous path, which kills whatever is left in the group.
    }
    this.destroySync();
  }

  /** The exit hook's path: SIGKILL of the group's processes, then the files and the group. */
  destroySync(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    live.delete(this);
    const deadline = Date.now() + 5_000;
    for (let pids = this.groupPids(); pids.length > 0 && Date.now() < deadline; pids = this.groupPids()) {
      for (const pid of pids) signal(pid, 'SIGKILL');
      sleepSync(20);
    }
    rmSync(this.dataDir, { recursive: true, force: true });
    rmSync(this.logFile, { force: true });
    for (const dir of [this.cgroupDir, this.cpuacctDir]) {
      try {
        if (dir) rmdirSync(dir);
      } catch {
        // A group still holding a dying process cannot be removed yet; an empty leftover harms
        // nobody and init() reuses it.
      }
    }
    try {
      rmdirSync(this.baseDir);
    } catch {
      // Other clusters of the same set still live there.
    }
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

function shellQuote(word: string): string {
  return /^[\w./=:-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

let postgresIds: { uid: number; gid: number } | undefined;
function postgresUid(): number {
  postgresIds ??= { uid: Number(idOf('-u')), gid: Number(idOf('-g')) };
  return postgresIds.uid;
}
function postgresGid(): number {
  postgresUid();
  return postgresIds!.gid;
}
function idOf(flag: string): string {
  return execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim();
}

function runAsPostgres(command: string[]): void {
  const result = spawnSync('runuser', ['-u', 'postgres', '--', ...command], { encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(`${command.join(' ')} failed (${result.status}): ${result.stderr}${result.stdout}`);
  }
}

/**
 * An uncapped group (no quota, {@link GROUP_CPU_SHARES} weight) for the benchmark's own worker
 * processes: they must not be the limit, so they get the same weight as the capped clusters and
 * no cap. Removed by {@link CpuGroup.remove} once its processes are gone.
 */
export class CpuGroup {
  readonly dir: string;

  constructor(name: string) {
    this.dir = join(CPU_CGROUP_ROOT, name);
    if (!existsSync(this.dir)) mkdirSync(this.dir);
    writeFileSync(join(this.dir, 'cpu.shares'), String(GROUP_CPU_SHARES));
    writeFileSync(join(this.dir, 'cpu.cfs_quota_us'), '-1');
  }

  /** Moves a process (all its threads) into the group. */
  add(pid: number): void {
    writeFileSync(join(this.dir, 'cgroup.procs'), String(pid));
  }

  /** Removes the group; its processes must have exited (or moved) first. */
  remove(): void {
    try {
      rmdirSync(this.dir);
    } catch {
      // Still holds a process that is exiting: an empty leftover group harms nobody and is reused.
    }
  }
}

/** Refuses what the harness cannot do here, with the reason. */
export function assertCanCap(): void {
  if (process.getuid?.() !== 0) throw new Error('capped clusters need root (cgroups and runuser)');
  if (!existsSync(join(CPU_CGROUP_ROOT, 'cgroup.procs'))) {
    throw new Error(`no cgroup v1 cpu hierarchy at ${CPU_CGROUP_ROOT}`);
  }
  if (!existsSync(join(PG_BIN, 'initdb'))) throw new Error(`no PostgreSQL binaries at ${PG_BIN}`);
}

/**
 * Creates and starts one capped cluster per port (in parallel), checks that every process of each
 * is inside its group, and returns them. On any failure the clusters made so far are destroyed.
 */
export async function startCappedClusters(options: CappedClustersOptions): Promise<CappedCluster[]> {
  assertCanCap();
  for (const port of options.ports) {
    if (port === 5432) throw new Error('port 5432 is the shared main cluster; capped clusters use their own ports');
    if (await portInUse(port)) throw new Error(`port ${port} is already in use`);
  }
  installExitHook();
  const baseDir = mkdtempSync(join(tmpdir(), 'docket-capped-'));
  // postgres must reach its data directory inside the (root-owned, 0700) temp directory.
  chmodSync(baseDir, 0o755);
  const clusters = options.ports.map((port) => new CappedCluster(port, options.cpuCores, baseDir));
  for (const cluster of clusters) live.add(cluster);
  try {
    for (const cluster of clusters) cluster.init(options.settings ?? {});
    await Promise.all(clusters.map((cluster) => cluster.start()));
    for (const cluster of clusters) {
      const outside = cluster.processesOutsideGroup();
      if (outside.length > 0)
        throw new Error(`port ${cluster.port}: processes ${outside.join(', ')} escaped the cgroup`);
    }
    options.log?.(
      `capped clusters: ports ${options.ports.join(', ')}, ${options.cpuCores === null ? 'no CPU cap' : `${options.cpuCores} core each`}, data in ${baseDir}`,
    );
    return clusters;
  } catch (error) {
    await destroyCappedClusters(clusters);
    throw error;
  }
}

/** Destroys every cluster of a set; never throws. */
export async function destroyCappedClusters(clusters: readonly CappedCluster[]): Promise<void> {
  await Promise.all(clusters.map((cluster) => cluster.destroy().catch(() => cluster.destroySync())));
}

/** What the cap check measured. */
export interface CapMeasurement {
  port: number;
  cpuCores: number | null;
  wallMs: number;
  /** CPU time the busy backend got over `wallMs`, from /proc/<pid>/stat. */
  cpuMs: number;
  /** cpuMs / wallMs: at most the cap (plus a period's rounding) when the cap works. */
  cpuShare: number;
  throttledPeriods: number;
}

const CLOCK_TICKS_PER_SECOND = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU time (user + system) a live process has used, ms, from /proc/<pid>/stat. */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces, inside parentheses): utime is 14th, stime 15th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
}

/**
 * Checks the cap: one backend spins in a PL/pgSQL loop for `ms` of wall time; the CPU time it got
 * divided by the wall time is the share the group allowed it (an uncapped backend on an idle
 * core gets close to 1).
 */
export async function measureCpuCap(cluster: CappedCluster, ms = 3_000): Promise<CapMeasurement> {
  const client = new pg.Client({ connectionString: cluster.url() });
  await client.connect();
  try {
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const before = { cpu: processCpuMs(pid), stat: cluster.cpuStat(), wall: performance.now() };
    await client.query(
      `DO $$ DECLARE until timestamptz := clock_timestamp() + interval '${Math.round(ms)} milliseconds';
         BEGIN WHILE clock_timestamp() < until LOOP END LOOP; END $$`,
    );
    const wallMs = performance.now() - before.wall;
    const cpuMs = processCpuMs(pid) - before.cpu;
    return {
      port: cluster.port,
      cpuCores: cluster.cpuCores,
      wallMs,
      cpuMs,
      cpuShare: cpuMs / wallMs,
      throttledPeriods: cluster.cpuStat().throttledPeriods - before.stat.throttledPeriods,
    };
  } finally {
    await client.end();
  }
}
