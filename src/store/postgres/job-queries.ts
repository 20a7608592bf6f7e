/**
 * The PostgreSQL store's SQL, one method per Store operation, each headed by purpose, parameters
 * and result. Every method takes the {@link Queryable} to run on: the store passes its pool, and a
 * caller's own client (a transaction) can be passed instead, which is how submit-in-your-transaction
 * and complete-in-the-handler's-transaction plug in later without new SQL.
 *
 * Time: every due or lease comparison reads `coalesce($now::timestamptz, now())`: a pinned instant
 * from tests, else the database clock. Nothing here reads the worker's clock.
 *
 * Rows are converted to {@link Job} in exactly one place ({@link rowToJob}); SQL names are snake_case.
 */
import type pg from 'pg';
import type { AttemptError, ClaimedJob, Job, JobState, JsonValue, RetryPolicy } from '../../job/job.js';
import type {
  CancelOutcome,
  CompleteOutcome,
  DeadLetterListParams,
  DeadLetterPurgeParams,
  DeadLetterRetryParams,
  FailOutcome,
  JobCancelParams,
  JobClaimParams,
  JobCompleteManyParams,
  JobFailParams,
  JobHeartbeatManyParams,
  JobListParams,
  JobPruneParams,
  JobReleaseByOwnerParams,
  JobReleaseParams,
  JobSubmitParams,
  NextRunAtParams,
  QueueStats,
  ReleaseOutcome,
  SubmitResult,
} from '../store.js';
import { quoteIdentifier } from './migrations.js';

/** Anything that runs a parameterised query: a `pg.Pool`, a pooled client or a plain client. */
export interface Queryable {
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

/** The message recorded when a claim finds a lapsed lease (the conformance suite reads it). */
export const LEASE_EXPIRED_MESSAGE = 'lease expired: the worker stopped heartbeating (crashed or stalled)';

/** Default and largest page for list operations. */
/**
 * Exhausted lapsed jobs parked by one claim, whatever its limit: a poison job must not take a
 * claim of 1 and starve healthy jobs, yet a burst of thousands should not make one claim slow.
 */
const MAX_PARKED_PER_CLAIM = 1000;
const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;

/** The NOTIFY channel for a schema's wake-ups: one per schema so test schemas do not wake each other. */
export function wakeChannel(schemaName: string): string {
  return `docket.${schemaName}.wake`;
}

/** The database clock, unless the caller pinned an instant. Always parameter $1. */
const NOW = 'coalesce($1::timestamptz, now())';

const JOB_COLUMNS = [
  'id',
  'kind',
  'queue',
  'payload',
  'priority',
  'state',
  'run_at',
  'lease_until',
  'lease_owner',
  'token',
  'attempts',
  'max_attempts',
  'retry_policy',
  'errors',
  'idempotency_key',
  'timeout_ms',
  'schedule_id',
  'schedule_slot',
  'created_at',
  'finished_at',
] as const;

/** A jobs or dead_jobs row as pg returns it (int8 as string, timestamptz as Date, jsonb parsed). */
interface JobRow {
  id: string;
  kind: string;
  queue: string;
  payload: JsonValue;
  priority: number;
  state: JobState;
  run_at: Date;
  lease_until: Date | null;
  lease_owner: string | null;
  token: number;
  attempts: number;
  max_attempts: number;
  retry_policy: RetryPolicy;
  errors: StoredAttemptError[];
  idempotency_key: string | null;
  timeout_ms: number | null;
  schedule_id: string | null;
  schedule_slot: Date | null;
  created_at: Date;
  finished_at: Date | null;
}

/** An errors entry as stored in jsonb: `at` is an ISO-8601 string. */
interface StoredAttemptError {
  attempt: number;
  at: string;
  message: string;
  kind: AttemptError['kind'];
  detail?: string;
}

/** Converts a row to a {@link Job}: the one place snake_case becomes camelCase. */
export function rowToJob(row: JobRow): Job {
  return {
    id: String(row.id),
    kind: row.kind,
    queue: row.queue,
    payload: row.payload,
    priority: row.priority,
    state: row.state,
    runAt: row.run_at,
    leaseUntil: row.lease_until,
    leaseOwner: row.lease_owner,
    token: row.token,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    retryPolicy: row.retry_policy,
    errors: row.errors.map((entry) => {
      const error: AttemptError = {
        attempt: entry.attempt,
        at: new Date(entry.at),
        message: entry.message,
        kind: entry.kind,
      };
      if (entry.detail !== undefined) error.detail = entry.detail;
      return error;
    }),
    idempotencyKey: row.idempotency_key,
    timeoutMs: row.timeout_ms,
    scheduleId: row.schedule_id,
    scheduleSlot: row.schedule_slot,
    createdAt: row.created_at,
    finishedAt: row.finished_at,
  };
}

/**
 * Parses a job id for SQL: a decimal bigint. Anything else cannot name a job, so callers answer
 * not-found/stale instead of letting PostgreSQL raise "invalid input syntax for type bigint".
 */
export function parseJobId(id: string): string | null {
  if (typeof id !== 'string' || !/^[0-9]{1,19}$/.test(id)) return null;
  return BigInt(id) <= 9223372036854775807n ? id : null;
}

function pageSize(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE;
  return Math.max(0, Math.min(MAX_PAGE, Math.floor(limit)));
}

function pinned(now: Date | undefined): Date | null {
  return now ?? null;
}

/** The SQL for one schema, and the code that runs it on any {@link Queryable}. */
export class PostgresJobQueries {
  private readonly jobs: string;
  private readonly dead: string;
  private readonly channel: string;
  private readonly sql: ReturnType<typeof buildSql>;

  constructor(schemaName: string) {
    const s = quoteIdentifier(schemaName);
    this.jobs = `${s}.jobs`;
    this.dead = `${s}.dead_jobs`;
    this.channel = wakeChannel(schemaName);
    this.sql = buildSql(s, this.channel);
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
   */
  async submit(db: Queryable, params: JobSubmitParams, wakeHorizonMs: number): Promise<SubmitResult[]> {
    const jobs = params.jobs;
    if (jobs.length === 0) return [];
    const results: (SubmitResult | undefined)[] = new Array(jobs.length);
    let pending = jobs.map((_, index) => index);
    for (let round = 0; pending.length > 0; round++) {
      if (round >= 5) {
        throw new Error(
          `jobSubmit: an idempotency key kept racing with concurrent writers after ${round} rounds (jobs[${pending[0]}])`,
        );
      }
      const specs = pending.map((index) => jobs[index]!);
      const result = await db.query<SubmitRow>(this.sql.submit, [
        pinned(params.now),
        specs.map((spec) => spec.kind),
        specs.map((spec) => spec.queue),
        specs.map((spec) => spec.payloadJson),
        specs.map((spec) => spec.priority),
        specs.map((spec) => spec.runAt),
        specs.map((spec) => spec.delayMs),
        specs.map((spec) => spec.maxAttempts),
        specs.map((spec) => JSON.stringify(spec.retryPolicy)),
        specs.map((spec) => spec.timeoutMs),
        specs.map((spec) => spec.idempotencyKey),
        specs.map((spec) => spec.scheduleId),
        specs.map((spec) => spec.scheduleSlot),
        wakeHorizonMs,
      ]);
      const missing: number[] = [];
      for (const row of result.rows) {
        const index = pending[Number(row.ord) - 1]!;
        if (row.inserted_id !== null) {
          results[index] = { id: row.inserted_id, created: row.is_first, runAt: row.inserted_run_at! };
        } else if (row.live_id !== null) {
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
   * The one-statement claim: leases up to `limit` claimable jobs (lapsed leases at maxAttempts are
   * parked instead), unless a recurring run is among them, in which case it claims nothing and
   * answers `needsTransaction` (the caller then claims with {@link claimInTransaction}).
   * The store's claim path.
   */
  async claimOrDefer(
    db: Queryable,
    params: JobClaimParams,
  ): Promise<{ jobs: ClaimedJob[]; needsTransaction: boolean }> {
    if (params.limit <= 0) return { jobs: [], needsTransaction: false };
    const result = await db.query<JobRow & { needs_transaction: boolean | null }>(
      this.sql.claim,
      this.claimParams(params),
    );
    const needsTransaction = result.rows[0]?.needs_transaction === true;
    const jobs = result.rows.filter((row) => row.id !== null).map((row) => rowToJob(row) as ClaimedJob);
    return { jobs, needsTransaction };
  }

  /**
   * {@link claimOrDefer} without the flag: one-off jobs only. It claims nothing when a recurring
   * run is among the candidates, so stores call claimOrDefer; this remains for tests of the SQL.
   */
  async claim(db: Queryable, params: JobClaimParams): Promise<ClaimedJob[]> {
    return (await this.claimOrDefer(db, params)).jobs;
  }

  /** The claim inside the caller's transaction, recurring runs included; the caller plans their schedules. */
  async claimInTransaction(db: Queryable, params: JobClaimParams): Promise<ClaimedJob[]> {
    if (params.limit <= 0) return [];
    const result = await db.query<JobRow>(this.sql.claimInTransaction, this.claimParams(params));
    return result.rows.map((row) => rowToJob(row) as ClaimedJob);
  }

  private claimParams(params: JobClaimParams): unknown[] {
    return [
      pinned(params.now),
      params.owner,
      Math.floor(params.limit),
      params.leaseMs,
      params.queues ? [...params.queues] : null,
    ];
  }

  /** Extends each lease still held; null for a stale token or a lease that already lapsed. */
  async heartbeatMany(db: Queryable, params: JobHeartbeatManyParams): Promise<(Date | null)[]> {
    const out: (Date | null)[] = params.leases.map(() => null);
    const valid = params.leases.flatMap((lease, index) => {
      const id = parseJobId(lease.id);
      return id === null ? [] : [{ id, token: lease.token, index }];
    });
    if (valid.length === 0) return out;
    const result = await db.query<{ ord: string; lease_until: Date }>(this.sql.heartbeatMany, [
      pinned(params.now),
      valid.map((lease) => lease.id),
      valid.map((lease) => lease.token),
      params.leaseMs,
    ]);
    for (const row of result.rows) out[valid[Number(row.ord) - 1]!.index] = row.lease_until;
    return out;
  }

  /** Marks each job done whose token is current; `stale` for the rest. */
  async completeMany(db: Queryable, params: JobCompleteManyParams): Promise<CompleteOutcome[]> {
    const out: CompleteOutcome[] = params.leases.map(() => 'stale');
    const valid = params.leases.flatMap((lease, index) => {
      const id = parseJobId(lease.id);
      return id === null ? [] : [{ id, token: lease.token, index }];
    });
    if (valid.length === 0) return out;
    const result = await db.query<{ ord: string }>(this.sql.completeMany, [
      pinned(params.now),
      valid.map((lease) => lease.id),
      valid.map((lease) => lease.token),
    ]);
    for (const row of result.rows) out[valid[Number(row.ord) - 1]!.index] = 'done';
    return out;
  }

  /** Records the attempt's error and applies the caller's decision (retry or park). */
  async fail(db: Queryable, params: JobFailParams): Promise<FailOutcome> {
    const id = parseJobId(params.id);
    if (id === null) return { outcome: 'stale' };
    const errorParams = [params.error.message, params.error.kind, params.error.detail ?? null];
    if (params.decision.kind === 'retry') {
      const result = await db.query<{ run_at: Date }>(this.sql.failRetry, [
        pinned(params.now),
        id,
        params.token,
        ...errorParams,
        params.decision.delayMs,
      ]);
      const row = result.rows[0];
      return row ? { outcome: 'retry', runAt: row.run_at } : { outcome: 'stale' };
    }
    const result = await db.query(this.sql.failPark, [pinned(params.now), id, params.token, ...errorParams]);
    return result.rowCount === 1 ? { outcome: 'parked' } : { outcome: 'stale' };
  }

  /** Gives a lease back: due at once, attempt not counted; wakes listeners. */
  async release(db: Queryable, params: JobReleaseParams): Promise<ReleaseOutcome> {
    const id = parseJobId(params.id);
    if (id === null) return 'stale';
    const result = await db.query<{ released: string }>(this.sql.release, [id, params.token]);
    return Number(result.rows[0]!.released) === 1 ? 'released' : 'stale';
  }

  /** Gives back every lease still held under `owner`; returns how many. */
  async releaseByOwner(db: Queryable, params: JobReleaseByOwnerParams): Promise<number> {
    const result = await db.query<{ released: string }>(this.sql.releaseByOwner, [params.owner]);
    return Number(result.rows[0]!.released);
  }

  /** Cancels a live job. */
  async cancel(db: Queryable, params: JobCancelParams): Promise<CancelOutcome> {
    const id = parseJobId(params.id);
    if (id === null) return 'not_found';
    const result = await db.query<{ cancelled: string; known: boolean }>(this.sql.cancel, [pinned(params.now), id]);
    const row = result.rows[0]!;
    if (Number(row.cancelled) === 1) return 'cancelled';
    return row.known ? 'already_finished' : 'not_found';
  }

  /** One job from either table. */
  async get(db: Queryable, idText: string): Promise<Job | null> {
    const id = parseJobId(idText);
    if (id === null) return null;
    const result = await db.query<JobRow>(this.sql.get, [id]);
    const row = result.rows[0];
    return row ? rowToJob(row) : null;
  }

  /** A page of jobs ordered by id; `dead` in states reads the dead-letter table. */
  async list(db: Queryable, params: JobListParams): Promise<Job[]> {
    const limit = pageSize(params.limit);
    if (limit === 0) return [];
    let afterId: string | null = null;
    if (params.afterId !== undefined) {
      afterId = parseJobId(params.afterId);
      if (afterId === null) return [];
    }
    const result = await db.query<JobRow>(this.sql.list, [
      params.states ? [...params.states] : null,
      params.queue ?? null,
      params.kind ?? null,
      afterId,
      limit,
    ]);
    return result.rows.map(rowToJob);
  }

  /** Deletes done and cancelled records that finished before the cut-off. */
  async pruneFinished(db: Queryable, params: JobPruneParams): Promise<number> {
    const result = await db.query(this.sql.pruneFinished, [params.finishedBefore]);
    return result.rowCount ?? 0;
  }

  /** The earliest instant a live job becomes claimable, never before now; null when none is live. */
  async nextRunAt(db: Queryable, params: NextRunAtParams): Promise<Date | null> {
    const result = await db.query<{ next_run_at: Date | null }>(this.sql.nextRunAt, [
      pinned(params.now),
      params.queues ? [...params.queues] : null,
    ]);
    return result.rows[0]?.next_run_at ?? null;
  }

  /** A page of parked jobs ordered by id. */
  async deadLetterList(db: Queryable, params: DeadLetterListParams): Promise<Job[]> {
    return this.list(db, { ...params, states: ['dead'] });
  }

  /** Moves a parked job back to pending, due now, with fresh attempts; wakes listeners. */
  async deadLetterRetry(db: Queryable, params: DeadLetterRetryParams): Promise<Job | null> {
    const id = parseJobId(params.id);
    if (id === null) return null;
    const result = await db.query<JobRow>(this.sql.deadLetterRetry, [pinned(params.now), id]);
    const row = result.rows[0];
    return row ? rowToJob(row) : null;
  }

  /** Deletes parked jobs by id and/or by park time. */
  async deadLetterPurge(db: Queryable, params: DeadLetterPurgeParams): Promise<number> {
    const ids = params.ids?.flatMap((id) => parseJobId(id) ?? []) ?? null;
    const hasIds = ids !== null && ids.length > 0;
    if (!hasIds && params.parkedBefore === undefined) return 0;
    const result = await db.query(this.sql.deadLetterPurge, [hasIds ? ids : null, params.parkedBefore ?? null]);
    return result.rowCount ?? 0;
  }

  /** Counts by queue and state. */
  async queueStats(db: Queryable, now: Date | undefined): Promise<QueueStats[]> {
    const result = await db.query<
      Record<keyof Omit<QueueStats, 'queue' | 'paused'>, string> & { queue: string; paused: boolean }
    >(this.sql.queueStats, [pinned(now)]);
    return result.rows.map((row) => {
      const stats: QueueStats = {
        queue: row.queue,
        scheduled: Number(row.scheduled),
        available: Number(row.available),
        running: Number(row.running),
        done: Number(row.done),
        cancelled: Number(row.cancelled),
        dead: Number(row.dead),
      };
      if (row.paused) stats.paused = true;
      return stats;
    });
  }

  /** The SQL of the claim, for EXPLAIN in tests (parameters as {@link claim} passes them). */
  get claimSql(): string {
    return this.sql.claim;
  }

  /** The SQL of the in-transaction claim, for EXPLAIN in tests (same parameters). */
  get claimInTransactionSql(): string {
    return this.sql.claimInTransaction;
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
  live_id: string | null;
  live_run_at: Date | null;
}

/** `j.<column>` for every job column, comma-separated. */
function columnsOf(alias: string): string {
  return JOB_COLUMNS.map((column) => `${alias}.${column}`).join(', ');
}

/** The errors entry an attempt leaves: `{attempt, at, message, kind, detail?}` with `at` by the database clock. */
function errorEntry(attempt: string, message: string, kind: string, detail: string): string {
  return `jsonb_strip_nulls(jsonb_build_object('attempt', ${attempt}, 'at', ${NOW}, 'message', ${message}, 'kind', ${kind}, 'detail', ${detail}))`;
}

/** Epoch milliseconds of a timestamptz, as text: the tiny NOTIFY payload. */
function epochMsText(expression: string): string {
  return `floor(extract(epoch FROM ${expression}) * 1000)::bigint::text`;
}

/**
 * Distinct (queue, priority) pairs among pending jobs, found by a loose index scan on
 * jobs_pending_claim_idx: each step is one index probe for the next pair, so the cost is the
 * number of pairs, not the number of rows. `queues` is the text[] parameter (NULL = all queues).
 */
function pendingPairsCte(jobs: string, queues: string): string {
  return `pairs(queue, priority) AS (
      (SELECT j.queue, j.priority FROM ${jobs} j
        WHERE j.state = 'pending' AND (${queues}::text[] IS NULL OR j.queue = ANY(${queues}::text[]))
        ORDER BY j.queue, j.priority LIMIT 1)
      UNION ALL
      SELECT n.queue, n.priority FROM pairs p CROSS JOIN LATERAL (
        SELECT j.queue, j.priority FROM ${jobs} j
        WHERE j.state = 'pending' AND (j.queue, j.priority) > (p.queue, p.priority)
          AND (${queues}::text[] IS NULL OR j.queue = ANY(${queues}::text[]))
        ORDER BY j.queue, j.priority LIMIT 1) n
    )`;
}

/** The INSERT that parks rows from `source` into dead_jobs with `errors` as their errors array. */
function parkInsert(dead: string, source: string, errors: string): string {
  return `INSERT INTO ${dead} (${JOB_COLUMNS.join(', ')}, parked_at)
      SELECT m.id, m.kind, m.queue, m.payload, m.priority, 'dead', m.run_at, NULL, m.lease_owner, m.token,
             m.attempts, m.max_attempts, m.retry_policy, ${errors}, m.idempotency_key, m.timeout_ms,
             m.schedule_id, m.schedule_slot, m.created_at, ${NOW}, ${NOW}
      FROM ${source} m`;
}

function buildSql(s: string, channel: string) {
  const jobs = `${s}.jobs`;
  const dead = `${s}.dead_jobs`;
  const live = `('pending', 'running')`;
  const ms = (param: string) => `(${param}::double precision * interval '1 millisecond')`;
  const channelLiteral = `'${channel.replace(/'/g, "''")}'`;
  const queues = `${s}.queues`;
  /** True unless `queue` (an SQL expression) is paused: one probe of the tiny queues table. */
  const notPaused = (queue: string) => `NOT EXISTS (SELECT 1 FROM ${queues} pq WHERE pq.name = ${queue} AND pq.paused)`;

  /** The claim statement; `fast` refuses (claims nothing) when a recurring run is among the chosen. */
  function claimStatement(mode: 'fast' | 'transaction'): string {
    const result =
      mode === 'fast'
        ? `SELECT cl.*, b.needs_transaction
      FROM (SELECT EXISTS (SELECT 1 FROM scheduled) AS needs_transaction) b LEFT JOIN claimed cl ON true
      ORDER BY cl.priority, cl.run_at, cl.id`
        : 'SELECT * FROM claimed ORDER BY priority, run_at, id';
    return `
      WITH RECURSIVE ${pendingPairsCte(jobs, '$5')},
      due AS (
        SELECT c.id, c.priority, c.run_at, c.schedule_id, false AS lapsed
        FROM pairs p CROSS JOIN LATERAL (
          SELECT j.id, j.priority, j.run_at, j.schedule_id FROM ${jobs} j
          WHERE j.state = 'pending' AND j.queue = p.queue AND j.priority = p.priority
            AND j.run_at <= ${NOW}
          ORDER BY j.run_at, j.id
          LIMIT $3
          FOR UPDATE SKIP LOCKED
        ) c
        WHERE ${notPaused('p.queue')}
      ),
      lapsed AS (
        SELECT j.id, j.priority, j.run_at, j.schedule_id, true AS lapsed FROM ${jobs} j
        WHERE j.state = 'running' AND j.lease_until <= ${NOW} AND j.attempts < j.max_attempts
          AND ($5::text[] IS NULL OR j.queue = ANY($5::text[])) AND ${notPaused('j.queue')}
        ORDER BY j.priority, j.run_at, j.id
        LIMIT $3
        FOR UPDATE SKIP LOCKED
      ),
      chosen AS (
        SELECT * FROM (SELECT * FROM due UNION ALL SELECT * FROM lapsed) candidates
        ORDER BY priority, run_at, id LIMIT $3
      ),
      scheduled AS (SELECT 1 FROM chosen WHERE schedule_id IS NOT NULL LIMIT 1),
      exhausted AS (
        DELETE FROM ${jobs} j
        WHERE j.id IN (
          SELECT x.id FROM ${jobs} x
          WHERE x.state = 'running' AND x.lease_until <= ${NOW} AND x.attempts >= x.max_attempts
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
          )})`,
        )}
        RETURNING id
      ),
      claimed AS (
        UPDATE ${jobs} j
        SET state = 'running',
            lease_until = ${NOW} + ${ms('$4')},
            lease_owner = $2,
            token = j.token + 1,
            attempts = j.attempts + 1,
            errors = CASE WHEN c.lapsed
                          THEN j.errors || jsonb_build_array(${errorEntry('j.attempts', `'${LEASE_EXPIRED_MESSAGE}'`, `'lease_expired'`, 'NULL::text')})
                          ELSE j.errors END
        FROM chosen c
        WHERE j.id = c.id${mode === 'fast' ? ' AND NOT EXISTS (SELECT 1 FROM scheduled)' : ''}
        RETURNING ${columnsOf('j')}
      )
      ${result}`;
  }

  return {
    /**
     * submit: writes a batch of jobs in one statement.
     * Params: $1 now?, $2 kind[], $3 queue[], $4 payload json text[], $5 priority[], $6 run_at[]
     *   (NULL = now + delay), $7 delay_ms[], $8 max_attempts[], $9 retry_policy json text[],
     *   $10 timeout_ms[], $11 idempotency_key[], $12 schedule_id[], $13 schedule_slot[],
     *   $14 wake horizon ms.
     * Result: one row per input, in input order: ord, is_first (not a repeat of an earlier key in
     *   the batch), inserted_id/inserted_run_at when written, live_id/live_run_at when the key
     *   matched a live job; all four NULL when that job committed after this statement's snapshot.
     * Ids are drawn from the sequence up front so each returned id maps to its input row without
     * relying on RETURNING order. A key already held by a live job writes nothing (ON CONFLICT on
     * the live-only unique index, which also waits out a concurrent insert of the same key).
     * Wake-up: at most one NOTIFY per statement (commits of notifying transactions serialise on a
     * global lock, so one per row would cap submits near 1,000/s), and only when some new job is
     * due within the horizon; the payload is the earliest run_at in epoch ms.
     */
    submit: `
      WITH input AS MATERIALIZED (
        SELECT i.*,
               CASE WHEN i.idempotency_key IS NULL THEN i.ord
                    ELSE min(i.ord) OVER (PARTITION BY i.idempotency_key) END AS first_ord
        FROM unnest($2::text[], $3::text[], $4::text[], $5::int[], $6::timestamptz[], $7::bigint[],
                    $8::int[], $9::text[], $10::int[], $11::text[], $12::text[], $13::timestamptz[])
          WITH ORDINALITY AS i(kind, queue, payload, priority, run_at, delay_ms, max_attempts, retry_policy,
                               timeout_ms, idempotency_key, schedule_id, schedule_slot, ord)
      ),
      fresh AS MATERIALIZED (
        SELECT input.*, nextval('${s}.jobs_id_seq') AS new_id FROM input WHERE ord = first_ord ORDER BY ord
      ),
      inserted AS (
        INSERT INTO ${jobs} (id, kind, queue, payload, priority, state, run_at, token, attempts, max_attempts,
                             retry_policy, errors, idempotency_key, timeout_ms, schedule_id, schedule_slot, created_at)
        SELECT f.new_id, f.kind, f.queue, f.payload::jsonb, f.priority, 'pending',
               coalesce(f.run_at, ${NOW} + ${ms('f.delay_ms')}), 0, 0, f.max_attempts,
               f.retry_policy::jsonb, '[]'::jsonb, f.idempotency_key, f.timeout_ms, f.schedule_id, f.schedule_slot,
               ${NOW}
        FROM fresh f ORDER BY f.ord
        ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL AND state IN ${live} DO NOTHING
        RETURNING id, run_at
      ),
      wake AS (
        SELECT pg_notify(${channelLiteral}, ${epochMsText('min(run_at)')}) FROM inserted
        HAVING min(run_at) <= ${NOW} + ${ms('$14')}
      )
      SELECT i.ord, i.ord = i.first_ord AS is_first,
             ins.id AS inserted_id, ins.run_at AS inserted_run_at,
             l.id AS live_id, l.run_at AS live_run_at,
             (SELECT count(*) FROM wake) AS woke
      FROM input i
      LEFT JOIN fresh f ON f.ord = i.first_ord
      LEFT JOIN inserted ins ON ins.id = f.new_id
      LEFT JOIN LATERAL (
        SELECT j.id, j.run_at FROM ${jobs} j
        WHERE ins.id IS NULL AND i.idempotency_key IS NOT NULL
          AND j.idempotency_key = i.idempotency_key AND j.state IN ${live}
        LIMIT 1
      ) l ON true
      ORDER BY i.ord`,

    /**
     * claim: leases up to $3 claimable jobs in one statement; no lock outlives it.
     * Params: $1 now?, $2 owner, $3 limit, $4 lease ms, $5 queues text[] (NULL = all).
     * Result: the claimed rows after the update (state running, new token and attempts), ordered
     *   by priority, run_at, id, each with `needs_transaction` false; or, when a chosen candidate
     *   is a recurring run, no claim at all and one all-NULL row with `needs_transaction` true.
     * Plan: (1) loose index scan for the distinct (queue, priority) pairs of pending jobs, less
     * the paused queues (filtered per pair, so a paused queue's backlog is never walked);
     * (2) per pair, a bounded range scan `run_at <= now` in (run_at, id) order on the same index,
     * LIMIT $3, FOR UPDATE SKIP LOCKED, so future-dated rows are never read and rows another
     * claimer holds are skipped, not waited on; (3) lapsed leases from the small running index
     * (`lease_until <= now`); (4) the best $3 of those candidates by (priority, run_at, id).
     * A lapsed candidate gets a lease_expired errors entry. Lapsed jobs whose attempts already
     * reached max_attempts (all of them, up to MAX_PARKED_PER_CLAIM per claim, whatever $3) are
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
     * heartbeatMany: extends each lease that is still ours and still live.
     * Params: $1 now?, $2 ids bigint[], $3 tokens int[], $4 lease ms.
     * Result: ord (1-based input position) and the new lease_until for each extended lease only.
     */
    heartbeatMany: `
      UPDATE ${jobs} j SET lease_until = ${NOW} + ${ms('$4')}
      FROM unnest($2::bigint[], $3::int[]) WITH ORDINALITY AS l(id, token, ord)
      WHERE j.id = l.id AND j.token = l.token AND j.state = 'running' AND j.lease_until > ${NOW}
      RETURNING l.ord, j.lease_until`,

    /**
     * completeMany: marks jobs done, each fenced by its own token.
     * Params: $1 now?, $2 ids bigint[], $3 tokens int[].
     * Result: ord (1-based input position) of each accepted completion.
     */
    completeMany: `
      UPDATE ${jobs} j SET state = 'done', finished_at = ${NOW}, lease_until = NULL
      FROM unnest($2::bigint[], $3::int[]) WITH ORDINALITY AS l(id, token, ord)
      WHERE j.id = l.id AND j.token = l.token AND j.state = 'running'
      RETURNING l.ord`,

    /**
     * failRetry: records the error and reschedules the job at now + delay.
     * Params: $1 now?, $2 id, $3 token, $4 message, $5 kind, $6 detail?, $7 delay ms.
     * Result: the new run_at, or no row when the token is stale or the job is not running.
     */
    failRetry: `
      UPDATE ${jobs} j
      SET state = 'pending', run_at = ${NOW} + ${ms('$7')}, lease_until = NULL,
          errors = j.errors || jsonb_build_array(${errorEntry('j.attempts', '$4::text', '$5::text', '$6::text')})
      WHERE j.id = $2 AND j.token = $3 AND j.state = 'running'
      RETURNING j.run_at`,

    /**
     * failPark: records the error and moves the job to dead_jobs.
     * Params: $1 now?, $2 id, $3 token, $4 message, $5 kind, $6 detail?.
     * Result: the parked id, or no row when the token is stale or the job is not running.
     */
    failPark: `
      WITH moved AS (
        DELETE FROM ${jobs} j WHERE j.id = $2 AND j.token = $3 AND j.state = 'running' RETURNING j.*
      )
      ${parkInsert(dead, 'moved', `m.errors || jsonb_build_array(${errorEntry('m.attempts', '$4::text', '$5::text', '$6::text')})`)}
      RETURNING id`,

    /**
     * release: gives a lease back; the job is pending and due at once (run_at is already past),
     * its attempt uncounted. Wakes listeners so another worker picks it up without a poll.
     * Params: $1 id, $2 token (no time: release does not move run_at).
     * Result: released = 1 when it was ours, else 0.
     */
    release: `
      WITH released AS (
        UPDATE ${jobs} j SET state = 'pending', lease_until = NULL, attempts = greatest(j.attempts - 1, 0)
        WHERE j.id = $1 AND j.token = $2 AND j.state = 'running'
        RETURNING j.run_at
      ),
      wake AS (
        SELECT pg_notify(${channelLiteral}, ${epochMsText('min(run_at)')}) FROM released HAVING count(*) > 0
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
        RETURNING j.run_at
      ),
      wake AS (
        SELECT pg_notify(${channelLiteral}, ${epochMsText('min(run_at)')}) FROM released HAVING count(*) > 0
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
     * list: a keyset page of jobs ordered by id; 'dead' in the states reads dead_jobs.
     * Params: $1 states text[] (NULL = all), $2 queue?, $3 kind?, $4 after id?, $5 limit.
     * Result: up to $5 job rows, ids ascending.
     */
    list: `
      SELECT * FROM (
        (SELECT ${JOB_COLUMNS.join(', ')} FROM ${jobs}
          WHERE ($1::text[] IS NULL OR state = ANY($1::text[]))
            AND ($2::text IS NULL OR queue = $2) AND ($3::text IS NULL OR kind = $3)
            AND ($4::bigint IS NULL OR id > $4)
          ORDER BY id LIMIT $5)
        UNION ALL
        (SELECT ${JOB_COLUMNS.join(', ')} FROM ${dead}
          WHERE ($1::text[] IS NULL OR 'dead' = ANY($1::text[]))
            AND ($2::text IS NULL OR queue = $2) AND ($3::text IS NULL OR kind = $3)
            AND ($4::bigint IS NULL OR id > $4)
          ORDER BY id LIMIT $5)
      ) page ORDER BY id LIMIT $5`,

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
     * Params: $1 now?, $2 queues text[] (NULL = all).
     * Result: next_run_at, NULL when no live job exists. Index lookups only: one probe per
     *   (queue, priority) pair for pending jobs (loose scan), and the head of the running index.
     */
    nextRunAt: `
      WITH RECURSIVE ${pendingPairsCte(jobs, '$2')},
      earliest AS MATERIALIZED (
        SELECT least(
          (SELECT min(e.run_at) FROM pairs p CROSS JOIN LATERAL (
             SELECT j.run_at FROM ${jobs} j
             WHERE j.state = 'pending' AND j.queue = p.queue AND j.priority = p.priority
             ORDER BY j.run_at LIMIT 1) e
           WHERE ${notPaused('p.queue')}),
          (SELECT min(j.lease_until) FROM ${jobs} j
             WHERE j.state = 'running' AND ($2::text[] IS NULL OR j.queue = ANY($2::text[]))
               AND ${notPaused('j.queue')})
        ) AS at
      )
      SELECT CASE WHEN at IS NULL THEN NULL ELSE greatest(at, ${NOW}) END AS next_run_at FROM earliest`,

    /**
     * deadLetterRetry: moves a parked job back to jobs as pending, due now, attempts 0; id,
     * token and errors kept. Its idempotency key is dropped if a live job took it meanwhile
     * (the unique index would otherwise refuse the move); likewise a recurring run drops its
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
                                 WHERE o.idempotency_key = m.idempotency_key AND o.state IN ${live})
                    THEN NULL ELSE m.idempotency_key END,
               m.timeout_ms, m.schedule_id,
               CASE WHEN EXISTS (SELECT 1 FROM ${jobs} o
                                 WHERE o.schedule_id = m.schedule_id AND o.schedule_slot = m.schedule_slot)
                    THEN NULL ELSE m.schedule_slot END,
               m.created_at, NULL
        FROM moved m
        RETURNING ${JOB_COLUMNS.join(', ')}
      ),
      wake AS (
        SELECT pg_notify(${channelLiteral}, ${epochMsText('min(run_at)')}) FROM revived HAVING count(*) > 0
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
