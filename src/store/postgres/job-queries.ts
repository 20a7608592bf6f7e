/**
 * The PostgreSQL store's job SQL (everything but the claim, which is in claim-queries.ts), one
 * method per Store operation, each statement headed by purpose, parameters and result. Every
 * method takes the {@link Queryable} to run on: the store passes its pool, or, for a submit or a
 * completion in the caller's transaction, the caller's own client (transaction-queries.ts).
 *
 * Time: every due or lease comparison reads `coalesce($1::timestamptz, now())`: a pinned instant
 * from tests, else the database clock. Nothing here reads the worker's clock.
 *
 * Rows become {@link Job}s in one place (rowToJob in job-row.ts); parameters are checked by the
 * shared rules in ../store-params.ts before any SQL. SQL names are snake_case.
 */
import { LATEST_RUN_AT_MS } from '../../job/instant.js';
import type { Job } from '../../job/job.js';
import { assertBatchKeysAgree, liveKeyConflict } from '../idempotency.js';
import { JOB_COLUMNS } from '../job-columns.js';
import type {
  CancelOutcome,
  CompleteOutcome,
  DeadLetterPurgeParams,
  DeadLetterRetryParams,
  DueKindCount,
  FailOutcome,
  JobCancelParams,
  JobCompleteManyParams,
  JobFailManyParams,
  JobHeartbeatManyParams,
  JobPruneParams,
  JobReleaseByOwnerParams,
  JobReleaseParams,
  JobSubmitParams,
  NextRunAtParams,
  QueueStats,
  ReleaseOutcome,
  SubmitResult,
} from '../store.js';
import { queueStatsOf, STALE_FAILURE } from '../store-params.js';
import {
  bigintArrayParam,
  floatArrayParam,
  intArrayParam,
  type LeaseBatch,
  leaseBatch,
  leaseBatchParams,
  sharedOrEach,
  textArrayParam,
  timestamptzArrayParam,
} from './array-params.js';
import { type JobRow, rowToJob, sqlJobId } from './job-row.js';
import { quoteIdentifier } from './migrations.js';
import {
  batchColumn,
  batchJsonColumn,
  epochMsText,
  errorEntry,
  intervalMs,
  jobRowById,
  kindAllowed,
  NOW,
  ownerMatches,
  parkInsert,
  pendingTriplesCte,
  pinned,
  type Queryable,
  queueNotPaused,
  wakeChannel,
  wakeNotify,
} from './sql-fragments.js';
import { type StoredStatement, storedStatement } from './stored-statements.js';

/**
 * A lease named twice in one deleting batch: the delete returns one of its positions (the row
 * goes once), and the update's later check for a repeat has no row left to read. Every copy of
 * an accepted (id, token, owner) answers done, as both copies do when the row is kept, and as
 * SQLite's delete answers them.
 */
function acceptCopiesOfDeletedLeases(batch: LeaseBatch, out: CompleteOutcome[]): void {
  const accepted = new Set<string>();
  const keyOf = (i: number) => `${batch.ids[i]}:${batch.tokens[i]}:${batch.owners[i] ?? '\u0000'}`;
  for (let i = 0; i < batch.indexes.length; i += 1) if (out[batch.indexes[i]!] === 'done') accepted.add(keyOf(i));
  for (let i = 0; i < batch.indexes.length; i += 1) if (accepted.has(keyOf(i))) out[batch.indexes[i]!] = 'done';
}

/** A parked failure's answer, shared: it is never mutated (as STALE_FAILURE). */
const PARKED_FAILURE: FailOutcome = Object.freeze({ outcome: 'parked' });

/** The SQL for one schema, and the code that runs it on any {@link Queryable}. */
export class PostgresJobQueries {
  private readonly sql: ReturnType<typeof buildSql>;

  /**
   * Statements kept as functions, planned once per connection (stored-statements.ts).
   * insertWithIds: the statement every group-committed single submit sends.
   * completeMany (and heartbeatMany, its twin for lease renewals): every finished job's write;
   * completeDeleteMany the same write where finished rows are not kept (retention 0).
   * Sent as a plain statement, it was planned per call
   * from the table's statistics, and the planner preferred a bitmap scan of the running-lease
   * index joined by hash: that reads every running row per batch, and every dead entry the index
   * keeps for jobs finished since the last VACUUM (a bitmap scan never marks them dead). At 2,000
   * jobs in flight the completions cost the database 55-65 us a job instead of about 17. The
   * stored plan is the one decision 0013's settings leave: each batch element finds its row by
   * id in the primary key (test/store/postgres-stored-statements.test.ts reads it, cached while
   * the table was empty and used once it holds thousands of running rows).
   */
  private readonly stored: {
    insertWithIds: StoredStatement;
    completeMany: StoredStatement;
    completeDeleteMany: StoredStatement;
    heartbeatMany: StoredStatement;
    failMany: StoredStatement;
  };

  constructor(schemaName: string) {
    const schema = quoteIdentifier(schemaName);
    this.sql = buildSql(schema, wakeChannel(schemaName));
    this.stored = {
      insertWithIds: storedStatement(schema, {
        prefix: 'insert_jobs',
        parameterTypes: [
          'timestamptz',
          'bigint[]',
          'text[]',
          'text[]',
          'jsonb',
          'integer[]',
          'timestamptz[]',
          'bigint[]',
          'integer[]',
          'jsonb',
          'integer[]',
          'text[]',
          'timestamptz[]',
          'double precision',
          'text[]',
        ],
        returns: 'written bigint, now timestamptz, woke bigint',
        sql: this.sql.insertWithIds,
      }),
      completeMany: storedStatement(schema, {
        prefix: 'complete_jobs',
        parameterTypes: ['timestamptz', 'bigint[]', 'integer[]', 'text[]'],
        returns: 'done integer, ords text',
        sql: this.sql.completeMany,
      }),
      completeDeleteMany: storedStatement(schema, {
        prefix: 'complete_delete_jobs',
        parameterTypes: ['timestamptz', 'bigint[]', 'integer[]', 'text[]'],
        returns: 'done integer, ords text',
        sql: this.sql.completeDeleteMany,
      }),
      heartbeatMany: storedStatement(schema, {
        prefix: 'heartbeat_jobs',
        parameterTypes: ['timestamptz', 'bigint[]', 'integer[]', 'text[]', 'double precision'],
        returns: 'ord bigint, lease_until timestamptz',
        sql: this.sql.heartbeatMany,
      }),
      failMany: storedStatement(schema, {
        prefix: 'fail_jobs',
        parameterTypes: [
          'timestamptz',
          'bigint[]',
          'integer[]',
          'text[]',
          'text[]',
          'text[]',
          'text[]',
          'double precision[]',
        ],
        returns: 'retried text, parked text',
        sql: this.sql.failMany,
      }),
    };
  }

  /** The functions this class calls, for the store to create when it opens. */
  get storedStatements(): readonly StoredStatement[] {
    return [
      this.stored.insertWithIds,
      this.stored.completeMany,
      this.stored.completeDeleteMany,
      this.stored.heartbeatMany,
      this.stored.failMany,
    ];
  }

  /** The database's current time. */
  async now(db: Queryable): Promise<Date> {
    const result = await db.query<{ now: Date }>('SELECT now() AS now');
    return result.rows[0]!.now;
  }

  /**
   * Writes a batch in one statement. Rows whose idempotency key matched a live job committed
   * after this statement's snapshot come back with no id (ON CONFLICT saw the row, the lookup
   * could not); those specs alone are submitted again, which is safe because nothing of theirs
   * was written.
   *
   * Idempotency conflicts (a live job of the same queue and kind holds the key with another
   * payload) throw {@link IdempotencyConflictError}. A single job's conflict wrote nothing (ON
   * CONFLICT DO NOTHING); a batch's other rows may have been written, so a batch with keys must
   * run inside a transaction (or savepoint) that the caller rolls back on the throw
   * ({@link PostgresStore.jobSubmit} does).
   */
  async submit(db: Queryable, params: JobSubmitParams, wakeHorizonMs: number): Promise<SubmitResult[]> {
    const jobs = params.jobs;
    if (jobs.length === 0) return [];
    assertBatchKeysAgree(jobs);
    const ids = reservedSqlIds(params);
    const results: (SubmitResult | undefined)[] = new Array(jobs.length);
    let pending = jobs.map((_, index) => index);
    for (let round = 0; pending.length > 0; round++) {
      if (round >= 5) {
        throw new Error(
          `jobSubmit: an idempotency key kept racing with concurrent writers after ${round} rounds (jobs[${pending[0]}])`,
        );
      }
      const specs = pending.map((index) => jobs[index]!);
      const values = [
        pinned(params.now),
        ...columnArrays(specs),
        textArrayParam(specs.map((spec) => spec.idempotencyKey)),
        ...scheduleArrays(specs),
        wakeHorizonMs,
      ];
      const result =
        ids === undefined
          ? await db.query<SubmitRow>(this.sql.submit, values)
          : await db.query<SubmitRow>(this.sql.submitWithIds, [
              ...values,
              bigintArrayParam(pending.map((index) => ids[index]!)),
            ]);
      const missing: number[] = [];
      for (const row of result.rows) {
        const index = pending[Number(row.ord) - 1]!;
        if (row.inserted_id !== null) {
          results[index] = { id: row.inserted_id, created: row.is_first, runAt: row.inserted_run_at! };
        } else if (row.own_id !== undefined && row.own_id !== null) {
          // Written under its reserved id by an earlier send of this same submit (an ambiguous commit).
          if (row.own_same !== true) {
            throw new Error(
              `jobSubmit: job ${row.own_id} is stored with another kind, queue or payload than jobs[${index}] sent ` +
                'under that reserved id; the id was not reserved for this submit',
            );
          }
          results[index] = { id: row.own_id, created: row.is_first, runAt: row.own_run_at! };
        } else if (row.live_id !== null) {
          if (row.live_same_payload !== true) throw liveKeyConflict(jobs[index]!, index, jobs.length, row.live_id);
          results[index] = { id: row.live_id, created: false, runAt: row.live_run_at! };
        } else {
          missing.push(index);
        }
      }
      pending = missing;
    }
    return results as SubmitResult[];
  }

  /**
   * The common case of a group-committed flush, in the leanest statement: reserved ids, every
   * row new, so no row can be answered from another, and the planner is spared the window, the
   * lookups and the joins of submitWithIds (about half its server time at 100 rows; a stored
   * function besides, planned once per connection). Rows may carry idempotency keys, each scope
   * (queue, kind, key) at most once in the batch: the insert has no ON CONFLICT, so a key a live
   * job already holds, like an id already stored (the resend of a submit whose commit was
   * ambiguous), aborts the whole statement with a unique violation and nothing is written.
   * Undefined is then returned, and the caller answers the batch with submit or submitWithIds,
   * which know how to answer a held key or a stored id.
   */
  async insertReserved(
    db: Queryable,
    params: JobSubmitParams,
    wakeHorizonMs: number,
  ): Promise<SubmitResult[] | undefined> {
    const specs = params.jobs;
    const ids = reservedSqlIds(params);
    if (ids === undefined) throw new Error('jobSubmit: insertReserved needs reserved ids');
    let result: { rows: { written: string; now: Date }[] };
    try {
      result = await db.query<{ written: string; now: Date }>(this.stored.insertWithIds.callSql, [
        pinned(params.now),
        bigintArrayParam(ids),
        ...columnArrays(specs),
        ...scheduleArrays(specs),
        wakeHorizonMs,
        textArrayParam(sharedOrEach(specs.map((spec) => spec.idempotencyKey))),
      ]);
    } catch (error) {
      const { code, constraint } = error as { code?: unknown; constraint?: unknown };
      if (code === '23505' && (constraint === 'jobs_pkey' || constraint === 'jobs_idempotency_scope_idx')) {
        return undefined;
      }
      throw error;
    }
    const answer = result.rows[0];
    if (answer === undefined || Number(answer.written) !== specs.length) {
      throw new Error(`jobSubmit: ${answer?.written ?? 0} of ${specs.length} jobs were written by their insert`);
    }
    // The statement answers its instant instead of every row's run_at: parsing a thousand
    // timestamps cost more client CPU than the rest of the call. Each run_at is that instant plus
    // the job's whole-millisecond delay (or its given runAt), exactly as the insert computed it;
    // the instant's microseconds are dropped in both cases, so the Dates are equal.
    const nowMs = answer.now.getTime();
    return ids.map((id, index) => {
      const spec = specs[index]!;
      return { id, created: true, runAt: spec.runAt ?? new Date(nowMs + spec.delayMs) };
    });
  }

  /** Draws `count` ids from the job sequence, for submits that carry their own ids. */
  async reserveIds(db: Queryable, count: number): Promise<string[]> {
    const result = await db.query<{ ids: string[] }>(this.sql.reserveIds, [count]);
    return result.rows[0]!.ids;
  }

  /** Extends each lease still held; null for a stale token or owner, or a lease that already lapsed. */
  async heartbeatMany(db: Queryable, params: JobHeartbeatManyParams): Promise<(Date | null)[]> {
    const out: (Date | null)[] = params.leases.map(() => null);
    const batch = leaseBatch(params.leases);
    if (batch.indexes.length === 0) return out;
    const result = await db.query<{ ord: string; lease_until: Date }>(this.stored.heartbeatMany.callSql, [
      pinned(params.now),
      ...leaseBatchParams(batch),
      params.leaseMs,
    ]);
    for (const row of result.rows) out[batch.indexes[Number(row.ord) - 1]!] = row.lease_until;
    return out;
  }

  /**
   * Marks each job done whose token and owner are current (or deletes its row, with
   * `deleteRecord`); `stale` for the rest.
   */
  async completeMany(db: Queryable, params: JobCompleteManyParams): Promise<CompleteOutcome[]> {
    const out: CompleteOutcome[] = params.leases.map(() => 'stale');
    const batch = leaseBatch(params.leases);
    if (batch.indexes.length === 0) return out;
    const statement = params.deleteRecord === true ? this.stored.completeDeleteMany : this.stored.completeMany;
    const result = await db.query<{ done: number; ords: string | null }>(statement.callSql, [
      pinned(params.now),
      ...leaseBatchParams(batch),
    ]);
    const { done, ords } = result.rows[0]!;
    if (done === batch.indexes.length) {
      for (const index of batch.indexes) out[index] = 'done';
    } else if (ords !== null) {
      for (const ord of ords.split(',')) out[batch.indexes[Number(ord) - 1]!] = 'done';
      if (params.deleteRecord === true) acceptCopiesOfDeletedLeases(batch, out);
    }
    return out;
  }

  /**
   * Records each failed attempt's error and applies its decision (retry at now + delay, or park
   * in dead_jobs), each fenced by its own token and owner; `stale` for the rest, in input order.
   */
  async failMany(db: Queryable, params: JobFailManyParams): Promise<FailOutcome[]> {
    const { failures } = params;
    const out: FailOutcome[] = failures.map(() => STALE_FAILURE);
    const batch = leaseBatch(failures);
    if (batch.indexes.length === 0) return out;
    const messages: string[] = [];
    const kinds: string[] = [];
    const details: (string | null)[] = [];
    const delays: (number | null)[] = [];
    for (const index of batch.indexes) {
      const { error, decision } = failures[index]!;
      messages.push(error.message);
      kinds.push(error.kind);
      details.push(error.detail ?? null);
      delays.push(decision.kind === 'retry' ? decision.delayMs : null);
    }
    const result = await db.query<{ retried: string | null; parked: string | null }>(this.stored.failMany.callSql, [
      pinned(params.now),
      ...leaseBatchParams(batch),
      textArrayParam(messages),
      textArrayParam(kinds),
      textArrayParam(details),
      floatArrayParam(delays),
    ]);
    const { retried, parked } = result.rows[0]!;
    if (retried !== null) {
      for (const pair of retried.split(',')) {
        const colon = pair.indexOf(':');
        const index = batch.indexes[Number(pair.slice(0, colon)) - 1]!;
        out[index] = { outcome: 'retry', runAt: new Date(Number(pair.slice(colon + 1))) };
      }
    }
    if (parked !== null) {
      for (const ord of parked.split(',')) out[batch.indexes[Number(ord) - 1]!] = PARKED_FAILURE;
    }
    return out;
  }

  /** Gives a lease back: due at once, attempt not counted; wakes listeners. */
  async release(db: Queryable, params: JobReleaseParams): Promise<ReleaseOutcome> {
    const id = sqlJobId(params.id);
    if (id === null) return 'stale';
    const result = await db.query<{ released: string }>(this.sql.release, [
      id,
      params.token,
      params.leaseOwner ?? null,
    ]);
    return Number(result.rows[0]!.released) === 1 ? 'released' : 'stale';
  }

  /** Gives back every lease still held under `owner`; returns how many. */
  async releaseByOwner(db: Queryable, params: JobReleaseByOwnerParams): Promise<number> {
    const result = await db.query<{ released: string }>(this.sql.releaseByOwner, [params.owner]);
    return Number(result.rows[0]!.released);
  }

  /** Cancels a live job. */
  async cancel(db: Queryable, params: JobCancelParams): Promise<CancelOutcome> {
    const id = sqlJobId(params.id);
    if (id === null) return 'not_found';
    const result = await db.query<{ cancelled: string; known: boolean }>(this.sql.cancel, [pinned(params.now), id]);
    const row = result.rows[0]!;
    if (Number(row.cancelled) === 1) return 'cancelled';
    return row.known ? 'already_finished' : 'not_found';
  }

  /** One job from either table. */
  async get(db: Queryable, idText: string): Promise<Job | null> {
    const id = sqlJobId(idText);
    if (id === null) return null;
    const result = await db.query<JobRow>(this.sql.get, [id]);
    const row = result.rows[0];
    return row ? rowToJob(row) : null;
  }

  /** Deletes done and cancelled records that finished before the cut-off. */
  async pruneFinished(db: Queryable, params: JobPruneParams): Promise<number> {
    const result = await db.query(this.sql.pruneFinished, [params.finishedBefore]);
    return result.rowCount ?? 0;
  }

  /** The earliest instant a live job becomes claimable, never before now; null when none is live. */
  async nextRunAt(db: Queryable, params: NextRunAtParams): Promise<Date | null> {
    if (params.kinds !== undefined && params.kinds.length === 0) return null;
    const result = await db.query<{ next_run_at: Date | null }>(this.sql.nextRunAt, [
      pinned(params.now),
      params.queues ? [...params.queues] : null,
      params.kinds ? [...params.kinds] : null,
      params.excludeKinds ? [...params.excludeKinds] : [],
    ]);
    return result.rows[0]?.next_run_at ?? null;
  }

  /** Moves a parked job back to pending, due now, with fresh attempts; wakes listeners. */
  async deadLetterRetry(db: Queryable, params: DeadLetterRetryParams): Promise<Job | null> {
    const id = sqlJobId(params.id);
    if (id === null) return null;
    const result = await db.query<JobRow>(this.sql.deadLetterRetry, [pinned(params.now), id]);
    const row = result.rows[0];
    return row ? rowToJob(row) : null;
  }

  /** Deletes parked jobs by id and/or by park time. */
  async deadLetterPurge(db: Queryable, params: DeadLetterPurgeParams): Promise<number> {
    const ids = params.ids?.flatMap((id) => sqlJobId(id) ?? []) ?? null;
    const hasIds = ids !== null && ids.length > 0;
    if (!hasIds && params.parkedBefore === undefined) return 0;
    const result = await db.query(this.sql.deadLetterPurge, [hasIds ? ids : null, params.parkedBefore ?? null]);
    return result.rowCount ?? 0;
  }

  /** Counts by queue and state. */
  async queueStats(db: Queryable, now: Date | undefined): Promise<QueueStats[]> {
    const result = await db.query<
      Record<keyof Omit<QueueStats, 'queue' | 'paused' | 'unhandled'>, string> & { queue: string; paused: boolean }
    >(this.sql.queueStats, [pinned(now)]);
    return result.rows.map((row) => queueStatsOf(row, row.paused));
  }

  /** Available jobs (due pending, lapsed running) by queue and kind, paused queues left out. */
  async dueCountsByKind(db: Queryable, now: Date | undefined): Promise<DueKindCount[]> {
    const result = await db.query<{ queue: string; kind: string; count: string }>(this.sql.dueCountsByKind, [
      pinned(now),
    ]);
    return result.rows.map((row) => ({ queue: row.queue, kind: row.kind, count: Number(row.count) }));
  }

  /** The SQL of next-run-at, for EXPLAIN in tests. */
  get nextRunAtSql(): string {
    return this.sql.nextRunAt;
  }
}

interface SubmitRow {
  ord: string;
  is_first: boolean;
  inserted_id: string | null;
  inserted_run_at: Date | null;
  /** submitWithIds only: the row already stored under the input's reserved id. */
  own_id?: string | null;
  own_run_at?: Date | null;
  /** Whether that row has the input's kind, queue and payload (it is this submit's, not a stranger's). */
  own_same?: boolean | null;
  live_id: string | null;
  live_run_at: Date | null;
  live_same_payload: boolean | null;
}

function buildSql(s: string, channel: string) {
  const jobs = `${s}.jobs`;
  const dead = `${s}.dead_jobs`;
  /** The last instant a job may run at, as SQL. */
  const LATEST_RUN_AT = `'${new Date(LATEST_RUN_AT_MS).toISOString()}'::timestamptz`;
  const live = `('pending', 'running')`;
  const ms = intervalMs;
  const channelLiteral = `'${channel.replace(/'/g, "''")}'`;
  const queues = `${s}.queues`;
  const notPaused = (queue: string) => queueNotPaused(queues, queue);

  /** The submit statement, drawing ids from the sequence or (withIds) taking reserved ones; see submit and submitWithIds. */
  function submitSql(withIds: boolean): string {
    const givenIds = withIds ? ', $15::bigint[]' : '';
    const givenIdColumn = withIds ? ', given_id' : '';
    const newId = withIds ? 'input.given_id' : `nextval('${s}.jobs_id_seq')`;
    const onConflict = withIds
      ? 'ON CONFLICT DO NOTHING'
      : `ON CONFLICT (queue, kind, idempotency_key) WHERE idempotency_key IS NOT NULL AND state IN ${live} DO NOTHING`;
    const ownColumns = withIds
      ? '\n             own.id AS own_id, own.run_at AS own_run_at, own.same AS own_same,'
      : '';
    const ownJoin = withIds
      ? `
      LEFT JOIN LATERAL (
        SELECT o.id, o.run_at, o.kind = f.kind AND o.queue = f.queue AND o.payload = f.payload AS same FROM (
          SELECT j.id, j.run_at, j.kind, j.queue, j.payload FROM ${jobs} j WHERE j.id = f.new_id
          UNION ALL
          SELECT d.id, d.run_at, d.kind, d.queue, d.payload FROM ${dead} d WHERE d.id = f.new_id
        ) o
        WHERE ins.id IS NULL
        LIMIT 1
      ) own ON true`
      : '';
    return `
      WITH input AS MATERIALIZED (
        SELECT i.*,
               CASE WHEN i.idempotency_key IS NULL THEN i.ord
                    ELSE min(i.ord) OVER (PARTITION BY i.queue, i.kind, i.idempotency_key) END AS first_ord
        FROM (
          SELECT ${batchColumn('$2', 'text[]', 'r.kind')} AS kind, ${batchColumn('$3', 'text[]', 'r.queue')} AS queue,
                 r.payload, ${batchColumn('$5', 'int[]', 'r.priority')} AS priority,
                 ${batchColumn('$6', 'timestamptz[]', 'r.run_at')} AS run_at,
                 ${batchColumn('$7', 'bigint[]', 'r.delay_ms')} AS delay_ms,
                 ${batchColumn('$8', 'int[]', 'r.max_attempts')} AS max_attempts,
                 ${batchJsonColumn('$9', 'r.retry_policy')} AS retry_policy,
                 ${batchColumn('$10', 'int[]', 'r.timeout_ms')} AS timeout_ms, r.idempotency_key,
                 ${batchColumn('$12', 'text[]', 'r.schedule_id')} AS schedule_id,
                 ${batchColumn('$13', 'timestamptz[]', 'r.schedule_slot')} AS schedule_slot${withIds ? ', r.given_id' : ''}, r.ord
          FROM ROWS FROM (unnest($2::text[], $3::text[]), jsonb_array_elements($4::jsonb),
                          unnest($5::int[], $6::timestamptz[], $7::bigint[], $8::int[]), jsonb_array_elements($9::jsonb),
                          unnest($10::int[], $11::text[], $12::text[], $13::timestamptz[]${givenIds}))
            WITH ORDINALITY AS r(kind, queue, payload, priority, run_at, delay_ms, max_attempts, retry_policy,
                                 timeout_ms, idempotency_key, schedule_id, schedule_slot${givenIdColumn}, ord)
        ) i
      ),
      fresh AS MATERIALIZED (
        SELECT input.*, ${newId} AS new_id FROM input WHERE ord = first_ord ORDER BY ord
      ),
      inserted AS (
        INSERT INTO ${jobs} (id, kind, queue, payload, priority, state, run_at, token, attempts, max_attempts,
                             retry_policy, errors, idempotency_key, timeout_ms, schedule_id, schedule_slot, created_at)
        SELECT f.new_id, f.kind, f.queue, f.payload, f.priority, 'pending',
               coalesce(f.run_at, ${NOW} + ${ms('f.delay_ms')}), 0, 0, f.max_attempts,
               f.retry_policy, '[]'::jsonb, f.idempotency_key, f.timeout_ms, f.schedule_id, f.schedule_slot,
               ${NOW}
        FROM fresh f ORDER BY f.ord
        ${onConflict}
        RETURNING id, run_at, queue, kind
      ),
      wake AS (
        ${wakeNotify(channelLiteral, 'inserted', `run_at <= ${NOW} + ${ms('$14')}`)}
      )
      SELECT i.ord, i.ord = i.first_ord AS is_first,
             ins.id AS inserted_id, ins.run_at AS inserted_run_at,
             l.id AS live_id, l.run_at AS live_run_at, l.same_payload AS live_same_payload,${ownColumns}
             (SELECT count(*) FROM wake) AS woke
      FROM input i
      LEFT JOIN fresh f ON f.ord = i.first_ord
      LEFT JOIN inserted ins ON ins.id = f.new_id
      LEFT JOIN LATERAL (
        SELECT j.id, j.run_at, j.payload = i.payload AS same_payload FROM ${jobs} j
        WHERE ins.id IS NULL AND i.idempotency_key IS NOT NULL
          AND j.queue = i.queue AND j.kind = i.kind AND j.idempotency_key = i.idempotency_key
          AND j.state IN ${live}
        LIMIT 1
      ) l ON true${ownJoin}
      ORDER BY i.ord`;
  }

  return {
    /**
     * submit: writes a batch of jobs in one statement, drawing their ids from the sequence.
     * Params: $1 now?, $2 kind[], $3 queue[], $4 payloads (one JSON array text), $5 priority[],
     *   $6 run_at[] (NULL = now + delay), $7 delay_ms[], $8 max_attempts[], $9 retry policies (one
     *   JSON array text), $10 timeout_ms[], $11 idempotency_key[], $12 schedule_id[],
     *   $13 schedule_slot[], $14 wake horizon ms. Every array but the payloads' and the keys'
     *   may hold one element, which then stands for every row (batchColumn; decision 0020).
     * Result: one row per input, in input order: ord, is_first (not a repeat of an earlier
     *   (queue, kind, key) in the batch), inserted_id/inserted_run_at when written,
     *   live_id/live_run_at/live_same_payload when the key matched a live job of the same queue and
     *   kind (same_payload: jsonb equality, so key order does not matter); all NULL when that job
     *   committed after this statement's snapshot.
     * Ids are drawn from the sequence up front so each returned id maps to its input row without
     * relying on RETURNING order. A key already held by a live job of the same queue and kind
     * writes nothing (ON CONFLICT on the live-only unique index on (queue, kind, key), which also
     * waits out a concurrent insert of the same key). Whether an answered repeat's payload differs
     * is reported, not acted on: the caller refuses it (and rolls back a batch).
     * Wake-up: at most one NOTIFY per statement (commits of notifying transactions serialise on a
     * global lock, so one per row would cap submits near 1,000/s), and only when some new job is
     * due within the horizon; the payload is the earliest run_at in epoch ms. A group-committed
     * batch of single submits (src/submit/) is one statement, so one NOTIFY at most.
     */
    submit: submitSql(false),

    /**
     * submitWithIds: submit, with each job's id reserved beforehand (reserveIds) and given as
     *   $15 bigint[], so the same statement can be sent again after its connection dropped with
     *   its commit unknown. ON CONFLICT takes no target here: a row whose id is already stored
     *   (the earlier send committed) is skipped like a key held by a live job, and answered from
     *   own_id/own_run_at (read from jobs or, if it was parked meanwhile, dead_jobs). Schedule
     *   runs never come this way (their slot conflicts are the claim's business).
     * Result: as submit, plus own_id/own_run_at.
     */
    submitWithIds: submitSql(true),

    /**
     * insertWithIds: writes a batch of new jobs under reserved ids, each idempotency key's scope
     *   at most once in the batch.
     * Params: $1 now?, $2 id bigint[], $3 kind[], $4 queue[], $5 payloads (one JSON array text),
     *   $6 priority[], $7 run_at[] (NULL = now + delay), $8 delay_ms[], $9 max_attempts[],
     *   $10 retry policies (one JSON array text), $11 timeout_ms[], $12 schedule_id[],
     *   $13 schedule_slot[], $14 wake horizon ms, $15 idempotency_key[]. ROWS FROM zips the
     *   arrays by position; every array but the ids' and the payloads' may hold one element,
     *   which then stands for every row (batchColumn; decision 0020).
     * Result: one row: written (the row count: all are written, or the statement fails: a stored
     *   id raises unique_violation on jobs_pkey, which only the resend of an ambiguous commit
     *   meets, and a key a live job holds raises it on jobs_idempotency_scope_idx, waiting first
     *   for a concurrent writer of that key to commit or roll back) and now, the statement's
     *   instant, from which the caller derives each run_at.
     * Wake-up: as submit, at most one NOTIFY for the statement.
     */
    insertWithIds: `
      WITH inserted AS (
        INSERT INTO ${jobs} (id, kind, queue, payload, priority, state, run_at, token, attempts, max_attempts,
                             retry_policy, errors, idempotency_key, timeout_ms, schedule_id, schedule_slot, created_at)
        SELECT i.id, ${batchColumn('$3', 'text[]', 'i.kind')}, ${batchColumn('$4', 'text[]', 'i.queue')}, i.payload,
               ${batchColumn('$6', 'int[]', 'i.priority')}, 'pending',
               coalesce(${batchColumn('$7', 'timestamptz[]', 'i.run_at')},
                        ${NOW} + ${ms(batchColumn('$8', 'bigint[]', 'i.delay_ms'))}), 0, 0,
               ${batchColumn('$9', 'int[]', 'i.max_attempts')}, ${batchJsonColumn('$10', 'i.retry_policy')}, '[]'::jsonb,
               ${batchColumn('$15', 'text[]', 'i.idempotency_key')}, ${batchColumn('$11', 'int[]', 'i.timeout_ms')}, ${batchColumn('$12', 'text[]', 'i.schedule_id')},
               ${batchColumn('$13', 'timestamptz[]', 'i.schedule_slot')}, ${NOW}
        FROM ROWS FROM (unnest($2::bigint[], $3::text[], $4::text[]), jsonb_array_elements($5::jsonb),
                        unnest($6::int[], $7::timestamptz[], $8::bigint[], $9::int[]), jsonb_array_elements($10::jsonb),
                        unnest($11::int[], $12::text[], $13::timestamptz[], $15::text[]))
          AS i(id, kind, queue, payload, priority, run_at, delay_ms, max_attempts, retry_policy, timeout_ms,
               schedule_id, schedule_slot, idempotency_key)
        RETURNING run_at, queue, kind
      ),
      wake AS (
        ${wakeNotify(channelLiteral, 'inserted', `run_at <= ${NOW} + ${ms('$14')}`)}
      )
      SELECT count(*) AS written, ${NOW} AS now, (SELECT count(*) FROM wake) AS woke FROM inserted`,

    /**
     * reserveIds: draws ids from the job sequence for submitWithIds; no row is written.
     * Params: $1 count.
     * Result: one row, ids text[] (bigint ids as text, ascending).
     * Durability: pg_current_xact_id() gives the statement a transaction id, so its commit waits
     * for the WAL flush like any write. Without one, PostgreSQL flushes a bare nextval's WAL
     * lazily, and a crash within that moment would rewind the sequence and hand these ids to
     * another submitter, whose job a resend of ours would then mistake for its own.
     */
    reserveIds: `
      SELECT pg_current_xact_id() AS xact,
             (SELECT array_agg(nextval('${s}.jobs_id_seq')::text ORDER BY n) FROM generate_series(1, $1::int) AS n) AS ids`,

    /**
     * heartbeatMany: extends each lease that is still ours (token and owner) and still live.
     * Params: $1 now?, $2 ids bigint[], $3 tokens int[], $4 owners text[] (an element NULL =
     *   fenced by the token alone), $5 lease ms.
     * Result: ord (1-based input position) and the new lease_until for each extended lease only.
     * Plan: each element's row by id in the primary key, as completeMany (the "C" collation there).
     */
    heartbeatMany: `
      UPDATE ${jobs} j SET lease_until = ${NOW} + ${ms('$5')}
      FROM unnest($2::bigint[], $3::int[], $4::text[]) WITH ORDINALITY AS l(id, token, owner, ord)
      WHERE ${jobRowById('l.id')} AND j.token = l.token AND ${ownerMatches('l.owner')}
        AND j.state = 'running' COLLATE "C" AND j.lease_until > ${NOW}
      RETURNING l.ord, j.lease_until`,

    /**
     * completeMany: marks jobs done, each fenced by its own token and owner.
     * Params: $1 now?, $2 ids bigint[], $3 tokens int[], $4 owners text[] (an element NULL =
     *   fenced by the token alone).
     * Result: one row: done (how many were accepted) and ords (their 1-based input positions,
     *   comma-separated; NULL when none was). One row rather than one per job: a drain completes
     *   every job, and a row each was parsed into an object each.
     * Plan: for each element, its row by id in the primary key; nothing else can be planned,
     *   whatever the table's size when the plan was made. The id test is an array comparison
     *   (jobRowById), so no scan of the whole primary key is a candidate (decision 0023). The
     *   state test compares under the "C" collation, which for equality means exactly what the
     *   column's own does (both compare bytes), but matches no index and proves no partial
     *   index's predicate: so no plan can reach the rows through the running-lease index or the
     *   (state, queue, id) index and join them with the batch afterwards, which a plan cached
     *   while the table was empty would (it estimates one running row).
     */
    completeMany: `
      WITH accepted AS (
        UPDATE ${jobs} j SET state = 'done', finished_at = ${NOW}, lease_until = NULL
        FROM unnest($2::bigint[], $3::int[], $4::text[]) WITH ORDINALITY AS l(id, token, owner, ord)
        WHERE ${jobRowById('l.id')} AND j.token = l.token AND ${ownerMatches('l.owner')} AND j.state = 'running' COLLATE "C"
        RETURNING l.ord
      )
      SELECT count(*)::int AS done, string_agg(ord::text, ',') AS ords FROM accepted`,

    /**
     * completeDeleteMany: completeMany for retention 0: each accepted job's row is deleted
     * instead of becoming a done record. Same parameters, fence, result and plan as completeMany.
     * Why it exists: an update writes a new row version and three index entries (primary key,
     * finished, listed), since no update of a job is HOT; a delete only marks the row, so a
     * finish costs the database a quarter as much (decision 0022).
     */
    completeDeleteMany: `
      WITH accepted AS (
        DELETE FROM ${jobs} j
        USING unnest($2::bigint[], $3::int[], $4::text[]) WITH ORDINALITY AS l(id, token, owner, ord)
        WHERE ${jobRowById('l.id')} AND j.token = l.token AND ${ownerMatches('l.owner')} AND j.state = 'running' COLLATE "C"
        RETURNING l.ord
      )
      SELECT count(*)::int AS done, string_agg(ord::text, ',') AS ords FROM accepted`,

    /**
     * failMany: records each failed attempt's error and applies its decision: a retry makes the
     *   job pending at now + delay, a park moves it to dead_jobs; each fenced by its own token and
     *   owner, as completeMany.
     * Params: $1 now?, $2 ids bigint[], $3 tokens int[], $4 owners text[] (an element NULL =
     *   fenced by the token alone), $5 messages text[], $6 error kinds text[], $7 details text[]
     *   (NULL = none), $8 delay ms double precision[] (NULL = park).
     * Result: one row: retried, the accepted retries as `ord:run_at` pairs (1-based input position,
     *   the new run_at in epoch ms), comma-separated, and parked, the accepted parks' ords; NULL
     *   when there are none. One row rather than one per failure, and epoch ms rather than a
     *   timestamptz, which pg parses with a regular expression per value (as completeMany).
     * A lease named twice is written once (DISTINCT ON keeps its first copy): one statement must
     *   not update or delete a row twice. A retry runs no later than the last instant a job may
     *   run at (LATEST_RUN_AT_MS, the submits' own limit): a policy or snooze of thousands of
     *   years would otherwise overflow the timestamp and fail the whole batch, every other
     *   failure in it with it. Plan: each element's row by id in the primary key
     *   (jobRowById, decision 0023; the "C" collation as in completeMany).
     */
    failMany: `
      WITH l AS MATERIALIZED (
        SELECT DISTINCT ON (f.id) f.id, f.token, f.owner, f.err_message, f.err_kind, f.err_detail, f.delay_ms, f.ord
        FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::double precision[])
          WITH ORDINALITY AS f(id, token, owner, err_message, err_kind, err_detail, delay_ms, ord)
        ORDER BY f.id, f.ord
      ),
      retried AS (
        UPDATE ${jobs} j
        SET state = 'pending', run_at = least(${NOW} + ${ms(`least(l.delay_ms, ${LATEST_RUN_AT_MS})`)}, ${LATEST_RUN_AT}),
            lease_until = NULL,
            errors = j.errors || jsonb_build_array(${errorEntry('j.attempts', 'l.err_message', 'l.err_kind', 'l.err_detail', 'j')})
        FROM l
        WHERE ${jobRowById('l.id')} AND j.token = l.token AND ${ownerMatches('l.owner')} AND j.state = 'running' COLLATE "C"
          AND l.delay_ms IS NOT NULL
        RETURNING l.ord, j.run_at
      ),
      moved AS (
        DELETE FROM ${jobs} j
        USING l
        WHERE ${jobRowById('l.id')} AND j.token = l.token AND ${ownerMatches('l.owner')} AND j.state = 'running' COLLATE "C"
          AND l.delay_ms IS NULL
        RETURNING j.*, l.ord, l.err_message, l.err_kind, l.err_detail
      ),
      parked AS (
        ${parkInsert(dead, 'moved', `m.errors || jsonb_build_array(${errorEntry('m.attempts', 'm.err_message', 'm.err_kind', 'm.err_detail', 'm')})`)}
        RETURNING id
      )
      SELECT (SELECT string_agg(ord::text || ':' || ${epochMsText('run_at')}, ',') FROM retried) AS retried,
             (SELECT string_agg(ord::text, ',') FROM moved) AS parked`,

    /**
     * release: gives a lease back; the job is pending and due at once (run_at is already past),
     * its attempt uncounted. Wakes listeners so another worker picks it up without a poll.
     * Params: $1 id, $2 token, $3 owner? (no time: release does not move run_at).
     * Result: released = 1 when it was ours (token and owner), else 0.
     */
    release: `
      WITH released AS (
        UPDATE ${jobs} j SET state = 'pending', lease_until = NULL, attempts = greatest(j.attempts - 1, 0)
        WHERE j.id = $1 AND j.token = $2 AND ${ownerMatches('$3::text')} AND j.state = 'running'
        RETURNING j.run_at, j.queue, j.kind
      ),
      wake AS (
        ${wakeNotify(channelLiteral, 'released')}
      )
      SELECT (SELECT count(*) FROM released) AS released, (SELECT count(*) FROM wake) AS woke`,

    /**
     * releaseByOwner: gives back every lease still held under one claim's owner, like release.
     * Params: $1 owner.
     * Result: released (how many), woke.
     * For a claim whose answer was lost: its worker knows the owner it sent, not the tokens.
     */
    releaseByOwner: `
      WITH released AS (
        UPDATE ${jobs} j SET state = 'pending', lease_until = NULL, attempts = greatest(j.attempts - 1, 0)
        WHERE j.state = 'running' AND j.lease_owner = $1
        RETURNING j.run_at, j.queue, j.kind
      ),
      wake AS (
        ${wakeNotify(channelLiteral, 'released')}
      )
      SELECT (SELECT count(*) FROM released) AS released, (SELECT count(*) FROM wake) AS woke`,

    /**
     * cancel: moves a live job to cancelled; a running one loses its lease (state is no longer
     * running, so its holder's heartbeat and completion are refused).
     * Params: $1 now?, $2 id.
     * Result: cancelled (0 or 1) and known (the id exists in either table).
     */
    cancel: `
      WITH cancelled AS (
        UPDATE ${jobs} j SET state = 'cancelled', finished_at = ${NOW}, lease_until = NULL
        WHERE j.id = $2 AND j.state IN ${live}
        RETURNING j.id
      )
      SELECT (SELECT count(*) FROM cancelled) AS cancelled,
             EXISTS (SELECT 1 FROM ${jobs} WHERE id = $2) OR EXISTS (SELECT 1 FROM ${dead} WHERE id = $2) AS known`,

    /**
     * get: one job by id from either table.
     * Params: $1 id.
     * Result: zero or one job row.
     */
    get: `
      SELECT ${JOB_COLUMNS.join(', ')} FROM ${jobs} WHERE id = $1
      UNION ALL
      SELECT ${JOB_COLUMNS.join(', ')} FROM ${dead} WHERE id = $1`,

    /**
     * pruneFinished: deletes done/cancelled records finished before the cut-off.
     * Params: $1 finished-before instant.
     * Result: rowCount = how many were deleted.
     */
    pruneFinished: `
      DELETE FROM ${jobs} WHERE state IN ('done', 'cancelled') AND finished_at < $1::timestamptz`,

    /**
     * nextRunAt: the earliest instant a live job becomes claimable, clamped to now. Paused
     * queues are left out: their due jobs would otherwise wake a sleeping worker in a busy loop.
     * Foreign kinds are left out too: a job no handler of this worker can run must not wake it.
     * Params: $1 now?, $2 queues text[] (NULL = all), $3 kinds text[] (NULL = all), $4 excluded
     *   kinds text[] (empty = none).
     * Result: next_run_at, NULL when no live job exists. Index lookups only: one probe per
     *   (queue, kind, priority) triple for pending jobs (loose scan; the probe's first row is the
     *   triple's earliest run_at), and the head of the running index.
     */
    nextRunAt: `
      WITH RECURSIVE ${pendingTriplesCte(jobs, '$2')},
      earliest AS MATERIALIZED (
        SELECT least(
          (SELECT min(p.first_run_at) FROM triples p
           WHERE ${kindAllowed('p.kind', '$3', '$4')} AND ${notPaused('p.queue')}),
          (SELECT min(j.lease_until) FROM ${jobs} j
             WHERE j.state = 'running' AND ($2::text[] IS NULL OR j.queue = ANY($2::text[]))
               AND ${kindAllowed('j.kind', '$3', '$4')} AND ${notPaused('j.queue')})
        ) AS at
      )
      SELECT CASE WHEN at IS NULL THEN NULL ELSE greatest(at, ${NOW}) END AS next_run_at FROM earliest`,

    /**
     * deadLetterRetry: moves a parked job back to jobs as pending, due now, attempts 0; id,
     * token and errors kept. Its idempotency key is dropped if a live job of the same queue and
     * kind took it meanwhile (the unique index would otherwise refuse the move); likewise a recurring run drops its
     * schedule_slot (keeping schedule_id) when another job holds that (schedule, slot). Wakes listeners.
     * Params: $1 now?, $2 id.
     * Result: the job row as now stored, or no row when the id is not parked.
     */
    deadLetterRetry: `
      WITH moved AS (
        DELETE FROM ${dead} WHERE id = $2 RETURNING *
      ),
      revived AS (
        INSERT INTO ${jobs} (${JOB_COLUMNS.join(', ')})
        SELECT m.id, m.kind, m.queue, m.payload, m.priority, 'pending', ${NOW}, NULL, m.lease_owner, m.token,
               0, m.max_attempts, m.retry_policy, m.errors,
               CASE WHEN EXISTS (SELECT 1 FROM ${jobs} o
                                 WHERE o.queue = m.queue AND o.kind = m.kind
                                   AND o.idempotency_key = m.idempotency_key AND o.state IN ${live})
                    THEN NULL ELSE m.idempotency_key END,
               m.timeout_ms, m.schedule_id,
               CASE WHEN EXISTS (SELECT 1 FROM ${jobs} o
                                 WHERE o.schedule_id = m.schedule_id AND o.schedule_slot = m.schedule_slot)
                    THEN NULL ELSE m.schedule_slot END,
               m.created_at, NULL, m.started_at
        FROM moved m
        RETURNING ${JOB_COLUMNS.join(', ')}
      ),
      wake AS (
        ${wakeNotify(channelLiteral, 'revived')}
      )
      SELECT revived.*, (SELECT count(*) FROM wake) AS woke FROM revived`,

    /**
     * deadLetterPurge: deletes parked jobs named by id or parked before an instant (either matches).
     * Params: $1 ids bigint[]?, $2 parked-before?.
     * Result: rowCount = how many were deleted.
     */
    deadLetterPurge: `
      DELETE FROM ${dead}
      WHERE ($1::bigint[] IS NOT NULL AND id = ANY($1::bigint[]))
         OR ($2::timestamptz IS NOT NULL AND parked_at < $2::timestamptz)`,

    /**
     * dueCountsByKind: available jobs by queue and kind, paused queues left out: pending with
     * run_at <= now, plus running with a lapsed lease (due again, as queueStats' `available`).
     * Params: $1 now?.
     * Result: queue, kind, count (> 0), ordered by queue, kind (bytewise, as SQLite).
     * Plan: one pass over the pending rows (the planner picks the pending index or the table),
     *   plus the small running index for lapsed leases. Not the claim's triple walk: a count per
     *   triple is a range as large as the backlog, and with a stale visibility map PostgreSQL
     *   answers each with a table scan, so a walk would cost one table scan per triple, where
     *   this costs one at most (queueStats already reads the whole table). The SQLite twin counts
     *   per triple, its planner always taking the covering index range.
     */
    dueCountsByKind: `
      WITH counts AS (
        SELECT j.queue, j.kind, count(*) AS n FROM ${jobs} j
        WHERE j.state = 'pending' AND j.run_at <= ${NOW}
        GROUP BY j.queue, j.kind
        UNION ALL
        SELECT j.queue, j.kind, count(*) FROM ${jobs} j
        WHERE j.state = 'running' AND j.lease_until <= ${NOW}
        GROUP BY j.queue, j.kind
      )
      SELECT c.queue, c.kind, sum(c.n) AS count FROM counts c
      WHERE ${notPaused('c.queue')}
      GROUP BY c.queue, c.kind ORDER BY c.queue COLLATE "C", c.kind COLLATE "C"`,

    /**
     * queueStats: counts by queue; scheduled/available/running are judged at now.
     * Params: $1 now?.
     * Result: one row per queue that has any job in either table or is paused, ordered by
     *   queue, with its pause state.
     */
    queueStats: `
      WITH counts AS (
        SELECT queue,
               count(*) FILTER (WHERE state = 'pending' AND run_at > ${NOW}) AS scheduled,
               count(*) FILTER (WHERE (state = 'pending' AND run_at <= ${NOW})
                                   OR (state = 'running' AND lease_until <= ${NOW})) AS available,
               count(*) FILTER (WHERE state = 'running' AND lease_until > ${NOW}) AS running,
               count(*) FILTER (WHERE state = 'done') AS done,
               count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
               0::bigint AS dead
        FROM ${jobs} GROUP BY queue
        UNION ALL
        SELECT queue, 0, 0, 0, 0, 0, count(*) FROM ${dead} GROUP BY queue
        UNION ALL
        SELECT name, 0, 0, 0, 0, 0, 0 FROM ${queues} WHERE paused
      )
      SELECT c.queue, coalesce(bool_or(q.paused), false) AS paused,
             sum(scheduled) AS scheduled, sum(available) AS available, sum(running) AS running,
             sum(done) AS done, sum(cancelled) AS cancelled, sum(dead) AS dead
      FROM counts c LEFT JOIN ${queues} q ON q.name = c.queue
      GROUP BY c.queue ORDER BY c.queue`,
  };
}

/**
 * JSON texts joined into one JSON array text, which a statement splits with
 * jsonb_array_elements. Sent as a text[] instead, each element would be escaped into an array
 * literal by the driver (every quote in every payload backslashed) and cast on the server one by
 * one: for a batch of 1,000 small payloads that escaping was a third of the client's CPU.
 */
function jsonArrayText(texts: readonly string[]): string {
  return `[${texts.join(',')}]`;
}

/**
 * The per-job column arrays every submit statement takes, in its parameter order ($kind through
 * $timeout_ms): one place, so the insert with reserved ids and the answering insert cannot drift.
 * Each is one array literal (array-params.ts) rather than a JavaScript array pg would escape
 * element by element. A column every job of the batch shares (kind, queue, options: most batches,
 * and most group-committed single submits) is sent as an array of that one value, which the
 * statements read as every row's ({@link batchColumn}); see decision 0020.
 */
function columnArrays(specs: JobSubmitParams['jobs']): string[] {
  let lastPolicy: JobSubmitParams['jobs'][number]['retryPolicy'] | undefined;
  let lastPolicyJson = '';
  const policies = specs.map(({ retryPolicy }) => {
    if (retryPolicy !== lastPolicy) {
      lastPolicy = retryPolicy;
      lastPolicyJson = JSON.stringify(retryPolicy);
    }
    return lastPolicyJson;
  });
  return [
    textArrayParam(sharedOrEach(specs.map((spec) => spec.kind))),
    textArrayParam(sharedOrEach(specs.map((spec) => spec.queue))),
    jsonArrayText(specs.map((spec) => spec.payloadJson)),
    intArrayParam(sharedOrEach(specs.map((spec) => spec.priority))),
    timestamptzArrayParam(
      sharedOrEach(
        specs.map((spec) => spec.runAt),
        instantKey,
      ),
    ),
    intArrayParam(sharedOrEach(specs.map((spec) => spec.delayMs))),
    intArrayParam(sharedOrEach(specs.map((spec) => spec.maxAttempts))),
    jsonArrayText(sharedOrEach(policies)),
    intArrayParam(sharedOrEach(specs.map((spec) => spec.timeoutMs))),
  ];
}

/** The schedule columns of a submit batch ($schedule_id, $schedule_slot), shared as columnArrays shares. */
/** A submit's reserved ids as SQL ids (undefined when it brings none); a malformed or miscounted list throws. */
function reservedSqlIds(params: JobSubmitParams): string[] | undefined {
  const ids = params.ids?.map((id, index) => {
    const sqlId = sqlJobId(id);
    if (sqlId === null) throw new Error(`jobSubmit: ids[${index}] ${JSON.stringify(id)} is not a reserved job id`);
    return sqlId;
  });
  if (ids !== undefined && ids.length !== params.jobs.length) {
    throw new Error(`jobSubmit: ${ids.length} ids for ${params.jobs.length} jobs`);
  }
  return ids;
}

function scheduleArrays(specs: JobSubmitParams['jobs']): string[] {
  return [
    textArrayParam(sharedOrEach(specs.map((spec) => spec.scheduleId))),
    timestamptzArrayParam(
      sharedOrEach(
        specs.map((spec) => spec.scheduleSlot),
        instantKey,
      ),
    ),
  ];
}

/** Equal instants compare equal (two Date objects never are). */
function instantKey(value: Date | null): number | null {
  return value === null ? null : value.getTime();
}
