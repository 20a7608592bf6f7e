/**
 * Scratch PostgreSQL databases for the benchmark: each system gets its own database, created fresh
 * and dropped afterwards, so no system reads another's tables or inherits its bloat.
 */
import pg from 'pg';

/** The maintenance database the harness connects to for CREATE/DROP DATABASE. */
export const ADMIN_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Every scratch database name starts with this, so cleanup can never touch anything else. */
export const SCRATCH_PREFIX = 'docket_bench_';

/**
 * This run's scratch database for `what`: the process id is part of the name, so two runs at once
 * (a CI smoke run beside a full run) never drop each other's databases.
 */
export function scratchName(what: string): string {
  return `${SCRATCH_PREFIX}${process.pid}_${what.replace(/[^a-z0-9]+/gi, '_').toLowerCase()}`;
}

/** Whether a process with this id is alive on this host. */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The URL of a database on the same server as {@link ADMIN_URL}. */
export function databaseUrl(name: string): string {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The database name in a PostgreSQL URL. */
export function databaseNameOf(url: string): string {
  return decodeURIComponent(new URL(url).pathname.slice(1));
}

function assertScratch(name: string): void {
  if (!name.startsWith(SCRATCH_PREFIX) || !/^[a-z0-9_]+$/.test(name)) {
    throw new Error(`refusing to touch database ${JSON.stringify(name)}: not a bench scratch database`);
  }
}

/** Runs one function with a short-lived admin connection. */
export async function withAdmin<T>(fn: (client: pg.Client) => Promise<T>, url = ADMIN_URL): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * Committed transactions of one database so far (PostgreSQL's cumulative statistics). PostgreSQL
 * 15 publishes a backend's counters when it goes idle, at most once a second, holding the rest up
 * to 10 s, and when it exits: read after that, or after {@link waitForNoSessions}.
 */
export async function xactCommits(database: string): Promise<number> {
  return withAdmin(async (client) => {
    const { rows } = await client.query<{ n: string }>(
      'SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = $1',
      [database],
    );
    return Number(rows[0]?.n ?? Number.NaN);
  });
}

/**
 * Resolves true once no session is connected to `database`, false after `timeoutMs`. A backend
 * publishes its statistics on exit before it leaves pg_stat_activity (PostgreSQL 15: its
 * before-exit hook runs ahead of the one that clears its entry), so a count read after this holds
 * every transaction of the sessions that were there, though a client's `end()` resolves before
 * its backend has exited.
 */
export async function waitForNoSessions(database: string, timeoutMs: number): Promise<boolean> {
  return withAdmin(async (client) => {
    const deadline = hostNowMs() + timeoutMs;
    for (;;) {
      const { rows } = await client.query<{ n: string }>(
        'SELECT count(*)::text AS n FROM pg_stat_activity WHERE datname = $1',
        [database],
      );
      if (Number(rows[0]?.n) === 0) return true;
      if (hostNowMs() > deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });
}

/**
 * ANALYZE of every table in the database at `url`: what autovacuum does to a new table once about
 * fifty of its rows changed, after which the planner sizes the table by its statistics.
 */
export async function analyzeDatabase(url: string): Promise<void> {
  await withAdmin((client) => client.query('ANALYZE').then(() => undefined), url);
}

/** Drops (forcing out stale sessions) and recreates a scratch database. */
export async function recreateDatabase(name: string): Promise<string> {
  assertScratch(name);
  await withAdmin(async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${name}`);
  });
  return databaseUrl(name);
}

/** Drops a scratch database if it exists. */
export async function dropDatabase(name: string): Promise<void> {
  assertScratch(name);
  await withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

/**
 * Drops the scratch databases that crashed earlier runs left: those whose run's process is gone.
 * A run still going (another process id that is alive) keeps its databases.
 */
export async function dropAllScratchDatabases(): Promise<string[]> {
  return withAdmin(async (client) => {
    const { rows } = await client.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE datname LIKE '${SCRATCH_PREFIX}%'`,
    );
    const stale = rows
      .map((row) => row.datname)
      .filter((name) => {
        const pid = Number(/^docket_bench_(\d+)_/.exec(name)?.[1]);
        return !(Number.isInteger(pid) && pid !== process.pid && processAlive(pid));
      });
    for (const name of stale) {
      assertScratch(name);
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
    return stale;
  });
}

/**
 * The database clock minus this host's clock, in ms, from the best of several round trips (the
 * sample with the shortest round trip bounds the error by half of it, plus 1 ms for whole-ms reads
 * of the wall clock).
 */
export async function databaseClockOffsetMs(samples = 20): Promise<{ offsetMs: number; errorBoundMs: number }> {
  return withAdmin(async (client) => {
    let best = { offsetMs: 0, errorBoundMs: Number.POSITIVE_INFINITY };
    for (let n = 0; n < samples; n += 1) {
      // Against this host's wall clock (`Date.now()`, whole ms, hence the 1 ms in the bound), not
      // hostNowMs: the question is whether the workers' clock is the database's, and hostNowMs
      // follows the monotonic clock, which parts from the wall clock when the host's is slewed.
      const before = Date.now();
      const { rows } = await client.query<{ ms: string }>(
        `SELECT (extract(epoch FROM clock_timestamp()) * 1000)::text AS ms`,
      );
      const after = Date.now();
      const errorBoundMs = (after - before) / 2 + 1;
      if (errorBoundMs < best.errorBoundMs) {
        best = { offsetMs: Number(rows[0]?.ms) - (before + after) / 2, errorBoundMs };
      }
    }
    return best;
  });
}

/** The database's current time, read by one query. */
export async function databaseNow(url: string): Promise<Date> {
  return withAdmin(async (client) => {
    const { rows } = await client.query<{ now: Date }>('SELECT clock_timestamp() AS now');
    return rows[0]!.now;
  }, url);
}

/**
 * The server settings a reader of the results needs: with autovacuum off (as on this machine's CI
 * configuration) dead rows are never reclaimed during a run, which a drain over a large backlog
 * and a long soak feel directly.
 */
export async function postgresSettings(): Promise<Record<string, string>> {
  return withAdmin(async (client) => {
    const { rows } = await client.query<{ name: string; setting: string; unit: string | null }>(
      `SELECT name, setting, unit FROM pg_settings
        WHERE name IN ('autovacuum', 'autovacuum_naptime', 'synchronous_commit', 'fsync', 'shared_buffers', 'max_connections')
        ORDER BY name`,
    );
    return Object.fromEntries(rows.map((row) => [row.name, row.unit ? `${row.setting} (${row.unit})` : row.setting]));
  });
}

/** The variable through which the first bench process hands its clock anchor to the processes it starts. */
export const CLOCK_ANCHOR_ENV = 'DOCKET_BENCH_CLOCK_ANCHOR_MS';

/** This host's monotonic clock (CLOCK_MONOTONIC, one clock for every process on the host), ms. */
function hostMonotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/**
 * The offset from the host's monotonic clock to {@link hostNowMs}: inherited from the process
 * that started this one, or, in the first (the harness), the wall clock minus the monotonic one
 * when it starts, handed on through the environment to every process forked after.
 */
export function clockAnchorMs(env: NodeJS.ProcessEnv = process.env): number {
  const inherited = env[CLOCK_ANCHOR_ENV];
  if (inherited !== undefined && inherited !== '' && Number.isFinite(Number(inherited))) return Number(inherited);
  const anchor = Date.now() - hostMonotonicMs();
  env[CLOCK_ANCHOR_ENV] = String(anchor);
  return anchor;
}

const anchorMs = clockAnchorMs();

/**
 * The bench's clock for times compared between processes (a submit in the harness, a start in a
 * worker), in ms with sub-millisecond resolution: the host's monotonic clock plus one anchor that
 * every bench process shares ({@link clockAnchorMs}), so two processes always agree, whatever the
 * wall clock does. Each process once anchored itself on the wall clock instead, and this VM's wall
 * clock has been seen to step 2.7 s and to run 5 ms a second ahead of the monotonic one for
 * minutes on end, which turned into latency (or voided the run, once that was checked).
 * Reads near the wall clock when the harness starts, and is not the database's clock: the
 * spike's lateness, which is about the database's clock, is read from `Date.now()`
 * (workloads.ts, spikeRun).
 */
export function hostNowMs(): number {
  return hostMonotonicMs() + anchorMs;
}
