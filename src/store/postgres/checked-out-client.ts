/**
 * Checked-out connections that cannot crash the process.
 *
 * pg-pool guards an idle client with its own 'error' listener and removes it when the client is
 * checked out. A connection that dies while checked out (server restart, `pg_terminate_backend`,
 * a dropped network) then emits 'error' with no listener, and Node turns that into an uncaught
 * exception: `docket work` exited with "Connection terminated unexpectedly". Every checkout
 * therefore goes through {@link withCheckedOutClient}, which listens for the checkout's whole
 * lifetime, remembers the loss, and destroys a broken client (`release(error)`) instead of
 * returning it to the pool. The operation in flight fails with the connection error and the
 * caller's ordinary retry path (the next claim, the next sweep) gets a fresh connection.
 */
import type pg from 'pg';

/** SQLSTATEs and socket errors that mean "the server is not there right now", not "you are wrong". */
const TRANSIENT_CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
  '57P01', // admin_shutdown (also pg_terminate_backend)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: starting up or recovering
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
  '53300', // too_many_connections
]);

/**
 * Whether an error means the connection (or the server) is gone rather than the request being
 * wrong: worth retrying on a fresh connection, and a sign that the client it came from is dead.
 */
export function isTransientConnectionError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && TRANSIENT_CONNECTION_CODES.has(code)) return true;
  const message = error instanceof Error ? error.message : '';
  // "Query read timeout": pg's query_timeout fired, so no answer came (a half-open socket): the
  // client is destroyed like one whose connection dropped.
  return /Connection terminated|connection timeout|Query read timeout|timeout exceeded when trying to connect|not queryable|the database system is (starting up|shutting down|in recovery mode)/i.test(
    message,
  );
}

/** What the code running on a checked-out client knows about its connection. */
export interface ConnectionHealth {
  /** The connection error seen since checkout, or undefined while the connection is sound. */
  readonly lost: Error | undefined;
  /** Marks the connection unusable (e.g. a ROLLBACK failed), so it is destroyed on release. */
  markBroken(error: Error): void;
}

/**
 * Checks a client out of `pool`, runs `fn` on it and releases it: back to the pool when sound,
 * destroyed when its connection was lost or marked broken, or always with `closeAfter` (a
 * one-off maintenance connection that should not linger). An 'error' event on the client during
 * the checkout is recorded, never thrown.
 */
export async function withCheckedOutClient<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient, health: ConnectionHealth) => Promise<T>,
  options: { closeAfter?: boolean } = {},
): Promise<T> {
  const client = await pool.connect();
  let lost: Error | undefined;
  const health: ConnectionHealth = {
    get lost() {
      return lost;
    },
    markBroken(error) {
      lost ??= error;
    },
  };
  const onError = (error: Error) => {
    lost ??= error;
  };
  client.on('error', onError);
  try {
    return await fn(client, health);
  } catch (error) {
    // The query can fail with the server's FATAL before the socket's 'error' event arrives.
    if (isTransientConnectionError(error)) health.markBroken(error as Error);
    throw error;
  } finally {
    client.removeListener('error', onError);
    client.release(lost ?? options.closeAfter === true);
  }
}

/**
 * Runs `fn` inside BEGIN … COMMIT on `client`. On an error it rolls back, unless the connection
 * is already known lost: a ROLLBACK on a dead client cannot be sent, and the server has already
 * aborted the transaction with the session. A failed ROLLBACK marks the connection broken. The
 * error `fn` (or COMMIT) raised is what the caller sees.
 */
export async function inClientTransaction<T>(
  client: pg.ClientBase,
  health: ConnectionHealth,
  fn: () => Promise<T>,
): Promise<T> {
  await client.query('BEGIN');
  try {
    const result = await fn();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    if (isTransientConnectionError(error)) health.markBroken(error as Error);
    if (health.lost === undefined) {
      await client.query('ROLLBACK').catch((rollbackError: Error) => health.markBroken(rollbackError));
    }
    throw error;
  }
}
