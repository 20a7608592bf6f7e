/**
 * What a PostgreSQL store needs to know about transaction poolers (pgbouncer `pool_mode =
 * transaction`; docs/decisions/0007-transaction-poolers.md). Docket never relies on session
 * state on its pooled connections (no session advisory locks, no SET, no named prepared
 * statements, every table schema-qualified), so nothing tells it a pooler is there. Two things
 * remain:
 *
 * - Where to LISTEN (the `listenUrl` option, parsed in connection-options.ts). LISTEN is session
 *   state: the server delivers a notification to the session that listened. Through a transaction
 *   pooler a client's statements run on whichever server session is free, so a LISTEN lands on a
 *   pooled session that is handed to other clients afterwards: notifications go to the wrong
 *   client or nowhere, and no error says so. Behind such a pooler, name a direct server URL to
 *   LISTEN on, or `false` for polling.
 * - A clear error, here, when the pooler refuses a startup parameter the pool sends
 *   (`idle_in_transaction_session_timeout`): pgbouncer answers "unsupported startup parameter"
 *   unless told to ignore it.
 */
import { ConfigurationError } from '../../job/errors.js';

/**
 * The error to show for `error` from opening a store: a pooler's refusal of a startup parameter
 * becomes a {@link ConfigurationError} that names the parameter and the pgbouncer setting that
 * lets it through; anything else is returned unchanged.
 */
export function explainPoolerRefusal(error: unknown): unknown {
  const message = error instanceof Error ? error.message : '';
  const refused = /unsupported startup parameter: ?(\S+)/i.exec(message);
  if (!refused) return error;
  const explained = new ConfigurationError(
    `the server refused the startup parameter ${refused[1]} that Docket's pool sends (${message}); ` +
      `a pooler such as pgbouncer does this: add ${refused[1]} to its ignore_startup_parameters and set the ` +
      'same guard on the pooler or the database role instead (docs/operations.md, "pgbouncer")',
  );
  explained.cause = error;
  return explained;
}
