/**
 * The SQLite store's job SQL (the claim's is in claim-queries.ts, schedules' and workers' in
 * their own files), each statement headed by its purpose, parameters and result, and by how it
 * differs from its PostgreSQL twin; and {@link SqliteJobQueries}, which runs them.
 *
 * Conventions: instants are INTEGER epoch milliseconds; `:now` is the transaction's instant,
 * read once per transaction by {@link DATABASE_NOW} after the write lock is held (or pinned by the
 * caller), so every comparison in one transaction sees the same time. PostgreSQL's twin writes
 * `coalesce($now, now())` inline instead; `now()` there is also fixed for the transaction.
 * Writes run inside `BEGIN IMMEDIATE` (SqliteStore does that), which makes each transaction
 * serial: SQLite has one writer per file, so there is no SKIP LOCKED and none is needed.
 */

import type Database from 'better-sqlite3';
import { LATEST_RUN_AT_MS } from '../../job/instant.js';
import type { JobSpec } from '../../job/job-spec.js';
import { liveKeyConflict, sameJsonText } from '../idempotency.js';
import type {
  CancelOutcome,
  CompleteOutcome,
  DueKindCount,
  FailOutcome,
  JobFailParams,
  JobLease,
  KindFilter,
  NextRunAtParams,
  QueueStats,
  SubmitResult,
} from '../store.js';
import { parseJobId, type QueueCountsRow, queueStatsOf } from '../store-params.js';
import type { WakeUpGroup } from '../wake-up.js';
import { attemptErrorJson, type JobRow } from './job-row.js';

/** Live states: the jobs a claim may hand out once due. Spelt out in SQL so partial indexes match. */
const LIVE = `state IN ('pending', 'running')`;

/** True unless the row's queue is paused (a probe of the tiny queues table). */
export const NOT_PAUSED = `queue NOT IN (SELECT name FROM queues WHERE paused = 1)`;

/** Columns both tables share, in one order, for moving rows between them. */
const COMMON_COLUMNS = `id, kind, queue, payload, priority, run_at, lease_owner, token, attempts, max_attempts,
  retry_policy, idempotency_key, timeout_ms, schedule_id, schedule_slot, created_at, started_at`;

/**
 * The error entry :entry (JSON from attemptErrorJson) completed with the attempt's claim, read
 * from the row it ended: its started_at and lease_owner (as the PostgreSQL twin's errorEntry).
 */
const ENTRY_WITH_CLAIM = `json_set(json(:entry), '$.startedAt', started_at, '$.owner', lease_owner)`;

/**
 * The database clock.
 * Parameters: none. Result: one INTEGER, epoch milliseconds.
 * PostgreSQL: `now()`; here the host clock that every process on the file shares.
 */
export const DATABASE_NOW = `SELECT CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)`;

/**
 * True when the row's kind passes a claim's kind filter: :kinds is a JSON array or NULL (every
 * kind; an empty array matches nothing), :exclude_kinds a JSON array (empty excludes nothing).
 */
export const KIND_ALLOWED = `(:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
    AND kind NOT IN (SELECT value FROM json_each(:exclude_kinds))`;

/**
 * Finds the live job holding an idempotency key in one (queue, kind) scope (submit answers it,
 * or refuses the submit when the payloads differ, instead of inserting).
 * Parameters: :queue, :kind, :key. Result: { id, run_at, payload } of the live holder, or nothing.
 * PostgreSQL: a unique partial index on (queue, kind, key) plus ON CONFLICT does this in the
 * insert and compares payloads as jsonb; here the IMMEDIATE transaction already serialises
 * submits, so a lookup before the insert is race-free, and the payload texts are compared as
 * JSON in TypeScript (src/store/idempotency.ts). A probe of jobs_idempotency_scope.
 */
export const JOB_FIND_LIVE_BY_KEY = `
  SELECT id, run_at, payload FROM jobs
  WHERE queue = :queue AND kind = :kind AND idempotency_key = :key AND ${LIVE}
  ORDER BY id LIMIT 1`;

/**
 * Inserts one submitted job as pending.
 * Parameters: the spec's columns, :run_at (absolute, already resolved), :now (created_at).
 * Result: { id, run_at }.
 * PostgreSQL: one multi-row INSERT … SELECT FROM unnest(...) for the batch; here one prepared
 * statement per job inside one transaction, which costs microseconds in-process.
 */
export const JOB_INSERT = `
  INSERT INTO jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy,
    idempotency_key, timeout_ms, schedule_id, schedule_slot, created_at)
  VALUES (:kind, :queue, :payload, :priority, 'pending', :run_at, :max_attempts, :retry_policy,
    :idempotency_key, :timeout_ms, :schedule_id, :schedule_slot, :now)
  RETURNING id, run_at`;

/**
 * How many pending jobs of one (queue, kind, priority) are due: an index-only count over the
 * range (queue = ?, kind = ?, priority = ?, run_at <= now), never the future-dated entries.
 * Parameters: :queue, :kind, :priority, :now. Result: one integer.
 * PostgreSQL: one GROUP BY pass instead (its planner may answer a per-triple count with a table
 * scan); SQLite always takes this covering range, so only due entries are read.
 */
export const JOB_DUE_PENDING_COUNT = `
  SELECT count(*) FROM jobs
  WHERE state = 'pending' AND queue = :queue AND kind = :kind AND priority = :priority AND run_at <= :now`;

/**
 * JOB_DUE_PENDING_COUNT reading at most :cap entries of the range (the dashboard's bounded form).
 * Parameters: as JOB_DUE_PENDING_COUNT, plus :cap. Result: one integer, at most :cap.
 * PostgreSQL: the same LIMITed count per triple, in one statement (boundedDueCounts).
 */
export const JOB_DUE_PENDING_CAPPED_COUNT = `
  SELECT count(*) FROM (SELECT 1 FROM jobs
    WHERE state = 'pending' AND queue = :queue AND kind = :kind AND priority = :priority AND run_at <= :now
    LIMIT :cap)`;

/**
 * Running jobs whose lease lapsed (available again), counted by queue and kind, paused queues
 * left out: the lapsed half of jobDueCountsByKind. A range scan on jobs_running_lease.
 * Parameters: :now. Result: { queue, kind, count }.
 * PostgreSQL: the same GROUP BY, inside one dueCountsByKind statement.
 */
export const JOB_LAPSED_COUNTS = `
  SELECT queue, kind, count(*) AS count FROM jobs INDEXED BY jobs_running_lease
  WHERE state = 'running' AND lease_until <= :now AND ${NOT_PAUSED}
  GROUP BY queue, kind`;

/**
 * Copies a job into the dead-letter table with one more error entry (moving it: JOB_DELETE
 * follows in the same transaction).
 * Parameters: :id, :now (finished_at and parked_at), :entry (one JSON error object).
 * Result: changes = 1 when the job existed.
 * PostgreSQL: one statement, `WITH moved AS (DELETE … RETURNING *) INSERT INTO dead_jobs …`.
 */
export const JOB_PARK = `
  INSERT INTO dead_jobs (${COMMON_COLUMNS}, state, lease_until, errors, finished_at, parked_at)
  SELECT ${COMMON_COLUMNS}, 'dead', NULL, json_insert(errors, '$[#]', ${ENTRY_WITH_CLAIM}), :now, :now
  FROM jobs WHERE id = :id`;

/**
 * Deletes one job by id (the second half of a move between tables).
 * Parameters: :id. Result: changes.
 */
export const JOB_DELETE = `DELETE FROM jobs WHERE id = :id`;

/**
 * The owner half of every fence: :owner NULL (a caller fencing by token alone) or the claim's own
 * lease owner. With the token it makes a write unrepeatable: a store restored without its last
 * commits can re-issue a token number, never the random owner of a claim it did not see.
 */
const OWNER_MATCHES = `(:owner IS NULL OR lease_owner = :owner)`;

/**
 * Extends a live lease. Fenced: the token and owner must be current, the job running and its
 * lease not yet lapsed (a lapsed lease may already be promised to the next claimer).
 * Parameters: :id, :token, :owner, :now, :lease_until. Result: { lease_until } or nothing when stale.
 * PostgreSQL: the same fence, batched over unnest(ids, tokens, owners) in heartbeatMany, with the new
 * lease computed in SQL (now() + interval).
 */
export const JOB_HEARTBEAT = `
  UPDATE jobs SET lease_until = :lease_until
  WHERE id = :id AND token = :token AND ${OWNER_MATCHES} AND state = 'running' AND lease_until > :now
  RETURNING lease_until`;

/**
 * Accepts a completion. Fenced by token, owner and state only: a lapsed lease that nobody
 * re-claimed still completes, exactly as in the reference model of docs/design.md.
 * Parameters: :id, :token, :owner, :now. Result: changes = 1 when done, 0 when stale.
 * PostgreSQL: the same fence, batched over unnest(ids, tokens, owners) in completeMany.
 */
export const JOB_COMPLETE = `
  UPDATE jobs SET state = 'done', finished_at = :now, lease_until = NULL
  WHERE id = :id AND token = :token AND ${OWNER_MATCHES} AND state = 'running'`;

/**
 * JOB_COMPLETE for the leases of one owner in one statement: each lease's row found by its id
 * (NOT INDEXED keeps the planner on the rowid, one seek per lease; without it SQLite drove the
 * join from the dashboard's (state, queue, id) index of migration 4 and read every running row
 * per lease, 16x slower than completing row by row, and could do so again from any index
 * a later migration adds over running rows) and fenced as JOB_COMPLETE fences it. One statement instead of one per
 * job saves the per-statement binding, stepping and reset, about a fifth of a completion's cost;
 * the owner, the same for every job of a claim, is bound once rather than repeated in each
 * element (a batch spans one or two claims).
 * Parameters: :leases (JSON array of [id, token]), :owner (NULL = fenced by the token alone), :now.
 * Result: changes = the leases completed now; a batch with fewer changes than leases is resolved
 * lease by lease with JOB_DONE_WITH_TOKEN (a lost reply's retry, a duplicate id or a stale lease).
 * PostgreSQL: the same fence over unnest(ids, tokens, owners) in completeMany.
 */
export const JOB_COMPLETE_MANY = `
  UPDATE jobs NOT INDEXED SET state = 'done', finished_at = :now, lease_until = NULL
  FROM (SELECT value ->> 0 AS id, value ->> 1 AS token FROM json_each(:leases)) AS held
  WHERE jobs.id = held.id AND jobs.token = held.token AND ${OWNER_MATCHES} AND jobs.state = 'running'`;

/**
 * JOB_COMPLETE_MANY for retention 0: each held job's row is deleted instead of becoming a done
 * record, fenced the same way. The (id, token) row value is found by rowid, one seek per lease.
 * Parameters: :leases, :owner as JOB_COMPLETE_MANY. Result: the deleted rows' id and token (a
 * deleted row keeps nothing to tell afterwards which leases were accepted). PostgreSQL: completeDeleteMany.
 */
export const JOB_COMPLETE_DELETE_MANY = `
  DELETE FROM jobs NOT INDEXED
  WHERE (id, token) IN (SELECT value ->> 0, value ->> 1 FROM json_each(:leases))
    AND ${OWNER_MATCHES} AND state = 'running'
  RETURNING id, token`;

/**
 * Tells a repeated completion from a refused one: the job is already done under this very token
 * and owner, so an earlier completion of the same claim committed (its reply was lost). Read only
 * after JOB_COMPLETE changed nothing, inside the same write transaction.
 * Parameters: :id, :token, :owner. Result: a row when the completion was already accepted, else nothing.
 * PostgreSQL: the same read, batched for a whole completion batch (transaction-queries.ts).
 */
export const JOB_DONE_WITH_TOKEN = `
  SELECT 1 FROM jobs WHERE id = :id AND token = :token AND ${OWNER_MATCHES} AND state = 'done'`;

/**
 * Reads the fenced row a failure applies to.
 * Parameters: :id, :token, :owner. Result: { attempts } or nothing when stale.
 * PostgreSQL: the twin folds this into the UPDATE with a CTE.
 */
export const JOB_FIND_HELD = `
  SELECT attempts FROM jobs WHERE id = :id AND token = :token AND ${OWNER_MATCHES} AND state = 'running'`;

/**
 * Applies a retry decision: pending again at :run_at, lease cleared, the attempt's error appended.
 * Parameters: :id, :run_at, :entry (one JSON error object). Result: changes.
 * PostgreSQL: failRetry fences and updates in one statement, computing run_at (now + delay)
 * and the errors entry (`errors || jsonb_build_array(…)`) in SQL.
 */
export const JOB_RETRY = `
  UPDATE jobs SET state = 'pending', run_at = :run_at, lease_until = NULL,
    errors = json_insert(errors, '$[#]', ${ENTRY_WITH_CLAIM})
  WHERE id = :id AND state = 'running'`;

/**
 * Gives a lease back: pending, due at once, lease cleared, the attempt not counted. Fenced.
 * run_at is kept (it was due to be claimed, so it is already at or before now): the job keeps
 * its place in claim order instead of queueing behind jobs that were due after it.
 * Parameters: :id, :token, :owner, :now. Result: changes = 1 when released, 0 when stale.
 * PostgreSQL: release leaves run_at as it is (a running job's run_at is already at or before
 * now), floors attempts at 0 and sends its NOTIFY in the same statement.
 */
export const JOB_RELEASE = `
  UPDATE jobs SET state = 'pending', run_at = MIN(run_at, :now), lease_until = NULL, attempts = attempts - 1
  WHERE id = :id AND token = :token AND ${OWNER_MATCHES} AND state = 'running'`;

/**
 * Gives back every lease still held under one claim's owner, like JOB_RELEASE.
 * Parameters: :owner, :now. Result: changes = how many; RETURNING run_at for the wake-up.
 * PostgreSQL: releaseByOwner, with release's differences (run_at kept, attempts floored at 0,
 * NOTIFY in the statement).
 */
export const JOB_RELEASE_BY_OWNER = `
  UPDATE jobs SET state = 'pending', run_at = MIN(run_at, :now), lease_until = NULL, attempts = attempts - 1
  WHERE state = 'running' AND lease_owner = :owner
  RETURNING run_at`;

/**
 * Cancels a live job. The token is left alone, so a worker holding it is refused (stale) on its
 * next heartbeat or completion.
 * Parameters: :id, :now. Result: changes = 1 when cancelled.
 * PostgreSQL: the same UPDATE, with the "does the id exist at all" check in the same statement.
 */
export const JOB_CANCEL = `
  UPDATE jobs SET state = 'cancelled', finished_at = :now, lease_until = NULL
  WHERE id = :id AND ${LIVE}`;

/**
 * One job by id from the jobs table. Parameters: :id. Result: the row or nothing.
 */
export const JOB_GET = `SELECT * FROM jobs WHERE id = :id`;

/**
 * One parked job by id. Parameters: :id. Result: the row or nothing.
 */
export const DEAD_GET = `SELECT * FROM dead_jobs WHERE id = :id`;

/**
 * Deletes up to :limit finished (done, cancelled) records that finished before :before; called
 * in batches so one prune never holds the file's write lock for long.
 * Parameters: :before, :limit. Result: changes.
 * PostgreSQL: one DELETE of every such record, unbatched (its row locks hold up no claim of
 * other rows, unlike SQLite's file-wide write lock).
 */
// Like the claim's lapsed-lease reads (claim-queries.ts), these name their index: without
// statistics SQLite could seek `state` in another index (the dashboard's (state, queue, id) index
// did, until migration 5; its per-state (queue, id) indexes could too) and walk every finished
// (or running) row, where jobs_finished reads only the old ones and jobs_running_lease
// hands out the earliest lease end first.
export const JOB_PRUNE_BATCH = `
  DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs INDEXED BY jobs_finished
    WHERE state IN ('done', 'cancelled') AND finished_at < :before
    LIMIT :limit)`;

/**
 * The jobs id sequence's high-water mark: AUTOINCREMENT's sqlite_sequence row, moved by every
 * insert of a new job (a submit, a recurring run) and never by updates, deletes or a dead letter
 * sent back under its old id; the foreign-submit watcher reads it after another connection committed.
 * Parameters: none. Result: one integer, or nothing before the first insert.
 * PostgreSQL: not needed; a submit there sends NOTIFY.
 */
export const JOB_ID_HIGH_WATER = `SELECT seq FROM sqlite_sequence WHERE name = 'jobs'`;

/**
 * The earliest run time of each queue and kind among pending jobs inserted in an id range: a rowid
 * range scan over the newly inserted rows only.
 * Parameters: :after, :upto (after < id <= upto). Result: rows { queue, kind, run_at }, none when
 * nothing there is pending.
 * PostgreSQL: not needed; NOTIFY carries the run time, queue and kind.
 */
export const JOB_PENDING_GROUPS_BETWEEN = `
  SELECT queue, kind, min(run_at) AS run_at FROM jobs
  WHERE id > :after AND id <= :upto AND state = 'pending'
  GROUP BY queue, kind`;

/**
 * The earliest pending run time in one (queue, kind, priority): one seek to the head of its range.
 * Parameters: :queue, :kind, :priority. Result: { run_at } or nothing.
 */
export const JOB_FIRST_PENDING_RUN_AT = `
  SELECT run_at FROM jobs
  WHERE state = 'pending' AND queue = :queue AND kind = :kind AND priority = :priority
  ORDER BY run_at LIMIT 1`;

/**
 * The earliest lease end among running jobs of the kinds asked for (when a lapsed lease makes a
 * job due again), paused queues left out (their jobs must not wake a worker that cannot claim them).
 * Parameters: :queues (JSON array or NULL for all), :kinds (JSON array or NULL), :exclude_kinds
 * (JSON array). Result: { lease_until } or nothing.
 */
export const JOB_NEXT_LEASE_END = `
  SELECT lease_until FROM jobs INDEXED BY jobs_running_lease
  WHERE state = 'running' AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
    AND ${NOT_PAUSED} AND ${KIND_ALLOWED}
  ORDER BY lease_until LIMIT 1`;

/**
 * Moves a parked job back into jobs: pending, due now, attempts 0; id, token and errors kept.
 * Its idempotency key is dropped when a live job of the same queue and kind took the key meanwhile (the unique index would
 * refuse the move otherwise), and a recurring run drops its schedule_slot (keeping schedule_id)
 * when another job holds that (schedule, slot), exactly as in the PostgreSQL twin.
 * Parameters: :id, :now. Result: changes = 1 when the job was parked (DEAD_DELETE follows).
 * PostgreSQL: one statement with a DELETE … RETURNING CTE.
 */
export const DEAD_RETRY = `
  INSERT INTO jobs (${COMMON_COLUMNS}, state, lease_until, errors, finished_at)
  SELECT d.id, d.kind, d.queue, d.payload, d.priority, :now, d.lease_owner, d.token, 0, d.max_attempts,
    d.retry_policy,
    CASE WHEN EXISTS (SELECT 1 FROM jobs o WHERE o.queue = d.queue AND o.kind = d.kind
                        AND o.idempotency_key = d.idempotency_key AND o.state IN ('pending', 'running'))
      THEN NULL ELSE d.idempotency_key END,
    d.timeout_ms, d.schedule_id,
    CASE WHEN EXISTS (SELECT 1 FROM jobs o WHERE o.schedule_id = d.schedule_id AND o.schedule_slot = d.schedule_slot)
      THEN NULL ELSE d.schedule_slot END,
    d.created_at, d.started_at,
    'pending', NULL, d.errors, NULL
  FROM dead_jobs d WHERE d.id = :id`;

/** Deletes one parked job by id. Parameters: :id. Result: changes. */
export const DEAD_DELETE = `DELETE FROM dead_jobs WHERE id = :id`;

/**
 * Deletes parked jobs named by id (a JSON array) or parked before an instant; either may be NULL.
 * Parameters: :ids, :before. Result: changes.
 * PostgreSQL: `id = ANY($ids) OR parked_at < $before`.
 */
export const DEAD_PURGE = `
  DELETE FROM dead_jobs
  WHERE (:ids IS NOT NULL AND id IN (SELECT value FROM json_each(:ids)))
     OR (:before IS NOT NULL AND parked_at < :before)`;

/**
 * Counts by queue and state. `running` is a live lease by :now; a lapsed one counts as available.
 * Paused queues appear even when empty, with paused = 1.
 * Parameters: :now. Result: one row per queue, by name. A full scan of both tables: a dashboard
 * query, never on the claim path.
 * PostgreSQL: the same counts, written with FILTER clauses.
 */
export const QUEUE_STATS = `
  SELECT queue, EXISTS (SELECT 1 FROM queues q WHERE q.name = queue AND q.paused = 1) AS paused,
    SUM(scheduled) AS scheduled, SUM(available) AS available, SUM(running) AS running,
    SUM(done) AS done, SUM(cancelled) AS cancelled, SUM(dead) AS dead
  FROM (
    SELECT queue,
      ${LIVE} AND NOT (state = 'running' AND lease_until > :now) AND run_at > :now AS scheduled,
      ${LIVE} AND NOT (state = 'running' AND lease_until > :now) AND run_at <= :now AS available,
      state = 'running' AND lease_until > :now AS running,
      state = 'done' AS done,
      state = 'cancelled' AS cancelled,
      0 AS dead
    FROM jobs
    UNION ALL
    SELECT queue, 0, 0, 0, 0, 0, 1 FROM dead_jobs
    UNION ALL
    SELECT name, 0, 0, 0, 0, 0, 0 FROM queues WHERE paused = 1
  )
  GROUP BY queue ORDER BY queue`;

/** The kind-filter parameters of JOB_LAPSED and JOB_NEXT_LEASE_END. */
export function kindParams(filter: KindFilter): { kinds: string | null; exclude_kinds: string } {
  return {
    kinds: filter.kinds === undefined ? null : JSON.stringify(filter.kinds),
    exclude_kinds: JSON.stringify(filter.excludeKinds ?? []),
  };
}

/** Rows deleted per transaction when pruning, so other processes' claims wait milliseconds, not seconds. */
export const PRUNE_BATCH = 5000;

/**
 * Prepares the job statements once per connection: re-preparing per call costs more than most
 * of these statements take to run.
 */
function prepareJobStatements(db: Database.Database) {
  return {
    now: db.prepare(DATABASE_NOW).pluck(),
    findLiveByKey: db.prepare<
      { queue: string; kind: string; key: string },
      { id: number; run_at: number; payload: string }
    >(JOB_FIND_LIVE_BY_KEY),
    insert: db.prepare<Record<string, unknown>, { id: number; run_at: number }>(JOB_INSERT),
    duePendingCount: db.prepare(JOB_DUE_PENDING_COUNT).pluck(),
    duePendingCappedCount: db.prepare(JOB_DUE_PENDING_CAPPED_COUNT).pluck(),
    lapsedCounts: db.prepare<{ now: number }, { queue: string; kind: string; count: number }>(JOB_LAPSED_COUNTS),
    park: db.prepare(JOB_PARK),
    delete: db.prepare(JOB_DELETE),
    heartbeat: db.prepare<Record<string, unknown>, { lease_until: number }>(JOB_HEARTBEAT),
    complete: db.prepare(JOB_COMPLETE),
    completeMany: db.prepare(JOB_COMPLETE_MANY),
    completeDeleteMany: db.prepare<{ leases: string; owner: string | null }, { id: number; token: number }>(
      JOB_COMPLETE_DELETE_MANY,
    ),
    doneWithToken: db.prepare<{ id: number; token: number; owner: string | null }>(JOB_DONE_WITH_TOKEN),
    findHeld: db.prepare<Record<string, unknown>, { attempts: number }>(JOB_FIND_HELD),
    retry: db.prepare(JOB_RETRY),
    release: db.prepare(JOB_RELEASE),
    releaseByOwner: db.prepare(JOB_RELEASE_BY_OWNER),
    cancel: db.prepare(JOB_CANCEL),
    get: db.prepare<{ id: number }, JobRow>(JOB_GET),
    deadGet: db.prepare<{ id: number }, JobRow>(DEAD_GET),
    pruneBatch: db.prepare(JOB_PRUNE_BATCH),
    firstPendingRunAt: db.prepare(JOB_FIRST_PENDING_RUN_AT).pluck(),
    nextLeaseEnd: db.prepare(JOB_NEXT_LEASE_END).pluck(),
    idHighWater: db.prepare(JOB_ID_HIGH_WATER).pluck(),
    pendingGroupsBetween: db.prepare<{ after: number; upto: number }, { queue: string; kind: string; run_at: number }>(
      JOB_PENDING_GROUPS_BETWEEN,
    ),
    deadRetry: db.prepare(DEAD_RETRY),
    deadDelete: db.prepare(DEAD_DELETE),
    deadPurge: db.prepare(DEAD_PURGE),
    queueStats: db.prepare<{ now: number }, QueueCountsRow & { paused: number }>(QUEUE_STATS),
  };
}

/** A pending (queue, kind, priority) triple, as the claim planner walks them. */
type Triple = { queue: string; kind: string; priority: number };

/**
 * The job statements for one connection, and the steps each Store operation runs with them.
 * Every method runs inside the transaction the store opened (BEGIN IMMEDIATE for writes), at the
 * instant `nowMs` the store read under that transaction's lock; ids are already parsed.
 */
export class SqliteJobQueries {
  private readonly stmt: ReturnType<typeof prepareJobStatements>;

  constructor(db: Database.Database) {
    this.stmt = prepareJobStatements(db);
  }

  /** The database clock, epoch milliseconds. */
  now(): number {
    return this.stmt.now.get() as number;
  }

  /** The jobs id sequence's high-water mark (JOB_ID_HIGH_WATER), 0 before the first insert. */
  idHighWater(): number {
    return (this.stmt.idHighWater.get() as number | undefined) ?? 0;
  }

  /** The earliest run_at of each queue and kind among pending jobs with after < id <= upto (JOB_PENDING_GROUPS_BETWEEN). */
  pendingGroupsBetween(after: number, upto: number): WakeUpGroup[] {
    return this.stmt.pendingGroupsBetween
      .all({ after, upto })
      .map((row) => ({ queue: row.queue, kind: row.kind, runAtMs: row.run_at }));
  }

  /**
   * Inserts a batch, answering a live job of the same (queue, kind) and key instead of inserting;
   * throws IdempotencyConflictError when that job's payload differs (the caller's transaction
   * then rolls the whole batch back). The store names the wake-ups from the results (wakeUpsFor).
   */
  submit(jobs: readonly JobSpec[], nowMs: number): { results: SubmitResult[] } {
    const results = jobs.map((spec, index): SubmitResult => {
      if (spec.idempotencyKey !== null) {
        // Also finds a job inserted earlier in this batch: a repeated key maps to the first
        // (whose payload assertBatchKeysAgree already found equal).
        const existing = this.stmt.findLiveByKey.get({
          queue: spec.queue,
          kind: spec.kind,
          key: spec.idempotencyKey,
        });
        if (existing) {
          if (!sameJsonText(existing.payload, spec.payloadJson)) {
            throw liveKeyConflict(spec, index, jobs.length, String(existing.id));
          }
          return { id: String(existing.id), created: false, runAt: new Date(existing.run_at) };
        }
      }
      const runAtMs = spec.runAt === null ? nowMs + Math.ceil(spec.delayMs) : spec.runAt.getTime();
      const row = this.stmt.insert.get({
        kind: spec.kind,
        queue: spec.queue,
        payload: spec.payloadJson,
        priority: spec.priority,
        run_at: runAtMs,
        max_attempts: spec.maxAttempts,
        retry_policy: JSON.stringify(spec.retryPolicy),
        idempotency_key: spec.idempotencyKey,
        timeout_ms: spec.timeoutMs,
        schedule_id: spec.scheduleId,
        schedule_slot: spec.scheduleSlot === null ? null : spec.scheduleSlot.getTime(),
        now: nowMs,
      });
      if (!row) throw new Error('INSERT … RETURNING returned no row');
      return { id: String(row.id), created: true, runAt: new Date(row.run_at) };
    });
    return { results };
  }

  /** Moves a job from jobs to dead_jobs with one more error entry. */
  moveToDead(id: number, nowMs: number, entry: Parameters<typeof attemptErrorJson>[0]): void {
    this.stmt.park.run({ id, now: nowMs, entry: attemptErrorJson(entry) });
    this.stmt.delete.run({ id });
  }

  /** Deletes one job (a recurring run dropped at claim). */
  delete(id: number): void {
    this.stmt.delete.run({ id });
  }

  /** Extends a lease still held; null for a bad id, a stale token or owner, or a lapsed lease. */
  heartbeat(lease: JobLease, leaseMs: number, nowMs: number): Date | null {
    const id = parseJobId(lease.id);
    if (id === null) return null;
    const owner = lease.leaseOwner ?? null;
    const row = this.stmt.heartbeat.get({ id, token: lease.token, owner, now: nowMs, lease_until: nowMs + leaseMs });
    return row ? new Date(row.lease_until) : null;
  }

  /**
   * Completes a held job; `done` also when it is already done under this token and owner (a lost
   * reply). With `deleteRecord` its row is deleted instead, as {@link completeMany} does.
   */
  complete(lease: JobLease, nowMs: number, deleteRecord = false): CompleteOutcome {
    if (deleteRecord) return this.completeMany([lease], nowMs, true)[0]!;
    const id = parseJobId(lease.id);
    if (id === null) return 'stale';
    const owner = lease.leaseOwner ?? null;
    if (this.stmt.complete.run({ id, token: lease.token, owner, now: nowMs }).changes === 1) return 'done';
    // Already done under this token and owner: our earlier completion committed and only its reply was lost.
    return this.stmt.doneWithToken.get({ id, token: lease.token, owner }) === undefined ? 'stale' : 'done';
  }

  /**
   * Completes a batch of held jobs in one statement (JOB_COMPLETE_MANY); outcomes in the leases'
   * order, each as {@link complete} would answer it. When every lease completed, that is all
   * `done`; otherwise each lease is `done` exactly when its row now reads done under its token and
   * owner (completed by this statement or by an earlier one whose reply was lost), else `stale`.
   * With `deleteRecord` (retention 0) each accepted job's row is deleted instead
   * (JOB_COMPLETE_DELETE_MANY) and a lease is `done` exactly when its owner's statement deleted
   * its row under its token (so both copies of a lease named twice, as when the row is kept).
   */
  completeMany(leases: readonly JobLease[], nowMs: number, deleteRecord = false): CompleteOutcome[] {
    const byOwner = new Map<string | null, [number, number][]>();
    const ids = new Array<number | null>(leases.length);
    for (let i = 0; i < leases.length; i += 1) {
      const lease = leases[i]!;
      const id = parseJobId(lease.id);
      ids[i] = id;
      if (id === null) continue;
      const owner = lease.leaseOwner ?? null;
      const held = byOwner.get(owner);
      if (held) held.push([id, lease.token]);
      else byOwner.set(owner, [[id, lease.token]]);
    }
    if (deleteRecord) {
      const deletedByOwner = new Map<string | null, Set<string>>();
      for (const [owner, held] of byOwner) {
        const rows = this.stmt.completeDeleteMany.all({ leases: JSON.stringify(held), owner });
        deletedByOwner.set(owner, new Set(rows.map((row) => `${row.id}:${row.token}`)));
      }
      return leases.map((lease, i) =>
        deletedByOwner.get(lease.leaseOwner ?? null)?.has(`${ids[i]}:${lease.token}`) === true ? 'done' : 'stale',
      );
    }
    let changes = 0;
    for (const [owner, held] of byOwner) {
      changes += this.stmt.completeMany.run({ leases: JSON.stringify(held), owner, now: nowMs }).changes;
    }
    if (changes === leases.length) return leases.map(() => 'done');
    return leases.map((lease, i) => {
      const id = ids[i];
      if (id === null || id === undefined) return 'stale';
      const owner = lease.leaseOwner ?? null;
      return this.stmt.doneWithToken.get({ id, token: lease.token, owner }) === undefined ? 'stale' : 'done';
    });
  }

  /** Records the attempt's error and applies the caller's decision (retry or park). */
  fail(
    id: number,
    params: Pick<JobFailParams, 'token' | 'leaseOwner' | 'error' | 'decision'>,
    nowMs: number,
  ): FailOutcome {
    const held = this.stmt.findHeld.get({ id, token: params.token, owner: params.leaseOwner ?? null });
    if (!held) return { outcome: 'stale' };
    const entry = {
      attempt: held.attempts,
      atMs: nowMs,
      kind: params.error.kind,
      message: params.error.message,
      detail: params.error.detail,
    };
    if (params.decision.kind === 'park') {
      this.moveToDead(id, nowMs, entry);
      return { outcome: 'parked' };
    }
    // Rounded up: a retry is never earlier than its backoff's lower bound (invariant I4); and no
    // later than the last instant a job may run at (a policy or snooze of thousands of years).
    const runAtMs = Math.min(nowMs + Math.max(0, Math.ceil(params.decision.delayMs)), LATEST_RUN_AT_MS);
    this.stmt.retry.run({ id, run_at: runAtMs, entry: attemptErrorJson(entry) });
    return { outcome: 'retry', runAt: new Date(runAtMs) };
  }

  /** Gives a held lease back; true when it was ours (token and owner). */
  release(id: number, lease: Pick<JobLease, 'token' | 'leaseOwner'>, nowMs: number): boolean {
    return this.stmt.release.run({ id, token: lease.token, owner: lease.leaseOwner ?? null, now: nowMs }).changes === 1;
  }

  /** Gives back every lease held under `owner`; returns how many. */
  releaseByOwner(owner: string, nowMs: number): number {
    return this.stmt.releaseByOwner.all({ owner, now: nowMs }).length;
  }

  /** Cancels a live job. */
  cancel(id: number, nowMs: number): CancelOutcome {
    if (this.stmt.cancel.run({ id, now: nowMs }).changes === 1) return 'cancelled';
    return this.get(id) ? 'already_finished' : 'not_found';
  }

  /** One job from either table. */
  get(id: number): JobRow | undefined {
    return this.stmt.get.get({ id }) ?? this.stmt.deadGet.get({ id });
  }

  /** Deletes up to `limit` finished records that finished before `beforeMs`; returns how many. */
  pruneBatch(beforeMs: number, limit: number): number {
    return this.stmt.pruneBatch.run({ before: beforeMs, limit }).changes;
  }

  /**
   * The earliest instant a live job of the allowed triples (and lapsed leases of the allowed
   * queues and kinds) becomes claimable, never before now; null when none is live.
   */
  nextRunAt(triples: readonly Triple[], params: NextRunAtParams, nowMs: number): number | null {
    const queues = params.queues === undefined ? null : JSON.stringify(params.queues);
    let earliest: number | null = null;
    for (const triple of triples) {
      const runAt = this.stmt.firstPendingRunAt.get(triple) as number | undefined;
      if (runAt !== undefined && (earliest === null || runAt < earliest)) earliest = runAt;
    }
    const leaseEnd = this.stmt.nextLeaseEnd.get({ queues, ...kindParams(params) }) as number | undefined;
    if (leaseEnd !== undefined && (earliest === null || leaseEnd < earliest)) earliest = leaseEnd;
    return earliest === null ? null : Math.max(earliest, nowMs);
  }

  /** Moves a parked job back to pending, due now, with fresh attempts; its row, or null. */
  deadRetry(id: number, nowMs: number): JobRow | null {
    if (this.stmt.deadRetry.run({ id, now: nowMs }).changes === 0) return null;
    this.stmt.deadDelete.run({ id });
    return this.stmt.get.get({ id }) ?? null;
  }

  /** Deletes parked jobs by id and/or park time; returns how many. */
  deadPurge(ids: readonly number[] | null, beforeMs: number | null): number {
    return this.stmt.deadPurge.run({ ids: ids === null ? null : JSON.stringify(ids), before: beforeMs }).changes;
  }

  /** Counts by queue and state. */
  queueStats(nowMs: number): QueueStats[] {
    return this.stmt.queueStats.all({ now: nowMs }).map((row) => queueStatsOf(row, Number(row.paused) === 1));
  }

  /** Available jobs (due pending rows of the given triples, lapsed leases) by queue and kind. */
  dueCountsByKind(triples: readonly Triple[], nowMs: number, cap: number | null = null): DueKindCount[] {
    const counts = new Map<string, DueKindCount>();
    const add = (queue: string, kind: string, count: number) => {
      if (count === 0) return;
      const key = JSON.stringify([queue, kind]);
      const entry = counts.get(key);
      if (entry) entry.count += count;
      else counts.set(key, { queue, kind, count });
    };
    // Due pending rows per triple (index-only counts of the due range), then lapsed leases.
    for (const triple of triples) {
      const count =
        cap === null
          ? this.stmt.duePendingCount.get({ ...triple, now: nowMs })
          : this.stmt.duePendingCappedCount.get({ ...triple, now: nowMs, cap });
      add(triple.queue, triple.kind, Number(count));
    }
    for (const row of this.stmt.lapsedCounts.all({ now: nowMs })) add(row.queue, row.kind, Number(row.count));
    return [...counts.values()].sort((a, b) => byteOrder(a.queue, b.queue) || byteOrder(a.kind, b.kind));
  }
}

/** Bytewise (UTF-8) string order, as SQLite's BINARY collation and PostgreSQL's "C" sort. */
function byteOrder(a: string, b: string): number {
  return a === b ? 0 : Buffer.compare(Buffer.from(a), Buffer.from(b));
}
