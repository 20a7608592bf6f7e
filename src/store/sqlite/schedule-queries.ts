/**
 * The SQLite store's SQL for recurring schedules and paused queues, each statement headed by its
 * purpose, parameters and result and by how it differs from its PostgreSQL twin
 * (src/store/postgres/schedule-queries.ts), plus the one place schedule rows become
 * {@link Schedule}s.
 *
 * Every write runs inside SqliteStore's BEGIN IMMEDIATE transaction, so schedule operations and
 * claims are serial: no row locks, no SKIP LOCKED, and a check-then-write never races.
 */
import type Database from 'better-sqlite3';
import type { RetryPolicy } from '../../job/job.js';
import type { JitterMode } from '../../schedule/jitter.js';
import type { MisfirePolicyName, Schedule, ScheduleSpec } from '../../schedule/schedule.js';
import type { ScheduleAdvance } from '../schedule-plan.js';
import { type DecodedScheduleRow, scheduleOfRow } from '../schedule-record.js';
import type { QueueState } from '../store.js';

/** A schedules row as better-sqlite3 returns it (instants in epoch ms, booleans 0/1, JSON as text). */
export type ScheduleRow = Omit<
  DecodedScheduleRow,
  | 'retry_policy'
  | 'jitter_mode'
  | 'misfire_policy'
  | 'paused'
  | 'last_slot_at'
  | 'next_slot_at'
  | 'next_run_at'
  | 'created_at'
  | 'updated_at'
> & {
  retry_policy: string;
  jitter_mode: string;
  misfire_policy: string;
  paused: number;
  last_slot_at: number | null;
  next_slot_at: number | null;
  next_run_at: number | null;
  created_at: number;
  updated_at: number;
};

/** A queues row. */
export interface QueueRow {
  name: string;
  paused: number;
  paused_at: number | null;
}

const toDate = (ms: number | null): Date | null => (ms === null ? null : new Date(ms));

/** Converts a schedules row to a {@link Schedule}: decodes SQLite's types, then the shared mapping. */
export function rowToSchedule(row: ScheduleRow): Schedule {
  return scheduleOfRow({
    ...row,
    retry_policy: JSON.parse(row.retry_policy) as RetryPolicy,
    jitter_mode: row.jitter_mode as JitterMode,
    misfire_policy: row.misfire_policy as MisfirePolicyName,
    paused: row.paused === 1,
    last_slot_at: toDate(row.last_slot_at),
    next_slot_at: toDate(row.next_slot_at),
    next_run_at: toDate(row.next_run_at),
    created_at: new Date(row.created_at),
    updated_at: new Date(row.updated_at),
  });
}

/** Converts a queues row to a {@link QueueState}. */
export function rowToQueueState(row: QueueRow): QueueState {
  return { name: row.name, paused: row.paused === 1, pausedAt: toDate(row.paused_at) };
}

/** A spec's columns as named parameters for SCHEDULE_INSERT and SCHEDULE_REPLACE. */
export function scheduleParams(spec: ScheduleSpec, nowMs: number): Record<string, unknown> {
  return {
    id: spec.id,
    cron: spec.cron,
    time_zone: spec.timeZone,
    kind: spec.job.kind,
    queue: spec.job.queue,
    payload_json: spec.job.payloadJson,
    priority: spec.job.priority,
    max_attempts: spec.job.maxAttempts,
    retry_policy: JSON.stringify(spec.job.retryPolicy),
    timeout_ms: spec.job.timeoutMs,
    jitter_ms: spec.jitterMs,
    jitter_mode: spec.jitterMode,
    misfire_policy: spec.misfire.policy,
    catch_up_window_ms: spec.misfire.catchUpWindowMs,
    max_catch_up_runs: spec.misfire.maxCatchUpRuns,
    paused: spec.paused ? 1 : 0,
    now: nowMs,
  };
}

const SPEC_COLUMNS = `id, cron, time_zone, kind, queue, payload_json, priority, max_attempts, retry_policy,
  timeout_ms, jitter_ms, jitter_mode, misfire_policy, catch_up_window_ms, max_catch_up_runs, paused`;
const SPEC_VALUES = `:id, :cron, :time_zone, :kind, :queue, :payload_json, :priority, :max_attempts, :retry_policy,
  :timeout_ms, :jitter_ms, :jitter_mode, :misfire_policy, :catch_up_window_ms, :max_catch_up_runs, :paused`;

/**
 * Creates a schedule with no progress yet.
 * Parameters: scheduleParams. Result: the new row, or nothing when the id exists.
 * PostgreSQL: identical.
 */
export const SCHEDULE_INSERT = `
  INSERT INTO schedules (${SPEC_COLUMNS}, created_at, updated_at)
  VALUES (${SPEC_VALUES}, :now, :now)
  ON CONFLICT (id) DO NOTHING
  RETURNING *`;

/**
 * Overwrites an existing schedule's definition; the progress columns are the caller's.
 * Parameters: scheduleParams. Result: the row after the update, or nothing when unknown.
 * PostgreSQL: a row-valued SET of the same columns.
 */
export const SCHEDULE_REPLACE = `
  UPDATE schedules SET (${SPEC_COLUMNS}, updated_at) = (${SPEC_VALUES}, :now)
  WHERE id = :id
  RETURNING *`;

/**
 * One schedule. Parameters: :id. Result: the row or nothing.
 * PostgreSQL: the claim and the schedule operations read it FOR UPDATE; here the write lock
 * already serialises them.
 */
export const SCHEDULE_GET = `SELECT * FROM schedules WHERE id = :id`;

/**
 * A keyset page by id. Parameters: :after_id ('' for the first page: ids are never empty),
 * :paused (0, 1 or NULL for both), :limit. Result: rows by id (primary-key range scan).
 * PostgreSQL: identical.
 */
export const SCHEDULE_LIST = `
  SELECT * FROM schedules
  WHERE id > :after_id AND (:paused IS NULL OR paused = :paused)
  ORDER BY id LIMIT :limit`;

/**
 * Sets the pause flag; a paused schedule has no next run.
 * Parameters: :id, :paused (0/1), :now. Result: the row after the update, or nothing.
 * PostgreSQL: identical.
 */
export const SCHEDULE_SET_PAUSED = `
  UPDATE schedules
  SET paused = :paused, updated_at = :now,
      next_slot_at = CASE WHEN :paused = 1 THEN NULL ELSE next_slot_at END,
      next_run_at = CASE WHEN :paused = 1 THEN NULL ELSE next_run_at END
  WHERE id = :id
  RETURNING *`;

/** Deletes the schedule row. Parameters: :id. Result: changes. PostgreSQL: identical. */
export const SCHEDULE_DELETE = `DELETE FROM schedules WHERE id = :id`;

/**
 * Deletes the schedule's pending jobs that never started (no attempt, no error); running jobs
 * and the retries of started ones finish. Parameters: :id. Result: changes.
 * PostgreSQL: the same rows, with SKIP LOCKED (a claim may hold one at that instant).
 */
export const SCHEDULE_DELETE_UNSTARTED_RUNS = `
  DELETE FROM jobs
  WHERE schedule_id = :id AND state = 'pending' AND attempts = 0 AND errors = '[]'`;

/**
 * Inserts one planned run from the schedule's template; a slot that already has a job is
 * skipped by the unique index jobs_schedule_slot (one job per schedule and slot).
 * Parameters: :id, :slot, :run_at, :now. Result: { run_at } when inserted, nothing when the slot
 * was taken. (The WHERE clause also keeps SQLite's parser from reading ON CONFLICT as a join.)
 * PostgreSQL: one INSERT … SELECT FROM unnest(...) for every run of the claim.
 */
export const SCHEDULE_INSERT_RUN = `
  INSERT INTO jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, timeout_ms,
    schedule_id, schedule_slot, created_at)
  SELECT kind, queue, payload_json, priority, 'pending', :run_at, max_attempts, retry_policy, timeout_ms,
    id, :slot, :now
  FROM schedules WHERE id = :id
  ON CONFLICT (schedule_id, schedule_slot) WHERE schedule_id IS NOT NULL DO NOTHING
  RETURNING run_at`;

/**
 * Moves a schedule's progress columns after a plan.
 * Parameters: :id, :last_slot_at (NULL keeps the stored one), :next_slot_at, :next_run_at, :now.
 * Result: the row after the update. PostgreSQL: the same UPDATE, batched with unnest.
 */
export const SCHEDULE_ADVANCE = `
  UPDATE schedules
  SET last_slot_at = coalesce(:last_slot_at, last_slot_at), next_slot_at = :next_slot_at,
      next_run_at = :next_run_at, updated_at = :now
  WHERE id = :id
  RETURNING *`;

/**
 * Active schedules whose latest planned run (at coalesce(next_slot_at, last_slot_at), see
 * plannedThroughSlotAt) is no longer live: an operator cancelled it, or it was claimed while
 * nothing could plan.
 * Parameters: :limit. Result: rows by id; one probe of jobs_schedule_slot each.
 * PostgreSQL: the same, locked FOR UPDATE SKIP LOCKED and re-checked after locking.
 */
export const SCHEDULE_BROKEN = `
  SELECT * FROM schedules s
  WHERE s.paused = 0 AND coalesce(s.next_slot_at, s.last_slot_at) IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM jobs j
                    WHERE j.schedule_id = s.id AND j.schedule_slot = coalesce(s.next_slot_at, s.last_slot_at)
                      AND j.state IN ('pending', 'running'))
  ORDER BY s.id LIMIT :limit`;

/**
 * Marks a queue paused, keeping the first pause time of an already paused queue.
 * Parameters: :name, :now. Result: the queue row. PostgreSQL: identical.
 */
export const QUEUE_PAUSE = `
  INSERT INTO queues (name, paused, paused_at) VALUES (:name, 1, :now)
  ON CONFLICT (name) DO UPDATE SET paused = 1, paused_at = coalesce(queues.paused_at, excluded.paused_at)
  RETURNING name, paused, paused_at`;

/**
 * Marks a queue not paused. Parameters: :name. Result: the queue row.
 * PostgreSQL: also NOTIFYs other processes; here only this process's subscribers are woken.
 */
export const QUEUE_RESUME = `
  INSERT INTO queues (name, paused, paused_at) VALUES (:name, 0, NULL)
  ON CONFLICT (name) DO UPDATE SET paused = 0, paused_at = NULL
  RETURNING name, paused, paused_at`;

/** Every queue row by name. Parameters: none. Result: rows. PostgreSQL: identical. */
export const QUEUE_LIST = `SELECT name, paused, paused_at FROM queues ORDER BY name`;

/**
 * Names of paused queues (the claim leaves their (queue, priority) pairs out).
 * Parameters: none. Result: one name per row. PostgreSQL: a NOT EXISTS probe per pair instead.
 */
export const QUEUE_PAUSED_NAMES = `SELECT name FROM queues WHERE paused = 1`;

/** Prepares the schedule and queue statements once per connection. */
function prepareScheduleStatements(db: Database.Database) {
  return {
    insert: db.prepare<Record<string, unknown>, ScheduleRow>(SCHEDULE_INSERT),
    replace: db.prepare<Record<string, unknown>, ScheduleRow>(SCHEDULE_REPLACE),
    get: db.prepare<{ id: string }, ScheduleRow>(SCHEDULE_GET),
    list: db.prepare<Record<string, unknown>, ScheduleRow>(SCHEDULE_LIST),
    setPaused: db.prepare<Record<string, unknown>, ScheduleRow>(SCHEDULE_SET_PAUSED),
    delete: db.prepare<{ id: string }>(SCHEDULE_DELETE),
    deleteUnstartedRuns: db.prepare<{ id: string }>(SCHEDULE_DELETE_UNSTARTED_RUNS),
    insertRun: db.prepare<Record<string, unknown>, { run_at: number }>(SCHEDULE_INSERT_RUN),
    advance: db.prepare<Record<string, unknown>, ScheduleRow>(SCHEDULE_ADVANCE),
    broken: db.prepare<{ limit: number }, ScheduleRow>(SCHEDULE_BROKEN),
    queuePause: db.prepare<{ name: string; now: number }, QueueRow>(QUEUE_PAUSE),
    queueResume: db.prepare<{ name: string }, QueueRow>(QUEUE_RESUME),
    queueList: db.prepare<[], QueueRow>(QUEUE_LIST),
  };
}

/**
 * The schedule and queue statements for one connection, as the steps the store's schedule
 * operations run (the same steps as PostgresScheduleQueries, without row locks: the store's
 * BEGIN IMMEDIATE transaction already makes them serial). Writes run inside that transaction.
 */
export class SqliteScheduleQueries {
  private readonly stmt: ReturnType<typeof prepareScheduleStatements>;

  constructor(db: Database.Database) {
    this.stmt = prepareScheduleStatements(db);
  }

  /** Inserts a new schedule; null when the id exists (the caller replaces it instead). */
  insert(spec: ScheduleSpec, nowMs: number): Schedule | null {
    const row = this.stmt.insert.get(scheduleParams(spec, nowMs));
    return row ? rowToSchedule(row) : null;
  }

  /** Replaces an existing schedule's definition, keeping its progress. */
  replace(spec: ScheduleSpec, nowMs: number): void {
    this.stmt.replace.run(scheduleParams(spec, nowMs));
  }

  get(id: string): Schedule | null {
    const row = this.stmt.get.get({ id });
    return row ? rowToSchedule(row) : null;
  }

  /** A schedule that must exist (read back inside the transaction that wrote it). */
  mustGet(id: string): Schedule {
    const schedule = this.get(id);
    if (!schedule) throw new Error(`schedule ${id} vanished inside its own transaction`);
    return schedule;
  }

  /** A keyset page by id. */
  list(afterId: string | undefined, paused: boolean | undefined, limit: number): Schedule[] {
    const rows = this.stmt.list.all({
      after_id: afterId ?? '',
      paused: paused === undefined ? null : paused ? 1 : 0,
      limit,
    });
    return rows.map(rowToSchedule);
  }

  setPaused(id: string, paused: boolean, nowMs: number): void {
    this.stmt.setPaused.run({ id, paused: paused ? 1 : 0, now: nowMs });
  }

  /** Deletes the schedule row; false when there was none. */
  delete(id: string): boolean {
    return this.stmt.delete.run({ id }).changes > 0;
  }

  /** Deletes the schedule's runs that never started. */
  deleteUnstartedRuns(id: string): void {
    this.stmt.deleteUnstartedRuns.run({ id });
  }

  /**
   * Inserts planned runs (a slot that has a job already is skipped by the unique index) and moves
   * each schedule's progress columns. Returns the earliest inserted run time, for the wake-up
   * after commit.
   */
  apply(advances: readonly ScheduleAdvance[], nowMs: number): number | null {
    let earliestMs: number | null = null;
    for (const advance of advances) {
      for (const run of advance.runs) {
        const inserted = this.stmt.insertRun.get({
          id: advance.scheduleId,
          slot: run.slot.getTime(),
          run_at: run.runAt.getTime(),
          now: nowMs,
        });
        if (inserted && (earliestMs === null || inserted.run_at < earliestMs)) earliestMs = inserted.run_at;
      }
      this.stmt.advance.run({
        id: advance.scheduleId,
        last_slot_at: advance.lastSlotAt?.getTime() ?? null,
        next_slot_at: advance.nextSlotAt?.getTime() ?? null,
        next_run_at: advance.nextRunAt?.getTime() ?? null,
        now: nowMs,
      });
    }
    return earliestMs;
  }

  /** Active schedules whose latest run is no longer live, up to `limit`. */
  broken(limit: number): Schedule[] {
    return this.stmt.broken.all({ limit }).map(rowToSchedule);
  }

  queuePause(name: string, nowMs: number): QueueState {
    return rowToQueueState(this.stmt.queuePause.get({ name, now: nowMs }) as QueueRow);
  }

  queueResume(name: string): QueueState {
    return rowToQueueState(this.stmt.queueResume.get({ name }) as QueueRow);
  }

  queueList(): QueueState[] {
    return this.stmt.queueList.all().map(rowToQueueState);
  }
}
