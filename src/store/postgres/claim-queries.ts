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
import { PLANNER_SETTINGS, type StoredStatement, storedStatement } from './stored-statements.js';

/** Where a claim row's needs_transaction flag sits: after the job columns (claimedColumnsOf). */
const NEEDS_TRANSACTION_AT = JOB_COLUMNS.length;

/**
 * Exhausted lapsed jobs parked by one claim, whatever its limit: a poison job must not take a
 * claim of 1 and starve healthy jobs, yet a burst of thousands should not make one claim slow.
 */
const MAX_PARKED_PER_CLAIM = 1000;

/**
 * The claims' planner settings beyond every stored statement's (decision 0027). Each triple's
 * scan must be the claim index's range, which hands its rows out in (run_at, id) order; any other
 * index that can serve the scan needs a sort after it, so with sorts disabled the planner cannot
 * prefer one on a guess. Never analysed, with long kind names, the list index (state, queue, id)
 * looked cheaper, and each triple's scan read every pending row of its queue (a claim of 524 over
 * 1,000 kinds took a second). The sorts the claim cannot avoid (the ranking, the final order)
 * stay; they are in every plan alike.
 */
const CLAIM_PLAN_SETTINGS = ['enable_sort = off'];

/** The largest job id (bigint): with the claim's instant, the bound `(run_at, id) <= (now, MAX_JOB_ID)` is `run_at <= now`. */
const MAX_JOB_ID = '9223372036854775807';

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

  /**
   * The merge of a few triples' due rows (decision 0026), a PL/pgSQL function the claim calls
   * from its `due` step: created with the claims, named by a hash of its definition like them.
   */
  private readonly mergeDueStored: StoredStatement;

  constructor(schemaName: string) {
    const schema = quoteIdentifier(schemaName);
    this.mergeDueStored = storedStatement(schema, {
      prefix: 'claim_merge_due',
      parameterTypes: ['text[]', 'text[]', 'smallint[]', 'timestamptz[]', 'bigint[]', 'timestamptz', 'bigint'],
      returns: 'id bigint, priority smallint, run_at timestamptz, schedule_id text',
      plpgsql: mergeDueBody(`${schema}.jobs`),
      planSettings: CLAIM_PLAN_SETTINGS,
    });
    this.sql = buildClaimSql(schema, `${schema}."${this.mergeDueStored.functionName}"`);
    const parameterTypes = ['timestamptz', 'text', 'bigint', 'double precision', 'text[]', 'text[]', 'text[]'];
    const returns = `${claimedColumnTypes()}, needs_transaction boolean`;
    this.claimPendingStored = storedStatement(schema, {
      prefix: 'claim_pending',
      parameterTypes,
      returns,
      sql: this.sql.claimPendingOnly,
      planSettings: CLAIM_PLAN_SETTINGS,
    });
    this.claimSearchingStored = storedStatement(schema, {
      prefix: 'claim_searching',
      parameterTypes: [...parameterTypes, 'boolean'],
      returns,
      sql: this.sql.claim,
      planSettings: CLAIM_PLAN_SETTINGS,
    });
  }

  /** The functions this class calls, for the store to create when it opens (stored-statements.ts). */
  get storedStatements(): readonly StoredStatement[] {
    return [this.mergeDueStored, this.claimPendingStored, this.claimSearchingStored];
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
   * Makes the caller's transaction plan {@link claimInTransaction} as the stored claims are planned
   * (this is for the in-transaction claim that recurring runs take): their functions' settings
   * (stored-statements.ts PLANNER_SETTINGS and CLAIM_PLAN_SETTINGS), the plan cache mode aside,
   * which means nothing for a statement planned once. Sorts off: each triple is scanned on the claim index
   * whatever the statistics say (decision 0027). Sequential scans and hash joins off: the claim's
   * update finds its chosen rows by primary key, never by a hash join over the whole table, which
   * a claim of hundreds of rows on a table never analysed was planned as. Bitmap scans off: a bitmap
   * scan never marks an index entry dead, so with no VACUUM since a drain, every claim's bitmap heap
   * scan over `lease_until <= now` revisited every finished job's old running row (measured:
   * 600,266 entries, 24,702 buffers and 340 ms for `lapsed`, the same again for `exhausted`, in
   * one claim 600,000 jobs into a 1M drain); a plain index scan marks each dead entry as it passes
   * (kill_prior_tuple). SET LOCAL: it ends with the transaction, also behind a transaction pooler.
   * One round trip (a simple query of several statements).
   */
  async planClaimInTransaction(db: Queryable): Promise<void> {
    const settings = [...PLANNER_SETTINGS, ...CLAIM_PLAN_SETTINGS];
    await db.query(settings.map((setting) => `SET LOCAL ${setting}`).join('; '));
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

/**
 * The body of the merge function (parameters: $1 queues, $2 kinds, $3 priorities, $4 first run
 * times, $5 first ids, the ranked triples' in rank order; $6 the claim's now; $7 its limit): up
 * to $7 due pending rows of those triples, in (priority, run_at, id) order, each locked (FOR
 * UPDATE SKIP LOCKED) as it is taken. One cursor per triple, opened only once the triple's first
 * entry (known from the walk) is the smallest head left, and a binary heap of the open cursors'
 * heads, so it reads and locks the rows it answers plus at most one more per triple it opened:
 * a k-way merge, which one SQL statement cannot express (PostgreSQL 15 merges a UNION ALL of
 * locking subqueries only after reading each of them whole). A cursor's FOR UPDATE SKIP LOCKED
 * re-checks each row it locks, so a row another claim took since the walk is passed over.
 */
function mergeDueBody(jobs: string): string {
  const key = (slot: string) => `(head_priority[${slot}], head_run_at[${slot}], head_id[${slot}])`;
  return `
DECLARE
  triples int := coalesce(array_length($1, 1), 0);
  cursors refcursor[];
  cur refcursor;
  head_id bigint[];
  head_priority smallint[];
  head_run_at timestamptz[];
  head_schedule text[];
  heap int[];
  heap_size int := 0;
  next_triple int := 1;
  opening int;
  slot int;
  parent int;
  child int;
  swap int;
  row record;
  taken bigint := 0;
BEGIN
  WHILE taken < $7 LOOP
    -- Open the next unopened triple while its first entry comes before every open head.
    IF next_triple <= triples AND (heap_size = 0
        OR ($3[next_triple], $4[next_triple], $5[next_triple]) < ${key('heap[1]')}) THEN
      opening := next_triple;
      next_triple := next_triple + 1;
      cur := NULL;
      OPEN cur FOR
        SELECT j.id, j.priority, j.run_at, j.schedule_id FROM ${jobs} j
        WHERE j.state = 'pending' AND j.queue = $1[opening] AND j.kind = $2[opening] AND j.priority = $3[opening]
          AND (j.run_at, j.id) >= ($4[opening], $5[opening]) AND j.run_at <= $6
        ORDER BY j.run_at, j.id
        FOR UPDATE SKIP LOCKED;
      FETCH cur INTO row;
      IF NOT FOUND THEN
        CLOSE cur;
        CONTINUE;
      END IF;
      cursors[opening] := cur;
      head_id[opening] := row.id;
      head_priority[opening] := row.priority;
      head_run_at[opening] := row.run_at;
      head_schedule[opening] := row.schedule_id;
      heap_size := heap_size + 1;
      slot := heap_size;
      heap[slot] := opening;
      WHILE slot > 1 LOOP
        parent := slot / 2;
        EXIT WHEN ${key('heap[parent]')} <= ${key('heap[slot]')};
        swap := heap[parent]; heap[parent] := heap[slot]; heap[slot] := swap;
        slot := parent;
      END LOOP;
      CONTINUE;
    END IF;
    EXIT WHEN heap_size = 0;
    opening := heap[1];
    id := head_id[opening];
    priority := head_priority[opening];
    run_at := head_run_at[opening];
    schedule_id := head_schedule[opening];
    RETURN NEXT;
    taken := taken + 1;
    EXIT WHEN taken >= $7;
    cur := cursors[opening];
    FETCH cur INTO row;
    IF FOUND THEN
      head_id[opening] := row.id;
      head_priority[opening] := row.priority;
      head_run_at[opening] := row.run_at;
      head_schedule[opening] := row.schedule_id;
    ELSE
      CLOSE cur;
      cursors[opening] := NULL;
      heap[1] := heap[heap_size];
      heap_size := heap_size - 1;
    END IF;
    slot := 1;
    LOOP
      child := 2 * slot;
      EXIT WHEN child > heap_size;
      IF child < heap_size AND ${key('heap[child + 1]')} < ${key('heap[child]')} THEN
        child := child + 1;
      END IF;
      EXIT WHEN ${key('heap[slot]')} <= ${key('heap[child]')};
      swap := heap[child]; heap[child] := heap[slot]; heap[slot] := swap;
      slot := child;
    END LOOP;
  END LOOP;
  FOR opening IN 1 .. next_triple - 1 LOOP
    cur := cursors[opening];
    IF cur IS NOT NULL THEN
      CLOSE cur;
    END IF;
  END LOOP;
END`;
}

function buildClaimSql(s: string, mergeDue: string) {
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
      ranked AS (
        SELECT p.queue, p.kind, p.priority, p.first_run_at, p.first_id,
               row_number() OVER (ORDER BY p.priority, p.first_run_at, p.first_id) AS rank
        FROM triples p
        WHERE ${kindAllowed('p.kind', '$6', '$7')} AND ${notPaused('p.queue')} AND p.first_run_at <= ${NOW}
        ORDER BY p.priority, p.first_run_at, p.first_id
        LIMIT $3
      ),
      bound AS MATERIALIZED (SELECT b.priority, b.first_run_at, b.first_id FROM ranked b WHERE b.rank = $3),
      merging AS MATERIALIZED (SELECT count(*) > 1 AND count(*) < $3 AS merge FROM ranked),
      due AS (
        SELECT c.id, c.priority, c.run_at, c.schedule_id, false AS lapsed
        FROM ranked p LEFT JOIN bound b ON b.priority = p.priority AND p.rank > 1 CROSS JOIN LATERAL (
          SELECT j.id, j.priority, j.run_at, j.schedule_id FROM ${jobs} j
          WHERE j.state = 'pending' AND j.queue = p.queue AND j.kind = p.kind AND j.priority = p.priority
            AND (j.run_at, j.id) >= (p.first_run_at, p.first_id)
            AND (j.run_at, j.id) <= (coalesce(b.first_run_at, ${NOW}), coalesce(b.first_id, ${MAX_JOB_ID}))
          ORDER BY j.run_at, j.id
          LIMIT $3 - p.rank + 1
          FOR UPDATE SKIP LOCKED
        ) c
        WHERE NOT (SELECT merge FROM merging)
        UNION ALL
        SELECT m.id, m.priority, m.run_at, m.schedule_id, false AS lapsed
        FROM (
          SELECT array_agg(r.queue ORDER BY r.rank) AS queues, array_agg(r.kind ORDER BY r.rank) AS kinds,
                 array_agg(r.priority ORDER BY r.rank) AS priorities,
                 array_agg(r.first_run_at ORDER BY r.rank) AS first_run_ats, array_agg(r.first_id ORDER BY r.rank) AS first_ids
          FROM ranked r
        ) x CROSS JOIN LATERAL ${mergeDue}(x.queues, x.kinds, x.priorities, x.first_run_ats, x.first_ids, ${NOW}, $3) m
        WHERE (SELECT merge FROM merging)
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
     * queue's backlog is ever read); (2) the triples with a due first entry ranked by that entry's
     * (priority, run_at, id), only the first $3 kept (decision 0026): every row of the triple
     * ranked r comes after the first entries of the r - 1 before it, so it can place at most
     * $3 - r + 1 rows, and a triple ranked past $3 none; (3a) one triple, or $3 or more: per
     * ranked triple a range scan from its first pending entry (so the dead entries of claimed
     * jobs at the head of the range are stepped over once per claim, not twice; decision 0010)
     * to `run_at <= now`, in (run_at, id) order on the same index, LIMIT $3 - rank + 1, FOR UPDATE
     * SKIP LOCKED, so future-dated rows are never read and rows another claimer holds are skipped,
     * not waited on; with $3 triples ranked no row after the first entry of the one ranked $3 can
     * place either, which bounds every scan but the best triple's (left unbounded so that a claim
     * racing another for the same first entries, which it skips, still fills from the rows behind
     * them); (3b) two triples or more but fewer than $3: the merge function (mergeDueBody), which
     * locks the rows it takes and at most one more per triple it opened. Either way a claim over
     * hundreds of triples locks about the rows it can hand out, not triples × $3 (each lock is a
     * write, and a candidate it does not take stays locked until it commits, out of every other
     * claimer's reach); (4) lapsed leases
     * of allowed kinds from the small running index (`lease_until <= now`); (5) the best $3 of
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
