/**
 * The PostgreSQL connection options, their defaults and the one parser that checks them. The
 * library (`Docket.open`, `openStore`, `PostgresStore.open`), `docket work` and the other commands
 * (flags, environment, config file) and `docket serve` all hand their values to
 * {@link resolvePostgresConnectionOptions}, so a value is refused by the same rule, in the same
 * words, on every face. Pure: no driver import, so the CLI can read the defaults for `--help`.
 *
 * What each setting protects against (docs/operations.md, "Timeouts and keepalives"):
 * - `statementTimeoutMs`: a statement stuck on the server (a lock wait behind a stuck session,
 *   a runaway plan) is cancelled by the server, and the operation fails into its retry path.
 * - `idleInTransactionTimeoutMs`: a session of ours left idle inside a transaction (its process
 *   froze, or the network to it was cut) is ended by the server, so no row lock is held forever.
 * - `keepAliveDelayMs`: TCP keepalives start probing a silent connection after this delay, so a
 *   peer that vanished without a FIN is eventually found instead of waited on forever.
 * - `connectAttemptTimeoutMs`: one connection attempt (or a wait for a free pooled connection).
 * - `connectTimeoutMs`: how long opening the store keeps retrying a database that is not up yet.
 * - `listenUrl`: where the LISTEN connection goes (a direct URL when the main one is a
 *   transaction pooler), or `false` for none at all: workers then poll.
 */
import { ConfigurationError } from '../../job/errors.js';

/** Default server-side `statement_timeout`, ms: far above any of Docket's own statements (milliseconds each). */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;
/** Default `idle_in_transaction_session_timeout`, ms: Docket's transactions never wait between statements. */
export const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000;
/** Default idle time before the first TCP keepalive probe, ms. */
export const DEFAULT_KEEP_ALIVE_DELAY_MS = 10_000;
/** Default limit on one connection attempt (TCP, TLS, authentication) or a wait for a pooled connection, ms. */
export const DEFAULT_CONNECT_ATTEMPT_TIMEOUT_MS = 10_000;
/** How long {@link PostgresStore.open} keeps retrying a database that is not reachable yet, ms. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 30_000;
/**
 * How much longer than `statementTimeoutMs` the client waits for an answer before it gives the
 * connection up as dead. The server cancels a slow statement itself at `statementTimeoutMs` and
 * answers with an error; no answer at all by this margin later means the socket is half-open
 * (the server or the network vanished), which keepalives alone would take minutes to notice.
 */
export const QUERY_TIMEOUT_MARGIN_MS = 5000;

/** A largest sane value for every ms setting: setTimeout's limit (about 24.8 days). */
const MAX_MS = 2 ** 31 - 1;

/** The connection options as callers give them (every field optional). */
export interface PostgresConnectionOptions {
  /**
   * Server-side `statement_timeout` for the store's pool, ms (default 30 000). 0 sends none: the
   * role's or database's setting applies (use it behind a pooler that refuses startup parameters).
   * Migrations and pruning run without it.
   */
  statementTimeoutMs?: number | undefined;
  /** Server-side `idle_in_transaction_session_timeout`, ms (default 60 000); 0 sends none. */
  idleInTransactionTimeoutMs?: number | undefined;
  /** Idle time before TCP keepalive probes start on every connection, ms (default 10 000). */
  keepAliveDelayMs?: number | undefined;
  /** Limit on one connection attempt or a wait for a free pooled connection, ms (default 10 000). */
  connectAttemptTimeoutMs?: number | undefined;
  /**
   * How long opening keeps retrying a server that refuses connections or is still starting up,
   * ms (default 30 000; 0 fails at once).
   */
  connectTimeoutMs?: number | undefined;
  /**
   * Where the LISTEN connection for wake-ups goes: a `postgres://` URL (e.g. the database itself
   * when the store URL is a pgbouncer in transaction mode, which cannot LISTEN), or `false` (or
   * the text `off`, as flags and environment variables say it) for no LISTEN at all: workers then
   * find jobs by polling only. Default: the store URL.
   */
  listenUrl?: string | false | undefined;
}

/** The connection options with every default applied and every value checked. */
export interface ResolvedPostgresConnectionOptions {
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
  keepAliveDelayMs: number;
  connectAttemptTimeoutMs: number;
  connectTimeoutMs: number;
  /** undefined: LISTEN on the store URL; false: no LISTEN; a string: LISTEN there. */
  listenUrl: string | false | undefined;
}

/** Shows a refused value: text quoted, everything else as JavaScript prints it. */
function shown(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

function msSetting(name: string, value: unknown, fallback: number, min: number, meaning: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_MS) {
    throw new ConfigurationError(
      `${name} must be an integer of ms from ${min} to ${MAX_MS}${meaning ? ` (${meaning})` : ''}, got ${shown(value)}`,
    );
  }
  return value;
}

function listenUrlSetting(value: unknown): string | false | undefined {
  if (value === undefined || value === false) return value;
  if (typeof value === 'string' && /^(off|false)$/i.test(value.trim())) return false;
  if (typeof value === 'string' && /^postgres(ql)?:\/\/./i.test(value.trim())) {
    try {
      new URL(value.trim());
      return value.trim();
    } catch {
      // Falls through to the error below: the URL does not parse.
    }
  }
  throw new ConfigurationError(
    `listenUrl must be a postgres:// URL for the LISTEN connection, or false ("off") for no LISTEN (workers poll), got ${
      typeof value === 'string' ? JSON.stringify(value.replace(/:\/\/([^:@/]*):[^@/]*@/, '://$1:***@')) : shown(value)
    }`,
  );
}

/** Applies the defaults to `options` and refuses any bad value with an error naming the option. */
export function resolvePostgresConnectionOptions(
  options: PostgresConnectionOptions = {},
): ResolvedPostgresConnectionOptions {
  return {
    statementTimeoutMs: msSetting(
      'statementTimeoutMs',
      options.statementTimeoutMs,
      DEFAULT_STATEMENT_TIMEOUT_MS,
      0,
      "0 sends none and leaves the server's setting",
    ),
    idleInTransactionTimeoutMs: msSetting(
      'idleInTransactionTimeoutMs',
      options.idleInTransactionTimeoutMs,
      DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS,
      0,
      "0 sends none and leaves the server's setting",
    ),
    keepAliveDelayMs: msSetting('keepAliveDelayMs', options.keepAliveDelayMs, DEFAULT_KEEP_ALIVE_DELAY_MS, 1, ''),
    connectAttemptTimeoutMs: msSetting(
      'connectAttemptTimeoutMs',
      options.connectAttemptTimeoutMs,
      DEFAULT_CONNECT_ATTEMPT_TIMEOUT_MS,
      1,
      '',
    ),
    connectTimeoutMs: msSetting(
      'connectTimeoutMs',
      options.connectTimeoutMs,
      DEFAULT_CONNECT_TIMEOUT_MS,
      0,
      '0 fails at once',
    ),
    listenUrl: listenUrlSetting(options.listenUrl),
  };
}

/**
 * The `pg` settings Docket gives one connection: a subset of pg's `ClientConfig`, spelled out
 * here so the package's declarations never name pg's types (a user need not install @types/pg).
 */
export interface PostgresClientSettings {
  connectionString: string;
  application_name: string;
  keepAlive: boolean;
  keepAliveInitialDelayMillis: number;
  connectionTimeoutMillis: number;
  idle_in_transaction_session_timeout: number;
  statement_timeout?: number;
  query_timeout?: number;
}

/**
 * What a connection is for, which decides its timeouts:
 * - `pool`: claims, heartbeats, completions, submits, admin calls: every statement is short, so
 *   the server's `statement_timeout` and a client-side read deadline just past it apply.
 * - `maintenance`: migrations (an index build on a large table, a wait for another process's
 *   migration lock) and pruning (one DELETE of a week of finished records) may legitimately run
 *   for minutes: no statement timeout and no read deadline; keepalives still find a dead peer.
 * - `listen`: the dedicated LISTEN connection: idle by design, so no read deadline either.
 */
export type PostgresConnectionPurpose = 'pool' | 'maintenance' | 'listen';

/**
 * The `pg` settings of one connection of a {@link PostgresStore}, from the resolved connection
 * options (docs/operations.md, "Timeouts and keepalives", says why each one is there):
 *
 * - `keepAlive` after `keepAliveDelayMs` idle: a half-open connection (the peer vanished without
 *   a FIN) is probed instead of waited on for the kernel's two-hour default.
 * - `connectionTimeoutMillis` = `connectAttemptTimeoutMs`: a new connection, or a wait for a free
 *   pooled one, that takes longer fails and the operation's ordinary retry path takes over.
 * - `idle_in_transaction_session_timeout`: the server ends a session of ours left idle inside a
 *   transaction (its client froze or was cut off), so no row or schedule lock is held forever.
 * - `statement_timeout` (pool only): the server cancels a statement stuck longer than this (a
 *   lock wait behind a stuck session). A cancelled statement rolls back whole, so this is safe
 *   for every write: a claim that times out hands out no lease and charges no attempt (its
 *   UPDATE … RETURNING never committed), and the claim loop simply claims again after a backoff;
 *   a completion or heartbeat that times out changed nothing and is retried under the same
 *   fencing token, so it stays idempotent.
 * - `query_timeout` (pool only) = statement timeout + {@link QUERY_TIMEOUT_MARGIN_MS}: no answer
 *   at all by then means the socket is dead; the call fails (and its client is destroyed) instead
 *   of hanging. Such a call is ambiguous, exactly like a dropped connection, and every caller
 *   already treats it so (a claim's leases are released by owner, a completion is resent).
 * A value of 0 sends no such parameter (pg sends only non-zero ones), so the server's or role's
 * own setting applies: what a pooler that refuses startup parameters needs.
 */
export function postgresClientConfig(
  connectionString: string,
  settings: ResolvedPostgresConnectionOptions,
  purpose: PostgresConnectionPurpose,
): PostgresClientSettings {
  const bounded = purpose === 'pool' && settings.statementTimeoutMs > 0;
  return {
    connectionString,
    application_name: purpose === 'listen' ? 'docket-listener' : 'docket',
    keepAlive: true,
    keepAliveInitialDelayMillis: settings.keepAliveDelayMs,
    connectionTimeoutMillis: settings.connectAttemptTimeoutMs,
    idle_in_transaction_session_timeout: settings.idleInTransactionTimeoutMs,
    ...(bounded
      ? {
          statement_timeout: settings.statementTimeoutMs,
          query_timeout: settings.statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS,
        }
      : {}),
  };
}
