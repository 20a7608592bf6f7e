/**
 * The PostgreSQL store's SQL for recurring schedules and paused queues, one method per step, each
 * headed by purpose, parameters and result. Methods take the {@link Queryable} to run on; the
 * store runs the schedule steps on one client inside BEGIN … COMMIT (PostgresStore.inTransaction).
 *
 * Locking order, which keeps these transactions free of deadlocks with claims: a claim locks job
 * rows, then (for recurring runs) schedule rows in id order. Schedule operations lock the schedule
 * row first and then touch job rows only with SKIP LOCKED, so they never wait on a claim that
 * waits on them. A run skipped that way is being claimed at that instant; the claim, once it gets
 * the schedule lock, sees the pause or delete and drops it (see decideClaimedRun).
 *
 * Rows become {@link Schedule}s in one place ({@link rowToSchedule}, over the shared scheduleOfRow).
 */
import type { Schedule, ScheduleSpec } from '../../schedule/schedule.js';
import type { ScheduleAdvance } from '../schedule-plan.js';
import { type DecodedScheduleRow, scheduleOfRow } from '../schedule-record.js';
import type { QueueState } from '../store.js';
import { pageSize } from '../store-params.js';
import { quoteIdentifier } from './migrations.js';
import { type Queryable, wakeNotify } from './sql-fragments.js';

/** A schedules row as pg returns it: decoded, except int8 `catch_up_window_ms` arrives as text. */
export type ScheduleRow = Omit<DecodedScheduleRow, 'catch_up_window_ms'> & { catch_up_window_ms: string };

interface QueueRow {
  name: string;
  paused: boolean;
  paused_at: Date | null;
}

/** Converts a schedules row to a {@link Schedule} (the field mapping is shared: scheduleOfRow). */
export function rowToSchedule(row: ScheduleRow): Schedule {
  return scheduleOfRow({ ...row, catch_up_window_ms: Number(row.catch_up_window_ms) });
}

function rowToQueueState(row: QueueRow): QueueState {
  return { name: row.name, paused: row.paused, pausedAt: row.paused_at };
}

/** The database clock, unless the caller pinned an instant. Always parameter $1. */
const NOW = 'coalesce($1::timestamptz, now())';

/** The parameters of the apply statements, in their order ($1 … $9). */
function applyParams(advances: readonly ScheduleAdvance[], now: Date, wakeHorizonMs: number): unknown[] {
  const runs = advances.flatMap((advance) => advance.runs.map((run) => ({ id: advance.scheduleId, ...run })));
  return [
    now,
    runs.map((run) => run.id),
    runs.map((run) => run.slot),
    runs.map((run) => run.runAt),
    advances.map((advance) => advance.scheduleId),
    advances.map((advance) => advance.lastSlotAt),
    advances.map((advance) => advance.nextSlotAt),
    advances.map((advance) => advance.nextRunAt),
    wakeHorizonMs,
  ];
}

/** The schedule SQL for one schema, and the code that runs it on any {@link Queryable}. */
export class PostgresScheduleQueries {
  private readonly sql: ReturnType<typeof buildSql>;

  constructor(schemaName: string, channel: string) {
    this.sql = buildSql(quoteIdentifier(schemaName), channel);
  }

  /** The transaction's instant: pinned, or the database clock (fixed for the transaction). */
  async now(db: Queryable, now: Date | undefined): Promise<Date> {
    const result = await db.query<{ now: Date }>(this.sql.now, [now ?? null]);
    return result.rows[0]!.now;
  }

  /** Inserts a new schedule (no runs yet); null when the id exists. Locks the new row. */
  async insert(db: Queryable, spec: ScheduleSpec, now: Date): Promise<Schedule | null> {
    const result = await db.query<ScheduleRow>(this.sql.insert, [now, ...specParams(spec)]);
    const row = result.rows[0];
    return row ? rowToSchedule(row) : null;
  }

  /** Replaces an existing schedule's definition (progress columns kept); null when unknown. */
  async replace(db: Queryable, spec: ScheduleSpec, now: Date): Promise<Schedule | null> {
    const result = await db.query<ScheduleRow>(this.sql.replace, [now, ...specParams(spec)]);
    const row = result.rows[0];
    return row ? rowToSchedule(row) : null;
  }

  /** Schedules by id, locked FOR UPDATE in id order (the order every locker uses). */
  async lock(db: Queryable, ids: readonly string[]): Promise<Schedule[]> {
    if (ids.length === 0) return [];
    const result = await db.query<ScheduleRow>(this.sql.lock, [[...ids]]);
    return result.rows.map(rowToSchedule);
  }

  /** One schedule, unlocked. */
  async get(db: Queryable, id: string): Promise<Schedule | null> {
    const result = await db.query<ScheduleRow>(this.sql.get, [id]);
    const row = result.rows[0];
    return row ? rowToSchedule(row) : null;
  }

  /** A keyset page of schedules ordered by id. */
  async list(
    db: Queryable,
    params: { limit?: number | undefined; afterId?: string | undefined; paused?: boolean | undefined },
  ): Promise<Schedule[]> {
    const limit = pageSize(params.limit);
    const result = await db.query<ScheduleRow>(this.sql.list, [params.afterId ?? null, params.paused ?? null, limit]);
    return result.rows.map(rowToSchedule);
  }

  /** Sets the pause flag (clearing the next run while paused); null when unknown. */
  async setPaused(db: Queryable, id: string, paused: boolean, now: Date): Promise<Schedule | null> {
    const result = await db.query<ScheduleRow>(this.sql.setPaused, [now, id, paused]);
    const row = result.rows[0];
    return row ? rowToSchedule(row) : null;
  }

  /** Deletes the schedule row; false when unknown. */
  async delete(db: Queryable, id: string): Promise<boolean> {
    const result = await db.query(this.sql.delete, [id]);
    return result.rowCount === 1;
  }

  /** Deletes the schedule's pending runs that never started, skipping rows a claim holds. */
  async deleteUnstartedRuns(db: Queryable, id: string): Promise<number> {
    const result = await db.query(this.sql.deleteUnstartedRuns, [id]);
    return result.rowCount ?? 0;
  }

  /** Deletes claimed jobs by id (runs a claim dropped because their schedule was paused or deleted). */
  async deleteJobs(db: Queryable, ids: readonly string[]): Promise<void> {
    if (ids.length > 0) await db.query(this.sql.deleteJobs, [[...ids]]);
  }

  /**
   * Applies plans: inserts their runs (a slot that already has a job is skipped by the unique
   * key) and moves each schedule's progress columns; notifies when a run is due soon.
   */
  async apply(
    db: Queryable,
    advances: readonly ScheduleAdvance[],
    now: Date,
    wakeHorizonMs: number,
  ): Promise<Schedule[]> {
    if (advances.length === 0) return [];
    const result = await db.query<ScheduleRow>(this.sql.apply, applyParams(advances, now, wakeHorizonMs));
    return result.rows.map(rowToSchedule);
  }

  /**
   * {@link apply} for callers that do not read the schedules back (a claim of recurring runs, the
   * repair sweep): the same writes and wake-up, answered with nothing. A claim of 500 recurring
   * runs spent about as long reading back and parsing 500 schedule rows it then dropped as the
   * database spent writing them.
   */
  async applyQuietly(
    db: Queryable,
    advances: readonly ScheduleAdvance[],
    now: Date,
    wakeHorizonMs: number,
  ): Promise<void> {
    if (advances.length > 0) await db.query(this.sql.applyQuietly, applyParams(advances, now, wakeHorizonMs));
  }

  /** Active schedules whose latest run is no longer live, locked (SKIP LOCKED), up to `limit`. */
  async lockBroken(db: Queryable, limit: number): Promise<Schedule[]> {
    const result = await db.query<ScheduleRow>(this.sql.lockBroken, [limit]);
    return result.rows.map(rowToSchedule);
  }

  /** Of the given (locked) schedules, the ids whose latest run is still not live, by a fresh snapshot. */
  async stillBroken(db: Queryable, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const result = await db.query<{ id: string }>(this.sql.stillBroken, [[...ids]]);
    return new Set(result.rows.map((row) => row.id));
  }

  /** Pauses a queue (idempotent: the first pause time is kept). */
  async queuePause(db: Queryable, name: string, now: Date | undefined): Promise<QueueState> {
    const result = await db.query<QueueRow>(this.sql.queuePause, [now ?? null, name]);
    return rowToQueueState(result.rows[0]!);
  }

  /** Resumes a queue and wakes listeners. */
  async queueResume(db: Queryable, name: string): Promise<QueueState> {
    const result = await db.query<QueueRow>(this.sql.queueResume, [name]);
    return rowToQueueState(result.rows[0]!);
  }

  /** Every queue row, by name. */
  async queueList(db: Queryable): Promise<QueueState[]> {
    const result = await db.query<QueueRow>(this.sql.queueList);
    return result.rows.map(rowToQueueState);
  }
}

/** A spec's columns as parameters $2..$16, in the order of SPEC_COLUMNS. */
function specParams(spec: ScheduleSpec): unknown[] {
  return [
    spec.id,
    spec.cron,
    spec.timeZone,
    spec.job.kind,
    spec.job.queue,
    spec.job.payloadJson,
    spec.job.priority,
    spec.job.maxAttempts,
    JSON.stringify(spec.job.retryPolicy),
    spec.job.timeoutMs,
    spec.jitterMs,
    spec.jitterMode,
    spec.misfire.policy,
    spec.misfire.catchUpWindowMs,
    spec.misfire.maxCatchUpRuns,
    spec.paused,
  ];
}

function buildSql(s: string, channel: string) {
  const schedules = `${s}.schedules`;
  const jobs = `${s}.jobs`;
  const queues = `${s}.queues`;
  const channelLiteral = `'${channel.replace(/'/g, "''")}'`;
  const values = `$2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $13, $14, $15, $16, $17`;
  const columns = `id, cron, time_zone, kind, queue, payload_json, priority, max_attempts, retry_policy,
    timeout_ms, jitter_ms, jitter_mode, misfire_policy, catch_up_window_ms, max_catch_up_runs, paused`;
  /** The apply statement (see `apply` below) with the given final SELECT. */
  const applySql = (answer: string) => `
      WITH inserted AS (
        INSERT INTO ${jobs} (kind, queue, payload, priority, state, run_at, token, attempts, max_attempts,
                             retry_policy, errors, timeout_ms, schedule_id, schedule_slot, created_at)
        SELECT sc.kind, sc.queue, sc.payload_json::jsonb, sc.priority, 'pending', r.run_at, 0, 0, sc.max_attempts,
               sc.retry_policy, '[]'::jsonb, sc.timeout_ms, sc.id, r.slot, $1
        FROM unnest($2::text[], $3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS r(schedule_id, slot, run_at, ord)
        JOIN ${schedules} sc ON sc.id = r.schedule_id
        ORDER BY r.ord
        ON CONFLICT (schedule_id, schedule_slot) WHERE schedule_id IS NOT NULL DO NOTHING
        RETURNING run_at, queue, kind
      ),
      updated AS (
        UPDATE ${schedules} sc
        SET last_slot_at = coalesce(u.last_slot_at, sc.last_slot_at), next_slot_at = u.next_slot_at,
            next_run_at = u.next_run_at, updated_at = $1
        FROM unnest($5::text[], $6::timestamptz[], $7::timestamptz[], $8::timestamptz[])
          AS u(id, last_slot_at, next_slot_at, next_run_at)
        WHERE sc.id = u.id
        RETURNING sc.*
      ),
      wake AS (
        ${wakeNotify(channelLiteral, 'inserted', `run_at <= $1::timestamptz + ($9::double precision * interval '1 millisecond')`)}
      )
      ${answer}`;

  return {
    /**
     * now: the transaction's instant. Params: $1 now?. Result: now.
     */
    now: `SELECT ${NOW} AS now`,

    /**
     * insert: creates a schedule with no progress yet.
     * Params: $1 now, $2..$17 the spec's columns (specParams). Result: the new row, or none when
     *   the id exists (ON CONFLICT also waits out a concurrent insert of the same id).
     */
    insert: `
      INSERT INTO ${schedules} (${columns}, created_at, updated_at)
      VALUES (${values}, $1, $1)
      ON CONFLICT (id) DO NOTHING
      RETURNING *`,

    /**
     * replace: overwrites an existing schedule's definition; progress columns are the caller's.
     * Params: as insert. Result: the row after the update, or none when unknown.
     */
    replace: `
      UPDATE ${schedules} SET (${columns}, updated_at) = (${values}, $1)
      WHERE id = $2
      RETURNING *`,

    /**
     * lock: schedules by id, FOR UPDATE, in id order so two lockers never deadlock.
     * Params: $1 ids text[]. Result: the rows that exist.
     */
    lock: `SELECT * FROM ${schedules} WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`,

    /** get: one schedule. Params: $1 id. Result: zero or one row. */
    get: `SELECT * FROM ${schedules} WHERE id = $1`,

    /**
     * list: a keyset page by id. Params: $1 after id?, $2 paused?, $3 limit.
     * Result: up to $3 rows, ids ascending (primary-key range scan).
     */
    list: `
      SELECT * FROM ${schedules}
      WHERE ($1::text IS NULL OR id > $1) AND ($2::boolean IS NULL OR paused = $2)
      ORDER BY id LIMIT $3`,

    /**
     * setPaused: sets the flag; a paused schedule has no next run.
     * Params: $1 now, $2 id, $3 paused. Result: the row, or none when unknown.
     */
    setPaused: `
      UPDATE ${schedules}
      SET paused = $3, updated_at = $1,
          next_slot_at = CASE WHEN $3 THEN NULL ELSE next_slot_at END,
          next_run_at = CASE WHEN $3 THEN NULL ELSE next_run_at END
      WHERE id = $2
      RETURNING *`,

    /** delete: the schedule row. Params: $1 id. Result: rowCount 1 when it existed. */
    delete: `DELETE FROM ${schedules} WHERE id = $1`,

    /**
     * deleteUnstartedRuns: the schedule's pending jobs that never started (no attempt, no error);
     * running jobs and the retries of started ones are left to finish. SKIP LOCKED: a row a claim
     * holds is being claimed now, and that claim drops it once it sees the schedule.
     * Params: $1 schedule id. Result: rowCount = how many were deleted.
     */
    deleteUnstartedRuns: `
      DELETE FROM ${jobs} WHERE id IN (
        SELECT id FROM ${jobs}
        WHERE schedule_id = $1 AND state = 'pending' AND attempts = 0 AND errors = '[]'::jsonb
        FOR UPDATE SKIP LOCKED)`,

    /** deleteJobs: jobs by id (claimed runs being dropped). Params: $1 ids bigint[]. */
    deleteJobs: `DELETE FROM ${jobs} WHERE id = ANY($1::bigint[])`,

    /**
     * apply: inserts planned runs from each schedule's template and moves its progress columns.
     * Params: $1 now, $2 run schedule ids text[], $3 run slots timestamptz[], $4 run times
     *   timestamptz[], $5 schedule ids text[], $6 last slots (NULL keeps the stored one), $7 next
     *   slots, $8 next run times, $9 wake horizon ms.
     * Result: the schedules after the update.
     * At most one job per (schedule, slot): ON CONFLICT on jobs_schedule_slot_idx skips a slot that
     * already has a job (a repeated plan). One NOTIFY when a new run is due within the horizon.
     */
    apply: applySql('SELECT updated.*, (SELECT count(*) FROM wake) AS woke FROM updated ORDER BY id'),

    /**
     * applyQuietly: apply's writes and wake-up, answering one row with nothing of the schedules.
     * The row reads `wake` on purpose: PostgreSQL runs a data-modifying CTE whether or not it is
     * read, but a plain SELECT CTE such as `wake` (the NOTIFY) only when something reads it.
     */
    applyQuietly: applySql('SELECT (SELECT count(*) FROM wake) AS woke'),

    /**
     * lockBroken: active schedules whose latest planned run (at coalesce(next_slot_at,
     * last_slot_at), see plannedThroughSlotAt) is no longer live:
     * an operator cancelled it, or it was claimed while nothing could plan. SKIP LOCKED: a
     * schedule another transaction holds is being planned right now.
     * Params: $1 limit. Result: the locked rows, by id. One probe of jobs_schedule_slot_idx each.
     */
    lockBroken: `
      SELECT * FROM ${schedules} sc
      WHERE NOT sc.paused AND coalesce(sc.next_slot_at, sc.last_slot_at) IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM ${jobs} j
                        WHERE j.schedule_id = sc.id AND j.schedule_slot = coalesce(sc.next_slot_at, sc.last_slot_at)
                          AND j.state IN ('pending', 'running'))
      ORDER BY sc.id LIMIT $1
      FOR UPDATE SKIP LOCKED`,

    /**
     * stillBroken: re-checks lockBroken's condition in a fresh snapshot, now that the rows are
     * locked: a claim that planned and committed just before the lock is visible here.
     * Params: $1 ids text[]. Result: the ids still broken.
     */
    stillBroken: `
      SELECT sc.id FROM ${schedules} sc
      WHERE sc.id = ANY($1::text[]) AND NOT sc.paused AND coalesce(sc.next_slot_at, sc.last_slot_at) IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM ${jobs} j
                        WHERE j.schedule_id = sc.id AND j.schedule_slot = coalesce(sc.next_slot_at, sc.last_slot_at)
                          AND j.state IN ('pending', 'running'))`,

    /**
     * queuePause: marks a queue paused; pausing a paused queue keeps its first pause time.
     * Params: $1 now?, $2 name. Result: the queue row.
     */
    queuePause: `
      INSERT INTO ${queues} (name, paused, paused_at) VALUES ($2, true, ${NOW})
      ON CONFLICT (name) DO UPDATE
        SET paused = true, paused_at = coalesce(${queues}.paused_at, excluded.paused_at)
      RETURNING name, paused, paused_at`,

    /**
     * queueResume: marks a queue not paused and wakes listeners (its due jobs are claimable now).
     * Params: $1 name. Result: the queue row.
     */
    queueResume: `
      WITH resumed AS (
        INSERT INTO ${queues} (name, paused, paused_at) VALUES ($1, false, NULL)
        ON CONFLICT (name) DO UPDATE SET paused = false, paused_at = NULL
        RETURNING name, paused, paused_at
      ),
      wake AS (SELECT pg_notify(${channelLiteral}, '') FROM resumed)
      SELECT resumed.*, (SELECT count(*) FROM wake) AS woke FROM resumed`,

    /** queueList: every queue row by name. Params: none. Result: rows. */
    queueList: `SELECT name, paused, paused_at FROM ${queues} ORDER BY name`,
  };
}
