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
 * sample with the shortest round trip bounds the error by half of it).
 */
export async function databaseClockOffsetMs(samples = 20): Promise<{ offsetMs: number; errorBoundMs: number }> {
  return withAdmin(async (client) => {
    let best = { offsetMs: 0, errorBoundMs: Number.POSITIVE_INFINITY };
    for (let n = 0; n < samples; n += 1) {
      const before = wallNowMs();
      const { rows } = await client.query<{ ms: string }>(
        `SELECT (extract(epoch FROM clock_timestamp()) * 1000)::text AS ms`,
      );
      const after = wallNowMs();
      const roundTrip = after - before;
      if (roundTrip / 2 < best.errorBoundMs) {
        best = { offsetMs: Number(rows[0]?.ms) - (before + after) / 2, errorBoundMs: roundTrip / 2 };
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

/** What {@link resyncWallClock} added to this process's wall time after the host's clock moved. */
let wallCorrectionMs = 0;

/**
 * Wall-clock time in ms with sub-millisecond resolution, comparable between processes on this
 * host: each process anchors it on the wall clock when it starts (`performance.timeOrigin`) and
 * advances it by the monotonic clock. If the host's wall clock is stepped or slewed later, a
 * process started before that disagrees with one started after it (seen on this VM: 2.7 s, and
 * 5 ms more per second for half a minute), which {@link resyncWallClock} detects.
 */
export function wallNowMs(): number {
  return performance.timeOrigin + performance.now() + wallCorrectionMs;
}

/** The widest bracket of monotonic time a {@link resyncWallClock} reading may span. */
const RESYNC_BRACKET_LIMIT_MS = 0.5;

/**
 * How far {@link wallNowMs} has drifted from the wall clock (`Date.now()`, whole ms, so normally
 * between -1 and 0), re-anchoring it when the drift exceeds 2 ms. The harness calls it around each
 * run: its worker processes start anchored on the wall clock, so a drift during a run means the
 * times that run compared across processes are void.
 *
 * The wall clock is read between two readings of {@link wallNowMs}, and read again if those are
 * more than half a millisecond apart: on a loaded 2-core machine the process can be descheduled
 * between two reads for several ms, which would otherwise look like a step of the clock and
 * re-anchor it wrongly (a CI run failed this way).
 */
export function resyncWallClock(): number {
  let driftMs = 0;
  for (let attempt = 0; attempt < 10; attempt++) {
    const before = wallNowMs();
    const wall = Date.now();
    const after = wallNowMs();
    driftMs = wall - before;
    if (after - before <= RESYNC_BRACKET_LIMIT_MS) break;
  }
  if (Math.abs(driftMs) > 2) wallCorrectionMs += driftMs;
  return driftMs;
}
