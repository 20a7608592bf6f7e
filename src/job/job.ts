/**
 * Job records and their states: the vocabulary every layer shares.
 *
 * A job lives in one of five states. `pending` and `running` are live (the row is in the jobs
 * table and can still be claimed once due); `done` and `cancelled` are finished records kept for
 * the retention period; `dead` means parked in the dead-letter table for a human.
 *
 * Whether a live job is claimable is decided by time, not by state alone: a `running` job whose
 * lease has lapsed is due again, exactly as in the reference model of docs/design.md. See
 * docs/architecture.md for the state machine.
 */

/** Every state a job can be in; the SQL CHECK constraints list exactly these. */
export const JOB_STATES = ['pending', 'running', 'done', 'cancelled', 'dead'] as const;

/** One of {@link JOB_STATES}. */
export type JobState = (typeof JOB_STATES)[number];

/** States in which a job can still run. */
export const LIVE_JOB_STATES = ['pending', 'running'] as const satisfies readonly JobState[];

/** States a job never leaves (except `dead`, which an operator may retry). */
export const FINISHED_JOB_STATES = ['done', 'cancelled', 'dead'] as const satisfies readonly JobState[];

/** Any JSON value: what a payload may hold after `JSON.stringify` round-trips it. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Why one attempt ended without success; kept on the job for every attempt. */
export interface AttemptError {
  /** The attempt number (1-based) this error ended. */
  attempt: number;
  /** When it was recorded, by the database clock. */
  at: Date;
  /** Short human-readable reason. */
  message: string;
  /** `thrown` by the handler, `lease_expired` when the worker vanished, `timeout`, `released`. */
  kind: 'thrown' | 'lease_expired' | 'timeout';
  /** Stack trace or extra detail, when the handler gave one. */
  detail?: string | undefined;
  /** When this attempt's claim started (database clock); absent on entries written before it was recorded. */
  startedAt?: Date | undefined;
  /** The lease owner of this attempt's claim; absent on entries written before it was recorded. */
  owner?: string | undefined;
}

/** The exponential backoff settings stored with each job, so any worker applies the same policy. */
export interface RetryPolicy {
  /** Delay before retry n is `baseDelayMs * factor ** n`, before the cap and jitter. */
  baseDelayMs: number;
  /** Growth per attempt; 2 reproduces the 2, 4, 8, 16 s of docs/design.md. */
  factor: number;
  /** The delay never exceeds this, before jitter. */
  maxDelayMs: number;
  /**
   * Fraction of the delay added at random: the retry lands uniformly in
   * `[delay, delay * (1 + jitterRatio))`. 0 turns jitter off. Never subtracts, so a retry is
   * never earlier than its nominal delay.
   */
  jitterRatio: number;
}

/** A job as stored, in any state. Times are database times. */
export interface Job {
  id: string;
  kind: string;
  queue: string;
  payload: JsonValue;
  priority: number;
  state: JobState;
  /** The earliest instant the job may start (the retry time after a failure). */
  runAt: Date;
  /** The current lease's end while running; null otherwise. */
  leaseUntil: Date | null;
  /** The worker id holding (or last holding) the lease. */
  leaseOwner: string | null;
  /** Fencing token: incremented by every claim, never reset. */
  token: number;
  /** Claims counted against maxAttempts (reset by a dead-letter retry). */
  attempts: number;
  maxAttempts: number;
  retryPolicy: RetryPolicy;
  /** One entry for every attempt that did not succeed, oldest first. */
  errors: AttemptError[];
  idempotencyKey: string | null;
  /** How long one attempt may run before its signal aborts and it counts as failed; null = no limit. */
  timeoutMs: number | null;
  /** The recurring schedule that produced this job, and the slot it fills; null for one-off jobs. */
  scheduleId: string | null;
  scheduleSlot: Date | null;
  createdAt: Date;
  /** When the latest claim started (database clock); null before the first claim. Both stores always set it. */
  startedAt?: Date | null | undefined;
  /** When the job reached done, cancelled or dead; null while live. */
  finishedAt: Date | null;
}

/** A job handed to a worker by a claim: the row plus what the worker needs to act on it. */
export interface ClaimedJob extends Job {
  state: 'running';
  leaseUntil: Date;
  leaseOwner: string;
}
