/**
 * The one place where PostgreSQL rows (snake_case, int8 as text, timestamptz as Date, jsonb
 * parsed) become Docket's records (camelCase), and where job ids become SQL parameters.
 */
import type { AttemptError, Job, JobState, JsonValue, RetryPolicy } from '../../job/job.js';
import { parseJobId } from '../store-params.js';

/** The columns of `jobs` (and, with `parked_at`, of `dead_jobs`), in table order. */
export const JOB_COLUMNS = [
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
  'started_at',
] as const;

/**
 * The SQL type of each column of `jobs`, as migrations.ts declares it, for statements whose result
 * columns must be spelled out (stored-statements.ts). test/store/postgres-stored-statements.test.ts
 * compares it with the table in the database.
 */
export const JOB_COLUMN_TYPES: { readonly [column in (typeof JOB_COLUMNS)[number]]: string } = {
  id: 'bigint',
  kind: 'text',
  queue: 'text',
  payload: 'jsonb',
  priority: 'smallint',
  state: 'text',
  run_at: 'timestamptz',
  lease_until: 'timestamptz',
  lease_owner: 'text',
  token: 'integer',
  attempts: 'integer',
  max_attempts: 'integer',
  retry_policy: 'jsonb',
  errors: 'jsonb',
  idempotency_key: 'text',
  timeout_ms: 'integer',
  schedule_id: 'text',
  schedule_slot: 'timestamptz',
  created_at: 'timestamptz',
  finished_at: 'timestamptz',
  started_at: 'timestamptz',
};

/**
 * The timestamptz columns of `jobs`. A claim answers them as epoch milliseconds (decimal text), because
 * pg parses a timestamptz with a regular expression per value: for a claim of 524 rows that was
 * 40 % of the client's CPU for the call, spent in the busiest loop of a worker.
 */
export const JOB_TIMESTAMP_COLUMNS = [
  'run_at',
  'lease_until',
  'schedule_slot',
  'created_at',
  'finished_at',
  'started_at',
] as const satisfies readonly (typeof JOB_COLUMNS)[number][];

type JobTimestampColumn = (typeof JOB_TIMESTAMP_COLUMNS)[number];

/** A job row with its timestamps as epoch milliseconds, in decimal text (sql-fragments.ts, epochMsText). */
export type EpochJobRow = Omit<JobRow, JobTimestampColumn> & { [column in JobTimestampColumn]: string | null };

/**
 * Converts an {@link EpochJobRow} to a {@link Job}. The Dates equal those pg would parse from the
 * timestamptz: both drop the microseconds toward negative infinity (floor in SQL; pg builds the
 * Date from whole milliseconds of the second).
 */
export function epochRowToJob(row: EpochJobRow): Job {
  const dated = row as unknown as Record<JobTimestampColumn, Date | null>;
  for (const column of JOB_TIMESTAMP_COLUMNS) {
    const epochMs = row[column];
    dated[column] = epochMs === null ? null : new Date(Number(epochMs));
  }
  return rowToJob(row as unknown as JobRow);
}

/** A jobs or dead_jobs row as pg returns it (int8 as string, timestamptz as Date, jsonb parsed). */
export interface JobRow {
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
  started_at: Date | null;
}

/** An errors entry as stored in jsonb: `at` is an ISO-8601 string. */
interface StoredAttemptError {
  attempt: number;
  at: string;
  message: string;
  kind: AttemptError['kind'];
  detail?: string;
  startedAt?: string;
  owner?: string;
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
      if (entry.startedAt !== undefined) error.startedAt = new Date(entry.startedAt);
      if (entry.owner !== undefined) error.owner = entry.owner;
      return error;
    }),
    idempotencyKey: row.idempotency_key,
    timeoutMs: row.timeout_ms,
    scheduleId: row.schedule_id,
    scheduleSlot: row.schedule_slot,
    createdAt: row.created_at,
    finishedAt: row.finished_at,
    startedAt: row.started_at ?? null,
  };
}

/**
 * A job id as a bigint parameter: the one job-id rule ({@link parseJobId}) as canonical decimal
 * text. Null for anything that cannot name a job, so callers answer not-found/stale instead of
 * letting PostgreSQL raise "invalid input syntax for type bigint".
 */
export function sqlJobId(id: string): string | null {
  const value = parseJobId(id);
  return value === null ? null : String(value);
}
