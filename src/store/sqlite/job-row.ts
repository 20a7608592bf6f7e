/**
 * The one place where SQLite rows (snake_case, epoch milliseconds, JSON text) become Docket's
 * records (camelCase, Dates, parsed values), and back.
 */
import type { AttemptError, Job, JobState, JsonValue, RetryPolicy } from '../../job/job.js';

/** A row of `jobs` or `dead_jobs` as better-sqlite3 returns it. */
export interface JobRow {
  id: number;
  kind: string;
  queue: string;
  payload: string;
  priority: number;
  state: string;
  run_at: number;
  lease_until: number | null;
  lease_owner: string | null;
  token: number;
  attempts: number;
  max_attempts: number;
  retry_policy: string;
  errors: string;
  idempotency_key: string | null;
  timeout_ms: number | null;
  schedule_id: string | null;
  schedule_slot: number | null;
  created_at: number;
  finished_at: number | null;
  started_at: number | null;
}

/** An attempt error as stored inside the `errors` JSON array (`at` in epoch milliseconds). */
interface StoredAttemptError {
  attempt: number;
  at: number;
  kind: AttemptError['kind'];
  message: string;
  detail?: string | null;
  /** The attempt's claim start (epoch ms) and owner; null or absent on entries written before they were recorded. */
  startedAt?: number | null;
  owner?: string | null;
}

/** Serialises one attempt error for appending to a row's `errors` array. */
export function attemptErrorJson(error: {
  attempt: number;
  atMs: number;
  kind: AttemptError['kind'];
  message: string;
  detail?: string | undefined;
}): string {
  const stored: StoredAttemptError = {
    attempt: error.attempt,
    at: error.atMs,
    kind: error.kind,
    message: error.message,
  };
  if (error.detail !== undefined) stored.detail = error.detail;
  return JSON.stringify(stored);
}

function toAttemptError(stored: StoredAttemptError): AttemptError {
  const error: AttemptError = {
    attempt: stored.attempt,
    at: new Date(stored.at),
    message: stored.message,
    kind: stored.kind,
  };
  if (stored.detail !== undefined && stored.detail !== null) error.detail = stored.detail;
  if (typeof stored.startedAt === 'number') error.startedAt = new Date(stored.startedAt);
  if (typeof stored.owner === 'string') error.owner = stored.owner;
  return error;
}

/** Converts a stored row to a {@link Job}. */
export function rowToJob(row: JobRow): Job {
  return {
    id: String(row.id),
    kind: row.kind,
    queue: row.queue,
    payload: JSON.parse(row.payload) as JsonValue,
    priority: row.priority,
    state: row.state as JobState,
    runAt: new Date(row.run_at),
    leaseUntil: row.lease_until === null ? null : new Date(row.lease_until),
    leaseOwner: row.lease_owner,
    token: row.token,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    retryPolicy: JSON.parse(row.retry_policy) as RetryPolicy,
    errors: (JSON.parse(row.errors) as StoredAttemptError[]).map(toAttemptError),
    idempotencyKey: row.idempotency_key,
    timeoutMs: row.timeout_ms,
    scheduleId: row.schedule_id,
    scheduleSlot: row.schedule_slot === null ? null : new Date(row.schedule_slot),
    createdAt: new Date(row.created_at),
    finishedAt: row.finished_at === null ? null : new Date(row.finished_at),
    startedAt: row.started_at === null || row.started_at === undefined ? null : new Date(row.started_at),
  };
}
