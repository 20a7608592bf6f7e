/**
 * Where a PostgreSQL store LISTENs for wake-ups: the `listenUrl` store option, parsed once.
 *
 * LISTEN is session state: the server delivers a notification to the session that listened.
 * Through a transaction pooler (pgbouncer `pool_mode = transaction`) a client's statements run
 * on whichever server session is free, so a LISTEN lands on a pooled session that is handed to
 * other clients afterwards: notifications go to the wrong client or nowhere, and no error says
 * so. Hence the option (docs/decisions/0007-transaction-poolers.md): behind such a pooler, name
 * a direct server URL to LISTEN on, or `false` to rely on polling alone.
 */
import type pg from 'pg';
import { ConfigurationError } from '../../job/errors.js';
import { redactStoreUrl } from '../open-store.js';

/**
 * The connection a store's wake-up listener opens, or null for no LISTEN at all. `storeConnection`
 * is the store's own (used when `listenUrl` is unset); `schema` is the store's resolved schema.
 */
export function resolveListenConnection(
  listenUrl: unknown,
  schema: string,
  storeConnection: pg.ClientConfig,
): pg.ClientConfig | null {
  if (listenUrl === undefined) return storeConnection;
  // The text "false" is how a flag, an environment variable or a config file says `false`.
  if (listenUrl === false || listenUrl === 'false') return null;
  if (typeof listenUrl !== 'string' || !/^postgres(ql)?:\/\//i.test(listenUrl)) {
    throw new ConfigurationError(
      `listenUrl must be a postgres:// URL of a direct (unpooled) connection, or false for no LISTEN (polling only), got ${describe(listenUrl)}`,
    );
  }
  let parsed: URL;
  try {
    parsed = new URL(listenUrl);
  } catch {
    throw new ConfigurationError('listenUrl is not a valid PostgreSQL URL');
  }
  // The channel is named after the store's schema; a different schema here would listen on
  // another store's wake-ups and never on this one's.
  const listenSchema = parsed.searchParams.get('schema');
  if (listenSchema !== null && listenSchema !== schema) {
    throw new ConfigurationError(
      `listenUrl names schema ${JSON.stringify(listenSchema)} but the store uses ${JSON.stringify(schema)}; ` +
        'leave ?schema= out of listenUrl (the store URL or the schema option decides it)',
    );
  }
  parsed.searchParams.delete('schema');
  return { connectionString: parsed.toString() };
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(redactStoreUrl(value)) : `${typeof value} ${String(value)}`;
}
