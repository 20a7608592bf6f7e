/**
 * Throwaway PostgreSQL 15 clusters for the sharded store's tests: ports 5471, 5472 and 5473 are
 * the three shared shard clusters (the `postgres-sharded` store kind, test/support/stores.ts);
 * 5474 is a spare that one test file owns at a time (it is stopped and restarted, and added as a
 * fourth shard). Nothing here touches the main cluster on 5432.
 *
 * - Built with initdb / pg_ctl from /usr/lib/postgresql/15/bin, run as the `postgres` user
 *   (PostgreSQL refuses root), data under /tmp/docket-shard-clusters, trust auth on loopback,
 *   fsync off (throwaway data; the tests are about routing, not durability of one cluster).
 * - Shared machine-wide by every test process of a run: a mutex directory guards a users file of
 *   process ids. The first user starts the clusters; they stay up while any user process lives,
 *   and the last one to exit stops them and removes their data (an exit hook, so a test file
 *   never pays for a restart another one just did). A process that dies without its hook is
 *   pruned by the next acquirer, so a crashed run never leaves a stale user behind.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

/** The three shared shard clusters. */
export const SHARD_CLUSTER_PORTS: readonly number[] = [5471, 5472, 5473];
/** The spare cluster a single test file starts, stops and adds as a fourth shard. */
export const SPARE_SHARD_PORT = 5474;

const PG_BIN = '/usr/lib/postgresql/15/bin';
const ROOT = '/tmp/docket-shard-clusters';
const MUTEX = join(ROOT, 'mutex');
const USERS = join(ROOT, 'users');

/** A shard cluster's URL for a database on it. */
export function shardClusterUrl(port: number, database = 'postgres'): string {
  return `postgres://postgres@127.0.0.1:${port}/${database}`;
}

function dataDir(port: number): string {
  return join(ROOT, `data-${port}`);
}

function asPostgres(command: string, args: string[], timeoutMs = 60_000): string {
  return execFileSync('runuser', ['-u', 'postgres', '--', join(PG_BIN, command), ...args], {
    encoding: 'utf8',
    timeout: timeoutMs,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function withMutex<T>(fn: () => Promise<T>): Promise<T> {
  mkdirSync(ROOT, { recursive: true });
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(MUTEX);
      writeFileSync(join(MUTEX, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      let holder = 0;
      try {
        holder = Number(readFileSync(join(MUTEX, 'pid'), 'utf8'));
      } catch {
        // Created but not yet written: the holder is a moment away from writing it.
      }
      if (holder && !processAlive(holder)) rmSync(MUTEX, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`shard clusters: ${MUTEX} held by pid ${holder} for 120 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(MUTEX, { recursive: true, force: true });
  }
}

function readUsers(): number[] {
  if (!existsSync(USERS)) return [];
  return readFileSync(USERS, 'utf8')
    .split('\n')
    .map(Number)
    .filter((pid) => pid > 0 && processAlive(pid));
}

/** Whether a cluster answers on `port`. */
export async function clusterAnswers(port: number): Promise<boolean> {
  const client = new pg.Client({ connectionString: shardClusterUrl(port), connectionTimeoutMillis: 2000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Creates (when missing) and starts the cluster on `port`; resolves once it takes connections. */
export async function startCluster(port: number): Promise<void> {
  if (!existsSync(join(PG_BIN, 'initdb'))) {
    throw new Error(`PostgreSQL 15 server binaries are missing (${PG_BIN}); install postgresql-15`);
  }
  if (await clusterAnswers(port)) return;
  const dir = dataDir(port);
  if (!existsSync(join(dir, 'PG_VERSION'))) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    execFileSync('chown', ['-R', 'postgres:postgres', ROOT]);
    asPostgres('initdb', ['-D', dir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  }
  execFileSync('chown', ['-R', 'postgres:postgres', dir]);
  asPostgres('pg_ctl', [
    '-D',
    dir,
    '-l',
    join(ROOT, `log-${port}.txt`),
    '-w',
    '-t',
    '60',
    '-o',
    `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB`,
    'start',
  ]);
}

/** Stops the cluster on `port` (fast shutdown: sessions are ended, as an operator's restart does). */
export function stopCluster(port: number, mode: 'fast' | 'immediate' = 'fast'): void {
  const dir = dataDir(port);
  if (!existsSync(join(dir, 'postmaster.pid'))) return;
  asPostgres('pg_ctl', ['-D', dir, '-m', mode, '-w', '-t', '60', 'stop']);
}

let held: Promise<void> | null = null;
let exitHookInstalled = false;

/**
 * Starts the three shared shard clusters unless this run already has them, and counts this
 * process as a user until {@link releaseShardClusters} (or its exit).
 */
export function acquireShardClusters(): Promise<void> {
  held ??= withMutex(async () => {
    const users = readUsers();
    for (const port of SHARD_CLUSTER_PORTS) await startCluster(port);
    writeFileSync(USERS, [...new Set([...users, process.pid])].join('\n'));
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.once('exit', releaseOnExit);
    }
  }).catch((error) => {
    held = null;
    throw error;
  });
  return held;
}

/** Stops this process's use; the last user stops the clusters and removes their data. */
export async function releaseShardClusters(): Promise<void> {
  if (held === null) return;
  held = null;
  await withMutex(async () => {
    const users = readUsers().filter((pid) => pid !== process.pid);
    writeFileSync(USERS, users.join('\n'));
    if (users.length > 0) return;
    for (const port of SHARD_CLUSTER_PORTS) stopCluster(port, 'immediate');
    for (const port of SHARD_CLUSTER_PORTS) rmSync(dataDir(port), { recursive: true, force: true });
  });
}

/** At exit (synchronous: no await there): drop this pid; the last user stops the clusters and removes their data. */
function releaseOnExit(): void {
  try {
    const users = readUsers().filter((pid) => pid !== process.pid);
    writeFileSync(USERS, users.join('\n'));
    if (users.length === 0 && held !== null && !existsSync(MUTEX)) {
      for (const port of SHARD_CLUSTER_PORTS) stopCluster(port, 'immediate');
      for (const port of SHARD_CLUSTER_PORTS) rmSync(dataDir(port), { recursive: true, force: true });
    }
  } catch {
    // Exiting anyway; the next run starts from whatever is left.
  }
}

/** Creates a fresh, uniquely named schema holder on a cluster: the URL of a new schema there. */
export function shardSchemaUrl(port: number, schema: string): string {
  return `${shardClusterUrl(port)}?schema=${schema}`;
}

/** Drops `schema` on the cluster at `port` (ignores a cluster that is down). */
export async function dropShardSchema(port: number, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: shardClusterUrl(port), connectionTimeoutMillis: 5000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } catch {
    // A cluster already stopped by the last user has nothing left to drop.
  } finally {
    await client.end().catch(() => {});
  }
}
