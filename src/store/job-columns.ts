/**
 * The columns of a job row, the same in both stores' `jobs` tables (and, with `parked_at`, in
 * `dead_jobs`), in table order, and each one's position in a row read as an array: a claim reads
 * its rows that way on both stores (claimedValuesToJob in postgres/job-row.ts and in
 * sqlite/job-row.ts), because building a keyed object per row was a large part of a claim's cost.
 */
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

/** A job column's name. */
export type JobColumn = (typeof JOB_COLUMNS)[number];

/** Each job column's position in a row read as an array in {@link JOB_COLUMNS} order. */
export const JOB_COLUMN_AT: { readonly [column in JobColumn]: number } = Object.fromEntries(
  JOB_COLUMNS.map((column, index) => [column, index]),
) as { [column in JobColumn]: number };
