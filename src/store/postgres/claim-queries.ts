/**
 * The PostgreSQL claim: the statement that leases jobs (one short statement with
 * `FOR UPDATE SKIP LOCKED`, so many workers claim different rows without waiting on each other
 * and no lock outlives the call), its in-transaction twin for recurring runs, and the code that
 * runs them on any {@link Queryable}. Planning the claimed recurring runs' schedules is pure
 * policy (planClaimedRuns in ../schedule-plan.ts); the store runs it between the two.
 */
import type { ClaimedJob } from '../../job/job.js';
import { ClaimedRowValues } from '../claimed-row-values.js';
import { JOB_COLUMNS } from '../job-columns.js';
import type { JobClaimParams } from '../store.js';
import { LEASE_EXPIRED_MESSAGE } from '../store-params.js';
import { claimedValuesToJob } from './job-row.js';
import { quoteIdentifier } from './migrations.js';
import {
  type ArrayQueryable,
  claimedColumnsOf,
  claimedColumnTypes,
  claimOrderClauses,
  columnsOf,
  errorEntry,
  intervalMs,
  kindAllowed,
  NOW,
  parkInsert,
  pendingTriplesCte,
  pinned,
  type Queryable,
  queueNotPaused,
} from './sql-fragments.js';
import { type StoredStatement, storedStatement } from './stored-statements.js';

/** Where a claim row's needs_transaction flag sits: after the job columns (claimedColumnsOf). */
const NEEDS_TRANSACTION_AT = JOB_COLUMNS.length;

/**
 * Exhausted lapsed jobs parked by one claim, whatever its limit: a poison job must not take a
 * claim of 1 and starve healthy jobs, yet a burst of thousands should not make one claim slow.
 */
const MAX_PARKED_PER_CLAIM = 1000;

/** The claim SQL for one schema, and the code that runs it on any {@link Queryable}. */
export class PostgresClaimQueries {
  private readonly sql: ReturnType<typeof buildClaimSql>;
  /** claimPendingOnly as a function: the claim a busy worker sends most, planned once per connection. */
  private readonly claimPendingStored: StoredStatement;
  /**
   * The one-statement claim with the lapsed-lease search, as a function: a worker sends it once
   * per 250 ms (decision 0011). Sent as SQL in a transaction of its own it cost four round trips and
   * a fresh plan of the largest statement Docket has, about 7 ms at the median on this machine, and
   * every job that became due meanwhile waited behind it (the p99 of enqueue-to-start at 1,000
   * single submits/s). As a function it is one round trip, planned once per connection, and its
   * plan settings disable bitmap scans, which is what the transaction's `SET LOCAL` was for.
   */
  private readonly claimSearchingStored: StoredStatement;

  constructor(schemaName: string) {
    const schema = quoteIdentifier(schemaName);
    this.sql = buildClaimSql(schema);
    const parameterTypes = ['timestamptz', 'text', 'bigint', 'double precision', 'text[]', 'text[]', 'text[]'];
    const returns = `${claimedColumnTypes()}, needs_transaction boolean`;
    this.claimPendingStored = storedStatement(schema, {
      prefix: 'claim_pending',
      parameterTypes,
      returns,
      sql: this.sql.claimPendingOnly,
    });
    this.claimSearchingStored = storedStatement(schema, {
      prefix: 'claim_searching',
      parameterTypes: [...parameterTypes, 'boolean'],
      returns,
      sql: this.sql.claim,
    });
  }

  /** The functions this class calls, for the store to create when it opens (stored-statements.ts). */
  get storedStatements(): readonly StoredStatement[] {
    return [this.claimPendingStored, this.claimSearchingStored];
  }

  /**
   * The one-statement claim: leases up to `limit` claimable jobs (lapsed leases at maxAttempts are
   * parked instead), unless a recurring run is among them, in which case it claims nothing and
   * answers `needsTransaction` (the caller then claims with {@link claimInTransaction}).
   * The store's claim path.
   */
  async claimOrDefer(
    db: ArrayQueryable,
    params: JobClaimParams,
  ): Promise<{ jobs: ClaimedJob[]; needsTransaction: boolean }> {
    // No kind can match an empty list: claim (and park) nothing, without a round trip.
    if (params.limit <= 0 || params.kinds?.length === 0) return { jobs: [], needsTransaction: false };
    const pendingOnly = params.includeLapsed === false;
    const result = await db.query({
      text: pendingOnly ? this.claimPendingStored.callSql : this.claimSearchingStored.callSql,
      values: pendingOnly ? this.claimParams(params).slice(0, 7) : this.claimParams(params),
      rowMode: 'array',
    });
    const rows = result.rows;
    // The job columns, then needs_transaction (true only on the one all-NULL row of a deferral).
    const needsTransaction = rows[0]?.[NEEDS_TRANSACTION_AT] === true;
    const jobs: ClaimedJob[] = [];
    const repeated = new ClaimedRowValues();
    for (const row of rows) if (row[0] !== null) jobs.push(claimedValuesToJob(row, params.owner, repeated));
    return { jobs, needsTransaction };
  }

  /**
   * {@link claimOrDefer} without the flag: one-off jobs only. It claims nothing when a recurring
   * run is among the candidates, so stores call claimOrDefer; this remains for tests of the SQL.
   */
  async claim(db: ArrayQueryable, params: JobClaimParams): Promise<ClaimedJob[]> {
    return (await this.claimOrDefer(db, params)).jobs;
  }

  /**
   * Makes the caller's transaction plan the lapsed-lease search with plain index scans: a bitmap
   * scan never marks an index entry dead, so with no VACUUM since a drain, every claim's bitmap
   * heap scan over `lease_until <= now` revisited every finished job's old running row (measured:
   * 600,266 entries, 24,702 buffers and 340 ms for `lapsed`, the same again for `exhausted`, in
   * one claim 600,000 jobs into a 1M drain). A plain index scan marks each dead entry as it passes
   * (kill_prior_tuple), so the next search steps over it without a heap visit. SET LOCAL: it ends
   * with the transaction, also behind a transaction pooler. The one-statement claims need none of
   * this: their stored functions carry the same setting (stored-statements.ts); this is for the
   * in-transaction claim that recurring runs take.
   */
  async planLapsedSearch(db: Queryable): Promise<void> {
    await db.query('SET LOCAL enable_bitmapscan = off');
  }

  /** The claim inside the caller's transaction, recurring runs included; the caller plans their schedules. */
  async claimInTransaction(db: ArrayQueryable, params: JobClaimParams): Promise<ClaimedJob[]> {
    if (params.limit <= 0 || params.kinds?.length === 0) return [];
    const result = await db.query({
      text: this.sql.claimInTransaction,
      values: this.claimParams(params),
      rowMode: 'array',
    });
    const repeated = new ClaimedRowValues();
    return result.rows.map((row) => claimedValuesToJob(row, params.owner, repeated));
  }

  private claimParams(params: JobClaimParams): unknown[] {
    return [
      pinned(params.now),
      params.owner,
      Math.floor(params.limit),
      params.leaseMs,
      params.queues ? [...params.queues] : null,
      params.kinds ? [...params.kinds] : null,
      params.excludeKinds ? [...params.excludeKinds] : [],
      params.includeLapsed !== false,
    ];
  }

  /** The SQL of the claim, for EXPLAIN in tests (parameters as {@link claim} passes them). */
  get claimSql(): string {
    return this.sql.claim;
  }

  /** The SQL of the claim without the lapsed-lease search, for EXPLAIN in tests (the first 7 parameters). */
  get claimPendingOnlySql(): string {
    return this.sql.claimPendingOnly;
  }

  /** The SQL of the in-transaction claim, for EXPLAIN in tests (same parameters). */
  get claimInTransactionSql(): string {
    return this.sql.claimInTransaction;
  }
}

function buildClaimSql(s: string) {
  const jobs = `${s}.jobs`;
  const dead = `${s}.dead_jobs`;
  const ms = intervalMs;
  const notPaused = (queue: string) => queueNotPaused(`${s}.queues`, queue);

  /**
   * The claim statement; `fast` refuses (claims nothing) when a recurring run is among the chosen.
   * `lapsed: false` leaves out the lapsed-lease search and the parking of exhausted leases, and
   * parameter $8, altogether: the statement a busy worker sends between its searches, which also
   * plans in about half the time (PostgreSQL plans each unnamed statement anew).
   */
  function claimStatement(mode: 'fast' | 'transaction', lapsed = true): string {
    const lapsedCte = `lapsed AS (
        SELECT j.id, j.priority, j.run_at, j.schedule_id, true AS lapsed FROM ${jobs} j
        WHERE $8::boolean AND j.state = 'running' AND j.lease_until <= ${NOW} AND j.attempts < j.max_attempts
          AND ($5::text[] IS NULL OR j.queue = ANY($5::text[])) AND ${kindAllowed('j.kind', '$6', '$7')}
          AND ${notPaused('j.queue')}
        ORDER BY j.priority, j.run_at, j.id
        LIMIT $3
        FOR UPDATE SKIP LOCKED
      ),
`;
    const parkingCtes = `exhausted AS (
        DELETE FROM ${jobs} j
        WHERE j.id IN (
          SELECT x.id FROM ${jobs} x
          WHERE $8::boolean AND x.state = 'running' AND x.lease_until <= ${NOW} AND x.attempts >= x.max_attempts
            AND ($5::text[] IS NULL OR x.queue = ANY($5::text[])) AND ${notPaused('x.queue')}
          ORDER BY x.lease_until
          LIMIT greatest($3, ${MAX_PARKED_PER_CLAIM})
          FOR UPDATE SKIP LOCKED
        )
        RETURNING j.*
      ),
      parked AS (
        ${parkInsert(
          dead,
          'exhausted',
          `m.errors || jsonb_build_array(${errorEntry(
            'm.attempts',
            `'${LEASE_EXPIRED_MESSAGE}; parked after ' || m.attempts || ' attempts'`,
            `'lease_expired'`,
            'NULL::text',
            'm',
          )})`,
        )}
        RETURNING id
      ),
`;
    const result =
      mode === 'fast'
        ? `SELECT ${claimedColumnsOf('cl')}, b.needs_transaction
      FROM (SELECT EXISTS (SELECT 1 FROM scheduled) AS needs_transaction) b LEFT JOIN claimed cl ON true
      ${claimOrderClauses('cl')}`
        : `SELECT ${claimedColumnsOf('cl')} FROM claimed cl ${claimOrderClauses('cl')}`;
    return `
      WITH RECURSIVE ${pendingTriplesCte(jobs, '$5')},
      due AS (
        SELECT c.id, c.priority, c.run_at, c.schedule_id, false AS lapsed
        FROM triples p CROSS JOIN LATERAL (
          SELECT j.id, j.priority, j.run_at, j.schedule_id FROM ${jobs} j
          WHERE j.state = 'pending' AND j.queue = p.queue AND j.kind = p.kind AND j.priority = p.priority
            AND (j.run_at, j.id) >= (p.first_run_at, p.first_id) AND j.run_at <= ${NOW}
          ORDER BY j.run_at, j.id
          LIMIT $3
          FOR UPDATE SKIP LOCKED
        ) c
        WHERE ${kindAllowed('p.kind', '$6', '$7')} AND ${notPaused('p.queue')}
      ),
${lapsed ? lapsedCte : ''}      chosen AS (
        SELECT * FROM (SELECT * FROM due${lapsed ? ' UNION ALL SELECT * FROM lapsed' : ''}) candidates
        ORDER BY priority, run_at, id LIMIT $3
      ),
      scheduled AS (SELECT 1 FROM chosen WHERE schedule_id IS NOT NULL LIMIT 1),
${lapsed ? parkingCtes : ''}      claimed AS (
        UPDATE ${jobs} j
        SET state = 'running',
            lease_until = ${NOW} + ${ms('$4')},
            lease_owner = $2,
            started_at = ${NOW},
            token = j.token + 1,
            attempts = j.attempts + 1,
            errors = CASE WHEN c.lapsed
                          THEN j.errors || jsonb_build_array(${errorEntry('j.attempts', `'${LEASE_EXPIRED_MESSAGE}'`, `'lease_expired'`, 'NULL::text', 'j')})
                          ELSE j.errors END
        FROM chosen c
        WHERE j.id = c.id${mode === 'fast' ? ' AND NOT EXISTS (SELECT 1 FROM scheduled)' : ''}
        RETURNING ${columnsOf('j')}
      )
      ${result}`;
  }

  return {
    /**
     * claim: leases up to $3 claimable jobs in one statement; no lock outlives it.
     * Params: $1 now?, $2 owner, $3 limit, $4 lease ms, $5 queues text[] (NULL = all),
     *   $6 kinds text[] (NULL = all), $7 excluded kinds text[] (empty = none), $8 boolean: whether
     *   lapsed leases are taken over and exhausted ones parked in this claim (false: the `lapsed`
     *   and `exhausted` CTEs reduce to a one-time filter and read nothing).
     * Result: the claimed rows after the update (state running, new token and attempts; every
     *   column in the form claimedColumnsOf gives it), ordered by priority, run_at, id, each
     *   with `needs_transaction` false; or, when a chosen candidate
     *   is a recurring run, no claim at all and one all-NULL row with `needs_transaction` true.
     * Plan (docs/decisions/0006-kind-aware-claims.md): (1) loose index scan for the distinct
     * (queue, kind, priority) triples of pending jobs, less the kinds the claimer does not handle
     * and the paused queues (both filtered per triple, so neither a foreign kind's nor a paused
     * queue's backlog is ever read); (2) per triple, a bounded range scan from the triple's first
     * pending entry (found by step 1, so the dead entries of claimed jobs at the head of the range
     * are stepped over once per claim, not twice; decision 0010) to `run_at <= now` in
     * (run_at, id) order on the same index, LIMIT $3, FOR UPDATE SKIP LOCKED, so future-dated rows
     * are never read and rows another claimer holds are skipped, not waited on; (3) lapsed leases
     * of allowed kinds from the small running index (`lease_until <= now`); (4) the best $3 of
     * those candidates by (priority, run_at, id), so priority order holds across kinds.
     * A lapsed candidate gets a lease_expired errors entry. Lapsed jobs whose attempts already
     * reached max_attempts (all of them, up to MAX_PARKED_PER_CLAIM per claim, whatever $3, and
     * of any kind: parking hands nothing out, and the job's own kind's workers may all be gone) are
     * moved to dead_jobs instead of being handed out,
     * outside the limit: a poison job that kills its workers must not use up a claim of 1 and
     * starve the healthy jobs behind it.
     * Candidates beyond the final $3 stay locked only until this statement commits.
     * Recurring runs: claiming one must insert the schedule's next run in the same transaction,
     * which a single statement cannot plan (the policy is TypeScript). So this fast form claims
     * nothing when any chosen candidate has a schedule_id, and says so; the caller then runs
     * {@link claimInTransaction}. One-off jobs, the bulk of the traffic, stay one round trip.
     */
    claim: claimStatement('fast'),

    /**
     * claimInTransaction: the same claim for use inside BEGIN … COMMIT, recurring runs included;
     * the caller plans their schedules before committing.
     * Params: as claim. Result: the claimed rows, ordered by priority, run_at, id.
     */
    claimInTransaction: claimStatement('transaction'),

    /**
     * claimPendingOnly: {@link claim} without the lapsed-lease search and the parking (what
     * `includeLapsed: false` asks for). Params: $1 to $7 as claim. Result: as claim.
     */
    claimPendingOnly: claimStatement('fast', false),
  };
}
