/**
 * The one place a schedules row becomes a {@link Schedule}, for both stores. Each store first
 * decodes its dialect's column types (PostgreSQL: int8 as text, jsonb parsed; SQLite: epoch
 * milliseconds, JSON text, 0/1) into a {@link DecodedScheduleRow}; the field mapping is here.
 */
import type { JsonValue, RetryPolicy } from '../job/job.js';
import type { JitterMode } from '../schedule/jitter.js';
import type { MisfirePolicyName, Schedule } from '../schedule/schedule.js';

/** A schedules row with its columns decoded to JavaScript values (names as in SQL). */
export interface DecodedScheduleRow {
  id: string;
  cron: string;
  time_zone: string;
  kind: string;
  queue: string;
  /** The payload as JSON text, exactly as submitted. */
  payload_json: string;
  priority: number;
  max_attempts: number;
  retry_policy: RetryPolicy;
  timeout_ms: number | null;
  jitter_ms: number;
  jitter_mode: JitterMode;
  misfire_policy: MisfirePolicyName;
  catch_up_window_ms: number;
  max_catch_up_runs: number;
  paused: boolean;
  last_slot_at: Date | null;
  next_slot_at: Date | null;
  next_run_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** Converts a decoded schedules row to a {@link Schedule}: snake_case becomes camelCase. */
export function scheduleOfRow(row: DecodedScheduleRow): Schedule {
  return {
    id: row.id,
    cron: row.cron,
    timeZone: row.time_zone,
    job: {
      kind: row.kind,
      queue: row.queue,
      payload: JSON.parse(row.payload_json) as JsonValue,
      priority: row.priority,
      maxAttempts: row.max_attempts,
      retry: row.retry_policy,
      timeoutMs: row.timeout_ms,
    },
    jitterMs: row.jitter_ms,
    jitterMode: row.jitter_mode,
    misfire: {
      policy: row.misfire_policy,
      catchUpWindowMs: row.catch_up_window_ms,
      maxCatchUpRuns: row.max_catch_up_runs,
    },
    paused: row.paused,
    lastSlotAt: row.last_slot_at,
    nextSlotAt: row.next_slot_at,
    nextRunAt: row.next_run_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
