/**
 * The one place where SQLite rows (snake_case, epoch milliseconds, JSON text) become Docket's
 * records (camelCase, Dates, parsed values), and back.
 */
import type { AttemptError, ClaimedJob, Job, JobState, JsonValue, RetryPolicy } from '../../job/job.js';
import type { ClaimedRowValues } from '../claimed-row-values.js';
import { JOB_COLUMN_AT as AT, type JobColumn } from '../job-columns.js';

/** A row of `jobs` or `dead_jobs` as better-sqlite3 returns it. */
export interface JobRow extends Record<JobColumn, unknown> {
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

/** The stored `errors` JSON array as attempt errors (most claimed jobs have none: no parse then). */
function parseAttemptErrors(text: string): AttemptError[] {
  return text === '[]' ? [] : (JSON.parse(text) as StoredAttemptError[]).map(toAttemptError);
}

/** Epoch milliseconds (or null) as a Date (or null). */
function epochDate(value: number | null): Date | null {
  return value === null ? null : new Date(value);
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
    leaseUntil: epochDate(row.lease_until),
    leaseOwner: row.lease_owner,
    token: row.token,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    retryPolicy: JSON.parse(row.retry_policy) as RetryPolicy,
    errors: parseAttemptErrors(row.errors),
    idempotencyKey: row.idempotency_key,
    timeoutMs: row.timeout_ms,
    scheduleId: row.schedule_id,
    scheduleSlot: epochDate(row.schedule_slot),
    createdAt: new Date(row.created_at),
    finishedAt: epochDate(row.finished_at),
    startedAt: epochDate(row.started_at ?? null),
  };
}

/**
 * {@link rowToJob} for a claimed row, read as an array in the claim's column order (JOB_COLUMNS,
 * ../job-columns.ts, in the forms claim-queries.ts CLAIMED_COLUMNS gives them): the columns the
 * claim set alike in every row come from `lease`, and a NULL errors list is the empty one.
 * Reading a claim's 500 rows back cost 8.0 µs a row over the bare UPDATE as keyed objects (one
 * object per row from better-sqlite3) and 4.8 µs as arrays (bench/sqlite-claim-costs.ts). Keep it field for
 * field with rowToJob: the conformance suite checks that a claimed job equals the job read back.
 * `repeated` (one per claim) parses the retry policy once per run of rows with equal texts and
 * gives the instants as read-only Dates, one per run of rows with equal values.
 */
export function claimedValuesToJob(
  values: readonly unknown[],
  lease: { nowMs: number; leaseUntilMs: number; owner: string },
  repeated: ClaimedRowValues,
): ClaimedJob {
  const errors = values[AT.errors] as string | null;
  const scheduleSlot = values[AT.schedule_slot] as number | null;
  return {
    id: String(values[AT.id]),
    kind: values[AT.kind] as string,
    queue: values[AT.queue] as string,
    payload: JSON.parse(values[AT.payload] as string) as JsonValue,
    priority: values[AT.priority] as number,
    state: 'running',
    runAt: repeated.instant('runAt', values[AT.run_at] as number),
    leaseUntil: repeated.instant('leaseUntil', lease.leaseUntilMs),
    leaseOwner: lease.owner,
    token: values[AT.token] as number,
    attempts: values[AT.attempts] as number,
    maxAttempts: values[AT.max_attempts] as number,
    retryPolicy: repeated.policy(values[AT.retry_policy] as string),
    errors: errors === null ? [] : parseAttemptErrors(errors),
    idempotencyKey: values[AT.idempotency_key] as string | null,
    timeoutMs: values[AT.timeout_ms] as number | null,
    scheduleId: values[AT.schedule_id] as string | null,
    scheduleSlot: scheduleSlot === null ? null : repeated.instant('scheduleSlot', scheduleSlot),
    createdAt: repeated.instant('createdAt', values[AT.created_at] as number),
    finishedAt: null,
    startedAt: repeated.instant('startedAt', lease.nowMs),
  };
}
