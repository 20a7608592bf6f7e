/**
 * Caller transactions and idempotent completion on PostgreSQL: the SQL and checks that let a
 * submit or a completion run on the caller's own `pg` client, and that tell a lost reply from a
 * refused completion.
 *
 * Caller transactions: the job SQL already runs on any {@link Queryable}, so a submit or a
 * completion in the caller's transaction is the same statement on their client. It takes effect
 * exactly when they commit. The submit's `pg_notify` is transactional too: PostgreSQL delivers it
 * at commit and drops it on rollback, so a wake-up never announces a job that does not exist.
 * A completion's UPDATE holds the job's row lock until their transaction ends, so no claimer
 * (`FOR UPDATE SKIP LOCKED`) can take the job meanwhile, even if the lease lapses.
 *
 * Idempotent completion: a completion whose reply was lost after COMMIT (docs/reliability.md, fault
 * class 5) is retried and finds the job no longer running. Only the holder of a token can move
 * a job to done under it, and a done job keeps its token, so "done with this token" proves the
 * earlier call was ours. The check is a second read, sent only when some completion came back
 * stale, which leaves the common path at one round trip.
 */
import { ConfigurationError } from '../../job/errors.js';
import type { JobLease } from '../store.js';
import { leaseBatch, leaseBatchParams } from './array-params.js';
import { quoteIdentifier } from './migrations.js';
import { ownerMatches, type Queryable } from './sql-fragments.js';

/** What a `pg` client reports about its session (`getTransactionStatus`, pg ≥ 8.9): `T` inside a block. */
type TransactionStatus = 'I' | 'T' | 'E' | null;

/**
 * Checks that `transaction` is a client inside an open transaction and returns it as a
 * {@link Queryable}. Refuses, with a ConfigurationError saying what to pass instead: anything
 * without `query`, a pool (each query would autocommit on its own connection, so the job would
 * exist whatever the caller's transaction did), and a client that reports no open transaction
 * (no BEGIN yet: the write would autocommit) or a failed one (it must be rolled back first).
 * A Queryable that cannot report its status (not a `pg` client) is trusted.
 */
export function callerTransaction(transaction: unknown, operation: string): Queryable {
  const candidate = transaction as {
    query?: unknown;
    connect?: unknown;
    totalCount?: unknown;
    getTransactionStatus?: unknown;
  } | null;
  if (typeof candidate !== 'object' || candidate === null || typeof candidate.query !== 'function') {
    throw new ConfigurationError(
      `${operation}: transaction must be a pg client inside BEGIN (from pool.connect() or new pg.Client()), got ${describeValue(transaction)}`,
    );
  }
  if (typeof candidate.connect === 'function' && typeof candidate.totalCount === 'number') {
    throw new ConfigurationError(
      `${operation}: transaction is a pg.Pool, whose queries autocommit; pass the client you ran BEGIN on (const client = await pool.connect())`,
    );
  }
  if (typeof candidate.getTransactionStatus === 'function') {
    const status = (candidate.getTransactionStatus as () => TransactionStatus).call(candidate);
    if (status === 'I') {
      throw new ConfigurationError(
        `${operation}: the client is not inside a transaction (run BEGIN first); the write would commit on its own`,
      );
    }
    if (status === 'E') {
      throw new ConfigurationError(
        `${operation}: the client's transaction has already failed; roll it back and start again`,
      );
    }
  }
  return candidate as Queryable;
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') return `an object without query() (${value.constructor?.name ?? 'Object'})`;
  return typeof value;
}

/** The caller-transaction and idempotent-completion SQL for one schema. */
export class PostgresTransactionQueries {
  private readonly sql: { doneWithToken: string };

  constructor(schemaName: string) {
    const jobs = `${quoteIdentifier(schemaName)}.jobs`;
    this.sql = {
      /**
       * doneWithToken: which of these leases name a job already done under that very token and
       * owner, i.e. a completion of that claim was accepted earlier.
       * Params: $1 ids bigint[], $2 tokens int[], $3 owners text[] (an element NULL = token alone).
       * Result: ord (1-based input position) of each such lease. Primary-key lookups only.
       */
      doneWithToken: `
        SELECT l.ord
        FROM unnest($1::bigint[], $2::int[], $3::text[]) WITH ORDINALITY AS l(id, token, owner, ord)
        JOIN ${jobs} j ON j.id = l.id AND j.token = l.token AND ${ownerMatches('l.owner')} AND j.state = 'done'`,
    };
  }

  /**
   * Turns the `stale` answers of a completion batch into `done` where the job is already done
   * under the same token (the earlier completion committed; its reply was lost). Sends nothing
   * when every completion was accepted.
   */
  async acceptRepeatedCompletions(
    db: Queryable,
    leases: readonly JobLease[],
    outcomes: ('done' | 'stale')[],
  ): Promise<('done' | 'stale')[]> {
    if (!outcomes.includes('stale')) return outcomes;
    const stale = leaseBatch(leases, (index) => outcomes[index] === 'stale');
    if (stale.indexes.length === 0) return outcomes;
    const result = await db.query<{ ord: string }>(this.sql.doneWithToken, leaseBatchParams(stale));
    const out = [...outcomes];
    for (const row of result.rows) out[stale.indexes[Number(row.ord) - 1]!] = 'done';
    return out;
  }
}
