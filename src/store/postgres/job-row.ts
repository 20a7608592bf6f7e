/**
 * The one place where PostgreSQL rows (snake_case, int8 as text, timestamptz as Date, jsonb
 * parsed) become Docket's records (camelCase), and where job ids become SQL parameters.
 */
import type { AttemptError, ClaimedJob, Job, JobState, JsonValue, RetryPolicy } from '../../job/job.js';
import type { ClaimedRowValues } from '../claimed-row-values.js';
import { JOB_COLUMN_AT as AT, type JOB_COLUMNS } from '../job-columns.js';
import { parseJobId } from '../store-params.js';

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

/** An epoch-milliseconds text (or null) as a Date (or null). */
function epochDate(value: unknown): Date | null {
  return value === null ? null : new Date(Number(value));
}

/**
 * A claimed row, read in pg's array mode (`rowMode: 'array'`), as a {@link ClaimedJob}: the values
 * in {@link JOB_COLUMNS} order, in the forms claimedColumnsOf (sql-fragments.ts) gives them, each
 * already parsed by pg's type parsers. Put back here: the state and owner the claim set ('running'
 * and `owner`, the claim's owner parameter), the retry policy (JSON text, parsed by `repeated`, one
 * per claim, once per run of equal texts) and an empty errors list (NULL). The timestamps come as
 * epoch-milliseconds text, read by `repeated` into read-only Dates shared by runs of rows with
 * equal values; the Dates equal those pg would parse from the timestamptz: both drop the
 * microseconds toward negative infinity (floor in SQL; pg builds the Date from whole milliseconds
 * of the second). The columns a claim sends once per run (CLAIM_CARRIED_COLUMNS) are NULL where
 * they equal the row before's, and `repeated` carries the last one sent forward: `repeated` must be
 * the claim's own, read in the claim's row order.
 * Array mode spares the claim's hottest loop a keyed 22-property object per row that was then
 * converted again. Keep it field for field with {@link rowToJob}: the conformance suite checks that
 * a claimed job equals the same job read back.
 */
export function claimedValuesToJob(values: readonly unknown[], owner: string, repeated: ClaimedRowValues): ClaimedJob {
  const errors = values[AT.errors] as StoredAttemptError[] | null;
  const scheduleSlot = values[AT.schedule_slot] as string | null;
  const startedAt = repeated.carried(values, AT.started_at) as string | null; // the claim sets it; null as before if not
  return {
    id: String(values[AT.id]),
    kind: repeated.carried(values, AT.kind) as string,
    queue: repeated.carried(values, AT.queue) as string,
    payload: values[AT.payload] as JsonValue,
    priority: repeated.carried(values, AT.priority) as number,
    state: 'running',
    runAt: repeated.instant('runAt', repeated.carried(values, AT.run_at) as string),
    leaseUntil: repeated.instant('leaseUntil', repeated.carried(values, AT.lease_until) as string),
    leaseOwner: owner,
    token: repeated.carried(values, AT.token) as number,
    attempts: repeated.carried(values, AT.attempts) as number,
    maxAttempts: repeated.carried(values, AT.max_attempts) as number,
    retryPolicy: repeated.policy(repeated.carried(values, AT.retry_policy) as string),
    errors: errors === null ? [] : attemptErrors(errors),
    idempotencyKey: values[AT.idempotency_key] as string | null,
    timeoutMs: values[AT.timeout_ms] as number | null,
    scheduleId: values[AT.schedule_id] as string | null,
    scheduleSlot: scheduleSlot === null ? null : repeated.instant('scheduleSlot', scheduleSlot),
    createdAt: repeated.instant('createdAt', repeated.carried(values, AT.created_at) as string),
    finishedAt: epochDate(values[AT.finished_at]),
    startedAt: startedAt === null ? null : repeated.instant('startedAt', startedAt),
  };
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
    errors: attemptErrors(row.errors),
    idempotencyKey: row.idempotency_key,
    timeoutMs: row.timeout_ms,
    scheduleId: row.schedule_id,
    scheduleSlot: row.schedule_slot,
    createdAt: row.created_at,
    finishedAt: row.finished_at,
    startedAt: row.started_at ?? null,
  };
}

/** A row's stored errors entries as {@link AttemptError}s. */
function attemptErrors(entries: readonly StoredAttemptError[]): AttemptError[] {
  // A job's first claim has none: skip map's callback machinery for the common case.
  if (entries.length === 0) return [];
  return entries.map((entry) => {
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
  });
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
