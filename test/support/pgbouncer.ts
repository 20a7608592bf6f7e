/**
 * A real pgbouncer (the Debian package, 1.18 on bookworm) in `pool_mode = transaction`, started by
 * a test in front of the main PostgreSQL cluster at 127.0.0.1:5432, so the suite runs the way a
 * production fleet behind a transaction pooler does. Nothing here touches the main cluster: the
 * bouncer only opens ordinary connections to it.
 *
 * - pgbouncer refuses to run as root, so the process is started as the `postgres` user (spawned
 *   with its uid and gid: no `su` or `runuser` wrapper sits between the test and the process it
 *   signals), with its ini, userlist and unix socket in a temporary directory owned by postgres.
 * - Ports come from this suite's range 6432-6439. Two test files running at once each start their
 *   own bouncer: a port is taken only once pgbouncer itself logs that it listens on it, so a port
 *   another bouncer holds is never mistaken for ours (its bind fails and the next port is tried).
 * - One bouncer per test process, shared by every database the process creates and stopped when
 *   the last of them is dropped (and, as a backstop, when the process exits).
 * - When CI=true and pgbouncer is not installed, {@link pgbouncerAvailable} still says true for the
 *   kind to run, and starting it fails with the install command: a missing pooler is a failure in
 *   CI, never a silent skip.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/** The ports this suite may use (its share of the machine: 6432-6439). */
export const PGBOUNCER_PORTS: readonly number[] = [6432, 6433, 6434, 6435, 6436, 6437, 6438, 6439];

/** Where Debian installs the binary; PATH is searched too. */
const PGBOUNCER_CANDIDATES = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'];

/** Whom the bouncer lets in and the server it pools (by default the main cluster, never restarted by any test). */
export interface PgbouncerTarget {
  /** The one user in its userlist (also its admin), default `postgres`. */
  user: string;
  /** That user's password, when the server wants one (stored in the userlist for server logins). */
  password?: string | undefined;
  host: string;
  port: number;
  /** Startup parameters it accepts and drops; default {@link PGBOUNCER_IGNORED_STARTUP_PARAMETERS}. */
  ignoreStartupParameters?: readonly string[] | undefined;
}

/** The main cluster as the tests' direct URL names it. */
export function targetOf(directUrl: string): PgbouncerTarget {
  const parsed = new URL(directUrl);
  return {
    user: decodeURIComponent(parsed.username) || 'postgres',
    password: parsed.password === '' ? undefined : decodeURIComponent(parsed.password),
    host: parsed.hostname || '127.0.0.1',
    port: parsed.port === '' ? 5432 : Number(parsed.port),
  };
}

/** How long pgbouncer gets to log that it listens (it starts in milliseconds; the margin is for a loaded CI box). */
const START_TIMEOUT_MS = 10_000;

/**
 * Startup parameters node-postgres may send that pgbouncer 1.18 cannot pass through: pgbouncer
 * refuses a connection that sends one ("unsupported startup parameter") unless it is listed here.
 * Docket sets `idle_in_transaction_session_timeout` per pool; behind pgbouncer its job is done by
 * pgbouncer's own `idle_transaction_timeout` below (see docs/operations.md, "pgbouncer").
 */
export const PGBOUNCER_IGNORED_STARTUP_PARAMETERS = [
  'extra_float_digits',
  'idle_in_transaction_session_timeout',
  'statement_timeout',
  'lock_timeout',
  'options',
];

/**
 * The path of the pgbouncer binary, or null when it is not installed. DOCKET_TEST_PGBOUNCER names
 * another binary (a build elsewhere; a missing path stands for "not installed").
 */
export function pgbouncerBinary(): string | null {
  const named = process.env.DOCKET_TEST_PGBOUNCER;
  if (named !== undefined && named !== '') return existsSync(named) ? named : null;
  for (const candidate of PGBOUNCER_CANDIDATES) if (existsSync(candidate)) return candidate;
  try {
    const found = execFileSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' }).trim();
    return found === '' ? null : found;
  } catch {
    return null;
  }
}

/** Whether the pgbouncer kind should run: installed, or CI (where a missing pooler must fail, not skip). */
export function pgbouncerAvailable(): boolean {
  return process.env.CI === 'true' || pgbouncerBinary() !== null;
}

/** A running pgbouncer. */
export interface RunningPgbouncer {
  /** The port it listens on (127.0.0.1). */
  readonly port: number;
  /** A URL for `database` through the bouncer, same user as the tests' direct URL. */
  url(database: string): string;
  /** The pgbouncer process's own settings, read from its admin console (`SHOW CONFIG`). */
  config(): Promise<Map<string, string>>;
  /** Stops it (SIGTERM, then SIGKILL after 5 s) and removes its directory. */
  stop(): Promise<void>;
}

/** The uid and gid of `postgres` when this process is root (pgbouncer refuses root), else none. */
function runAsIds(): { uid: number; gid: number } | null {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return null;
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('cannot find the uid of user postgres');
  return { uid, gid };
}

function iniText(dir: string, port: number, target: PgbouncerTarget): string {
  const ignored = target.ignoreStartupParameters ?? PGBOUNCER_IGNORED_STARTUP_PARAMETERS;
  return `;; Written by test/support/pgbouncer.ts for one test process.
[databases]
* = host=${target.host} port=${target.port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir = ${dir}
auth_type = trust
auth_file = ${join(dir, 'userlist.txt')}
admin_users = ${target.user}
pool_mode = transaction
;; Tests open many stores (10 connections each) at once: room for all of them.
max_client_conn = 500
default_pool_size = 20
;; Docket's own idle-in-transaction guard cannot pass through (see the ignored parameters).
idle_transaction_timeout = 60
${ignored.length === 0 ? ';; no ignore_startup_parameters' : `ignore_startup_parameters = ${ignored.join(', ')}`}
;; Logs go to stderr, which the test reads for "listening on".
log_connections = 0
log_disconnections = 0
`;
}

/** Starts one pgbouncer on the first free port of {@link PGBOUNCER_PORTS}. */
export async function startPgbouncer(target: PgbouncerTarget): Promise<RunningPgbouncer> {
  const binary = pgbouncerBinary();
  if (binary === null) {
    throw new Error(
      'pgbouncer is required for the postgres-pgbouncer store kind and is not installed: apt-get install -y pgbouncer',
    );
  }
  const ids = runAsIds();
  const problems: string[] = [];
  for (const port of PGBOUNCER_PORTS) {
    const dir = mkdtempSync(join(tmpdir(), 'docket-pgbouncer-'));
    writeFileSync(join(dir, 'pgbouncer.ini'), iniText(dir, port, target));
    const quoted = (text: string) => `"${text.replace(/"/g, '""')}"`;
    writeFileSync(join(dir, 'userlist.txt'), `${quoted(target.user)} ${quoted(target.password ?? '')}\n`, {
      mode: 0o600,
    });
    if (ids) for (const file of ['', 'pgbouncer.ini', 'userlist.txt']) chownSync(join(dir, file), ids.uid, ids.gid);
    const child = spawn(binary, [join(dir, 'pgbouncer.ini')], {
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(ids ?? {}),
    });
    const outcome = await waitUntilListening(child, port);
    if (outcome === 'listening') return running(child, port, dir, target.user);
    problems.push(`port ${port}: ${outcome}`);
    rmSync(dir, { recursive: true, force: true });
  }
  throw new Error(`pgbouncer did not start on any of ports ${PGBOUNCER_PORTS.join(', ')}:\n${problems.join('\n')}`);
}

/** Resolves 'listening' once pgbouncer logs so, or the reason it did not (its exit and log tail). */
function waitUntilListening(child: ChildProcess, port: number): Promise<'listening' | string> {
  return new Promise((resolve) => {
    let log = '';
    const listening = new RegExp(`listening on 127\\.0\\.0\\.1:${port}\\b`);
    // A taken port is only a WARNING to pgbouncer, which then runs on its unix socket alone.
    const portTaken = new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}\\b[^\\n]*`);
    const timer = setTimeout(() => {
      finish(`no "listening on" within ${START_TIMEOUT_MS} ms; log: ${log.slice(-500)}`);
      child.kill('SIGKILL');
    }, START_TIMEOUT_MS);
    const onData = (chunk: Buffer) => {
      log += chunk.toString('utf8');
      const taken = portTaken.exec(log);
      if (taken) {
        child.kill('SIGKILL');
        finish(taken[0]);
      } else if (listening.test(log)) finish('listening');
    };
    const onExit = (code: number | null, signal: string | null) =>
      finish(`exited (code ${code}, signal ${signal}); log: ${log.slice(-500)}`);
    const finish = (outcome: string) => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      // Keep draining its output, so a chatty bouncer never blocks on a full pipe.
      child.stdout?.resume();
      child.stderr?.resume();
      resolve(outcome);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
  });
}

function running(child: ChildProcess, port: number, dir: string, user: string): RunningPgbouncer {
  let exited = child.exitCode !== null;
  child.once('exit', () => {
    exited = true;
  });
  // A test process that dies without dropping its databases must not leave the bouncer behind.
  const killAtExit = () => {
    if (!exited) child.kill('SIGKILL');
  };
  process.once('exit', killAtExit);
  const url = (database: string) => `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${database}`;
  return {
    port,
    url,
    async config() {
      const admin = new pg.Client({ connectionString: url('pgbouncer') });
      await admin.connect();
      try {
        // The admin console speaks only the simple query protocol: no parameters.
        const rows = await admin.query<{ key: string; value: string }>('SHOW CONFIG');
        return new Map(rows.rows.map((row) => [row.key, row.value]));
      } finally {
        await admin.end();
      }
    },
    async stop() {
      process.off('exit', killAtExit);
      if (!exited) {
        const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await gone;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let shared: { bouncer: Promise<RunningPgbouncer>; users: number } | null = null;

/**
 * The test process's shared bouncer, started on first use; call the returned release once per
 * acquire. The last release stops it, so a later acquire starts a fresh one.
 */
export async function acquirePgbouncer(
  target: PgbouncerTarget,
): Promise<{ bouncer: RunningPgbouncer; release: () => Promise<void> }> {
  if (shared === null) shared = { bouncer: startPgbouncer(target), users: 0 };
  const current = shared;
  current.users += 1;
  let bouncer: RunningPgbouncer;
  try {
    bouncer = await current.bouncer;
  } catch (error) {
    current.users -= 1;
    if (shared === current) shared = null;
    throw error;
  }
  let released = false;
  return {
    bouncer,
    release: async () => {
      if (released) return;
      released = true;
      current.users -= 1;
      if (current.users > 0) return;
      if (shared === current) shared = null;
      await bouncer.stop();
    },
  };
}
