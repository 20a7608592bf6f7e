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
 *   process ids (under vitest, the test runner's own pid too, so the clusters live for the whole
 *   run and no test file pays for a restart another one just did). The first user starts the
 *   clusters and a detached reaper (a small shell loop) that stops them and removes their data
 *   once no user process is alive: vitest ends its forks with a signal, so an exit hook alone
 *   would leave the clusters running.
 */
import { execFileSync, spawn } from 'node:child_process';
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
const REAPER = join(ROOT, 'reaper.pid');

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

/** This process and, under vitest, the runner that forked it: the clusters live while either does. */
function ownUsers(): number[] {
  return process.env.VITEST ? [process.pid, process.ppid] : [process.pid];
}

/**
 * Starts the reaper: every 2 s it takes the mutex and, when no listed user is alive, stops every
 * shard cluster (the spare too) and removes the data, then exits. Detached, so it outlives us.
 */
function startReaper(): void {
  const ports = [...SHARD_CLUSTER_PORTS, SPARE_SHARD_PORT];
  const stops = ports
    .map(
      (port) =>
        `[ -f ${dataDir(port)}/postmaster.pid ] && runuser -u postgres -- ${join(PG_BIN, 'pg_ctl')} -D ${dataDir(port)} -m immediate -w stop >/dev/null 2>&1`,
    )
    .join('; ');
  const script = `
    while true; do
      sleep 2
      if mkdir ${MUTEX} 2>/dev/null; then
        echo $$ > ${MUTEX}/pid
        alive=0
        for pid in $(cat ${USERS} 2>/dev/null); do kill -0 "$pid" 2>/dev/null && alive=1; done
        if [ "$alive" = 0 ]; then
          ${stops}
          rm -rf ${ports.map((port) => `${dataDir(port)} ${join(ROOT, `log-${port}.txt`)}`).join(' ')} ${USERS} ${REAPER}
          rm -rf ${MUTEX}
          exit 0
        fi
        rm -rf ${MUTEX}
      fi
    done`;
  const child = spawn('bash', ['-c', script], { detached: true, stdio: 'ignore' });
  if (child.pid !== undefined) writeFileSync(REAPER, String(child.pid));
  child.unref();
}

function reaperAlive(): boolean {
  if (!existsSync(REAPER)) return false;
  const pid = Number(readFileSync(REAPER, 'utf8'));
  return pid > 0 && processAlive(pid);
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
    // The two folders the server writes in (its log in the root, its data), not the root's other
    // contents: a recursive chown of the root walked into the mutex directory that other test
    // processes create and remove meanwhile, and failed when one vanished mid-walk (CI at
    // 2874225: "chown: cannot access '/tmp/docket-shard-clusters/mutex'").
    execFileSync('chown', ['postgres:postgres', ROOT, dir]);
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

/**
 * Starts the three shared shard clusters unless this run already has them, and counts this
 * process (and its vitest runner) as a user; the reaper stops them once no user is alive.
 */
export function acquireShardClusters(): Promise<void> {
  held ??= withMutex(async () => {
    const users = readUsers();
    writeFileSync(USERS, [...new Set([...users, ...ownUsers()])].join('\n'));
    if (!reaperAlive()) startReaper();
    for (const port of SHARD_CLUSTER_PORTS) await startCluster(port);
  }).catch((error) => {
    held = null;
    throw error;
  });
  return held;
}

/** The URL of schema `schema` on the cluster at `port` (the store creates it on open). */
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
