/**
 * The partition test's moving parts: its own PostgreSQL cluster reachable over a veth pair, real
 * `docket work` processes (one inside the network namespace, one in the root namespace), the marks
 * their handlers write, and a sampler that watches the database side (pg_stat_activity, pg_locks,
 * the job's row) while the namespace is cut off.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { resolve } from 'node:path';
import type pg from 'pg';
import { type ChaosCluster, chaosCluster } from '../stress/chaos-cluster.js';
import type { PartitionNetwork } from './network-namespace.js';
import type { PartitionMark } from './partition-handlers.js';

/** The repository root: `docket work` runs src/cli/main.ts through tsx from here. */
export const REPO_ROOT = resolve(import.meta.dirname, '../..');

/** This test's cluster port (the partition helper's range; 5432 is the shared main cluster). */
export const PARTITION_PG_PORT = Number(process.env.DOCKET_PARTITION_PG_PORT ?? 5460);

/**
 * Server settings that bound how long PostgreSQL keeps the session of a client it can no longer
 * reach (docs/operations.md, "Network partitions", recommends the same kind of values):
 * - keepalives: an idle session whose client went silent is dropped after idle + interval × count
 *   = 2 + 1 × 3 = 5 s;
 * - tcp_user_timeout: a session with unacknowledged data towards the client (a reply in flight)
 *   is dropped after 4 s, where keepalives do not apply;
 * - idle_in_transaction_session_timeout: a session left inside a transaction (here the handler's
 *   own, holding a row lock) is ended after 2 s, releasing its locks.
 */
export const PARTITION_SERVER_SETTINGS = Object.freeze({
  tcp_keepalives_idle: '2',
  tcp_keepalives_interval: '1',
  tcp_keepalives_count: '3',
  tcp_user_timeout: '4000',
  idle_in_transaction_session_timeout: '2000',
});

/** The cluster `partition` on {@link PARTITION_PG_PORT}, listening on loopback and the veth's root-side address. */
export function partitionCluster(network: PartitionNetwork): ChaosCluster {
  return chaosCluster({
    name: 'partition',
    port: PARTITION_PG_PORT,
    listenAddresses: [network.hostAddress],
    trustNetworks: [`${network.namespaceAddress}/32`],
    settings: PARTITION_SERVER_SETTINGS,
  });
}

/** Held while a partition test runs: its port, cluster name and leftover sweep are machine-wide. */
const RUN_LOCK = '/tmp/docket-partition-test.lock';

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the machine-wide run lock (a file naming the holder's pid), waiting up to `timeoutMs` for
 * another run to finish; a lock whose holder is gone is taken over. Only the holder may sweep
 * leftover namespaces and recreate the cluster, so two runs can never tear down each other's.
 * Returns the release function.
 */
export async function acquireRunLock(timeoutMs: number): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(RUN_LOCK, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(RUN_LOCK, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = Number(readFileSync(RUN_LOCK, { encoding: 'utf8', flag: 'r' }).trim() || 0);
    if (!holder || !processAlive(holder)) {
      rmSync(RUN_LOCK, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `another partition test (pid ${holder}) holds ${RUN_LOCK}; they cannot run at once on one machine`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The cluster's server log (Debian's location), to see which timeout ended a session. */
export function clusterLog(cluster: ChaosCluster): string {
  return readFileSync(`/var/log/postgresql/postgresql-${cluster.version}-${cluster.name}.log`, 'utf8');
}

/** A `docket work` process the test started. */
export interface WorkerProcess {
  role: 'partitioned' | 'peer';
  id: string;
  child: ChildProcess;
  /** Everything it wrote to stdout (pino JSON lines) and stderr so far. */
  output(): string;
  /** Resolves with the exit code (or signal name) when the process ends. */
  exited: Promise<number | string>;
  /** Whether it has exited. */
  hasExited(): boolean;
}

/** How a worker process is started. */
export interface WorkerProcessOptions {
  role: 'partitioned' | 'peer';
  /** Run inside this network namespace (through `ip netns exec`); the root namespace when omitted. */
  network?: PartitionNetwork | undefined;
  /** The Docket URL (with ?schema=). */
  url: string;
  /** The handler's own connection URL (no schema parameter). */
  appUrl: string;
  effectsTable: string;
  marksFile: string;
  /** Extra `docket work` flags (lease, heartbeat, poll, connection settings). */
  flags: readonly string[];
}

/** Starts `docket work` with the partition handlers; see {@link WorkerProcessOptions}. */
export function startWorkerProcess(options: WorkerProcessOptions): WorkerProcess {
  const id = `partition-${options.role}`;
  const docketArgv = [
    '--import',
    'tsx',
    resolve(REPO_ROOT, 'src/cli/main.ts'),
    'work',
    '--db',
    options.url,
    '--handlers',
    resolve(REPO_ROOT, 'test/partition/partition-handlers.ts'),
    '--id',
    id,
    ...options.flags,
  ];
  const [command, argv] = options.network
    ? ['ip', ['netns', 'exec', options.network.namespace, process.execPath, ...docketArgv]]
    : [process.execPath, docketArgv];
  const env = { ...process.env };
  delete env.DOCKET_DATABASE_URL;
  const child = spawn(command, argv, {
    cwd: REPO_ROOT,
    env: {
      ...env,
      DOCKET_PARTITION_ROLE: options.role,
      DOCKET_PARTITION_MARKS: options.marksFile,
      DOCKET_PARTITION_APP_URL: options.appUrl,
      DOCKET_PARTITION_EFFECTS_TABLE: options.effectsTable,
    },
    // stdin stays open for the process's life: the handlers module exits when it closes (the test died).
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  let exitedFlag = false;
  const exited = new Promise<number | string>((resolveExit) => {
    child.once('close', (code, signal) => {
      exitedFlag = true;
      resolveExit(code ?? signal ?? 'unknown');
    });
  });
  return { role: options.role, id, child, output: () => output, exited, hasExited: () => exitedFlag };
}

/** Resolves when `predicate` holds, polling every `intervalMs`; throws `describe()` after `timeoutMs`. */
export async function waitFor(
  predicate: () => boolean | Promise<boolean>,
  timeoutMs: number,
  describe: () => string,
  intervalMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${describe()}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** The marks written so far. */
export function readMarks(file: string): PartitionMark[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as PartitionMark);
}

/** The pino lines of a worker's output whose `msg` starts with `prefix`. */
export function logLines(worker: WorkerProcess, prefix: string): Record<string, unknown>[] {
  return worker
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        return {};
      }
    })
    .filter((entry) => typeof entry.msg === 'string' && entry.msg.startsWith(prefix));
}

/** One session from the namespace, as pg_stat_activity shows it. */
export interface DatabaseSession {
  pid: number;
  application: string;
  state: string | null;
  /** When its open transaction began (database clock, epoch ms), null outside a transaction. */
  xactStartMs: number | null;
}

/** What one look at the database side found about the namespace's sessions and the job. */
export interface DatabaseSample {
  at: number;
  /** Sessions from the namespace's address, by application_name and state. */
  sessions: DatabaseSession[];
  /** Locks held by the namespace's Docket sessions (application_name 'docket'), with the session's state. */
  docketLocks: { pid: number; state: string | null; locktype: string; relation: string | null; mode: string }[];
  /** The job's row. */
  job: { state: string; token: number; leaseOwner: string | null } | undefined;
}

/** Reads pg_stat_activity, pg_locks and the job's row in one statement (one snapshot). */
export async function sampleDatabase(
  admin: pg.Client,
  network: PartitionNetwork,
  jobsTable: string,
  jobId: string,
): Promise<DatabaseSample> {
  const result = await admin.query<{
    sessions: DatabaseSession[] | null;
    docket_locks: DatabaseSample['docketLocks'] | null;
    job: { state: string; token: number; lease_owner: string | null } | null;
  }>(
    `SELECT
       (SELECT json_agg(json_build_object('pid', pid, 'application', application_name, 'state', state,
                                          'xactStartMs', (extract(epoch FROM xact_start) * 1000)::bigint))
          FROM pg_stat_activity WHERE client_addr = $1::inet) AS sessions,
       (SELECT json_agg(json_build_object('pid', a.pid, 'state', a.state, 'locktype', l.locktype,
                                          'relation', l.relation::regclass::text, 'mode', l.mode))
          FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE a.client_addr = $1::inet AND a.application_name = 'docket') AS docket_locks,
       (SELECT json_build_object('state', state, 'token', token, 'lease_owner', lease_owner)
          FROM ${jobsTable} WHERE id = $2::bigint) AS job`,
    [network.namespaceAddress, jobId],
  );
  const row = result.rows[0];
  return {
    at: Date.now(),
    sessions: row?.sessions ?? [],
    docketLocks: row?.docket_locks ?? [],
    job: row?.job ? { state: row.job.state, token: Number(row.job.token), leaseOwner: row.job.lease_owner } : undefined,
  };
}
