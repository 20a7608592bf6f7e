/**
 * The Store contract: the only way the rest of Docket touches a database.
 *
 * Invariants every implementation keeps (the conformance suite checks them on each store):
 * - Time: every "is it due?" and "is the lease live?" comparison uses the database's clock. Each
 *   time-dependent call accepts an optional pinned `now` for tests and simulation; without it the
 *   SQL reads the database clock (`coalesce($now, now())`). No worker clock decides anything.
 * - Claiming never deletes: it leases the row (lease_until, lease_owner), increments the fencing
 *   token and the attempt count, in one short statement, holding no lock after it returns.
 * - A job is claimable when it is live and `run_at <= now` and it holds no unexpired lease.
 *   A lapsed lease therefore makes the job due again, with no separate recovery step.
 * - Heartbeat, complete, fail and release take the token from the claim; a token that is not the
 *   job's current one (or a job no longer running) changes nothing and answers stale/null.
 *   "The lease is no longer yours" is a value, never an exception.
 * - Completion is idempotent for its own claim: completing a job that is already `done` under the
 *   same token changes nothing and answers `done` (the earlier call committed and only its answer
 *   was lost, RELIABILITY.md fault class 5); any other token, or a job cancelled, parked, pending
 *   or pruned, still answers `stale`. The one exception is a completion inside a caller's
 *   transaction (below): there only the running → done transition itself answers `done`.
 * - Attempts are counted at claim. A due job whose attempts already reached maxAttempts (its last
 *   lease lapsed without a result) is parked by the claim instead of being handed out.
 * - Every write is committed before the call resolves (an id returned is a durable job), except a
 *   write the caller put inside its own transaction.
 * - Caller transactions (only where `capabilities.callerTransactions`): `jobSubmit` and
 *   `jobComplete` accept `transaction`, the caller's open transaction (PostgreSQL: a `pg` client
 *   after BEGIN). The write runs in it and takes effect exactly when the caller commits: a
 *   rollback leaves no job, or leaves the job running under the same lease. Wake-ups for such a
 *   submit are delivered at commit (PostgreSQL NOTIFY is transactional), never for a rollback.
 *   A completion in a transaction answers `done` only when it moved the job from running to done
 *   itself, so the caller's own writes commit with exactly one accepted completion; an already
 *   done job answers `stale` there. A store without the capability throws ConfigurationError
 *   when `transaction` is given, writing nothing.
 * - Policy (backoff delay, whether to park after a failure) is decided by the caller in pure
 *   TypeScript (`retry/`); the store applies the decision.
 * - Recurring schedules: the one exception to "no policy in the store". When a claim hands out a
 *   schedule's latest run, the store plans the next run (`planScheduleRuns` from `schedule/`, with
 *   the database's now) and inserts it in the claim's own transaction, so a crash can never leave
 *   a claimed run without its successor. At most one job exists per (schedule, slot), enforced by
 *   a unique key; a repeated plan inserts nothing.
 * - Paused queues: claims (and next-run-at) skip them; their jobs stay where they are.
 */
import type { AttemptError, ClaimedJob, Job, JobState } from '../job/job.js';
import type { JobSpec } from '../job/job-spec.js';
import type { RetryDecision } from '../retry/backoff.js';
import type { Schedule, ScheduleSpec } from '../schedule/schedule.js';

/** What a store can do, as data; callers branch on these, never on the store's type. */
export interface StoreCapabilities {
  /** Other processes' submits wake this one (PostgreSQL LISTEN/NOTIFY). */
  listenNotify: boolean;
  /** Concurrent claimers skip rows another claimer holds instead of waiting (FOR UPDATE SKIP LOCKED). */
  skipLocked: boolean;
  /** Submit and complete can join a caller's own database transaction. */
  callerTransactions: boolean;
}

/** An optional pinned instant; omitted in production so the database clock decides. */
export interface AtTime {
  now?: Date | undefined;
}

/** The outcome of submitting one job. */
export interface SubmitResult {
  id: string;
  /** False when an idempotency key matched a live job and nothing was written. */
  created: boolean;
  /** The job's run time as stored (for an existing job, its current run time). */
  runAt: Date;
}

/**
 * The caller's own open database transaction, for stores with `capabilities.callerTransactions`
 * (PostgreSQL: a `pg.Client` or `pg.PoolClient` after BEGIN, never a pool). Typed `unknown` so
 * the contract does not depend on one driver; each store checks what it is given.
 */
export interface InCallerTransaction {
  transaction?: unknown;
}

export interface JobSubmitParams extends AtTime, InCallerTransaction {
  jobs: readonly JobSpec[];
}

export interface JobClaimParams extends AtTime {
  /** Identifies the claiming worker; stored as lease_owner. */
  owner: string;
  /** At most this many jobs (0 returns nothing and writes nothing). */
  limit: number;
  /** Lease length; the lease ends at now + leaseMs. */
  leaseMs: number;
  /** Only these queues; all queues when omitted. */
  queues?: readonly string[] | undefined;
}

/** A fenced reference to a claimed job: its id and the token of the claim. */
export interface JobLease {
  id: string;
  token: number;
}

export interface JobHeartbeatParams extends AtTime, JobLease {
  leaseMs: number;
}

export interface JobHeartbeatManyParams extends AtTime {
  leases: readonly JobLease[];
  leaseMs: number;
}

export interface JobCompleteParams extends AtTime, JobLease, InCallerTransaction {}

export interface JobCompleteManyParams extends AtTime {
  leases: readonly JobLease[];
}

/** `done`: the completion was accepted and the job can never run again. `stale`: refused. */
export type CompleteOutcome = 'done' | 'stale';

export interface JobFailParams extends AtTime, JobLease {
  error: Pick<AttemptError, 'message' | 'kind' | 'detail'>;
  /** Decided by retry/backoff.ts from the claim's attempts and the job's policy. */
  decision: RetryDecision;
}

export type FailOutcome = { outcome: 'retry'; runAt: Date } | { outcome: 'parked' } | { outcome: 'stale' };

export interface JobReleaseParams extends AtTime, JobLease {}

export interface JobReleaseByOwnerParams extends AtTime {
  /** The lease owner a claim recorded; each claim of a worker uses its own. */
  owner: string;
}

/** `released`: due again at once, its attempt given back. `stale`: the lease was not ours. */
export type ReleaseOutcome = 'released' | 'stale';

export interface JobCancelParams extends AtTime {
  id: string;
}

export type CancelOutcome = 'cancelled' | 'not_found' | 'already_finished';

export interface JobListParams {
  /** Only jobs in these states; all states when omitted. `dead` reads the dead-letter table. */
  states?: readonly JobState[] | undefined;
  queue?: string | undefined;
  kind?: string | undefined;
  /** Page size; default 100, at most 1000. */
  limit?: number | undefined;
  /** Keyset paging: only ids greater than this (ids compare numerically). */
  afterId?: string | undefined;
}

export interface DeadLetterListParams {
  queue?: string | undefined;
  kind?: string | undefined;
  limit?: number | undefined;
  afterId?: string | undefined;
}

export interface DeadLetterRetryParams extends AtTime {
  id: string;
}

export interface DeadLetterPurgeParams {
  /** Purge these ids; with neither field, nothing is purged. */
  ids?: readonly string[] | undefined;
  /** Purge every dead job parked before this instant. */
  parkedBefore?: Date | undefined;
}

export interface JobPruneParams {
  /** Deletes done and cancelled records that finished before this instant. */
  finishedBefore: Date;
}

export interface NextRunAtParams extends AtTime {
  queues?: readonly string[] | undefined;
}

/** Job counts by queue and state, for dashboards and metrics. */
export interface QueueStats {
  queue: string;
  /**
   * Present (and true) only while the queue is paused: claims skip it and its jobs wait. Absent
   * rather than false so counts-only consumers and snapshots stay unchanged for unpaused queues.
   */
  paused?: true;
  /** Live and waiting for its run time. */
  scheduled: number;
  /** Live, due now and not leased (includes lapsed leases). */
  available: number;
  /** Live and holding an unexpired lease. */
  running: number;
  done: number;
  cancelled: number;
  dead: number;
}

/** Parameters of {@link Store.scheduleUpsert}. */
export interface ScheduleUpsertParams extends AtTime {
  /** Already validated by `normalizeScheduleSpec`; the store checks the fields it plans with again. */
  spec: ScheduleSpec;
}

/** What {@link Store.scheduleUpsert} did. */
export interface ScheduleUpsertResult {
  schedule: Schedule;
  /** True when the id was new; false when an existing schedule was replaced. */
  created: boolean;
}

/** Parameters of {@link Store.scheduleList}. */
export interface ScheduleListParams {
  /** Page size; default 100, at most 1000. */
  limit?: number | undefined;
  /** Keyset paging: only ids after this one (ids compare as text). */
  afterId?: string | undefined;
  /** Only paused (true) or only active (false) schedules; all when omitted. */
  paused?: boolean | undefined;
}

/** Names one schedule, at an optional pinned instant. */
export interface ScheduleIdParams extends AtTime {
  id: string;
}

/** Parameters of {@link Store.scheduleRepair}. */
export interface ScheduleRepairParams extends AtTime {
  /** At most this many schedules repaired per call (default 100), so one sweep stays short. */
  limit?: number | undefined;
}

/** Parameters of {@link Store.queuePause} and {@link Store.queueResume}. */
export interface QueueNameParams extends AtTime {
  name: string;
}

/** A queue's pause state. */
export interface QueueState {
  name: string;
  /** True while claims skip this queue. */
  paused: boolean;
  /** When it was paused (database time); null while not paused. */
  pausedAt: Date | null;
}

/**
 * A hint that jobs may be due sooner than a worker expects. `runAt` is the earliest run time
 * among the jobs behind the hint, or null for "something changed, look again" (for example after
 * a reconnect, when notifications sent in between were lost).
 */
export interface WakeUp {
  runAt: Date | null;
}

/** The persistence contract; see the file header for the invariants. */
export interface Store {
  readonly capabilities: StoreCapabilities;

  /** The database's current time: the only clock that decides due times and leases. */
  now(): Promise<Date>;

  /**
   * Writes jobs (one round trip for the batch), committed before it resolves; results in input
   * order. With `transaction`, written inside the caller's transaction instead (see the header).
   */
  jobSubmit(params: JobSubmitParams): Promise<SubmitResult[]>;

  /** Leases up to `limit` claimable jobs, by priority (lower first), then run_at, then id. */
  jobClaim(params: JobClaimParams): Promise<ClaimedJob[]>;

  /** Extends the lease to now + leaseMs; null when the token is stale or the lease already lapsed. */
  jobHeartbeat(params: JobHeartbeatParams): Promise<Date | null>;

  /** {@link jobHeartbeat} for many leases in one round trip; results in input order. */
  jobHeartbeatMany(params: JobHeartbeatManyParams): Promise<(Date | null)[]>;

  /**
   * Marks the job done if the token is current; a done job can never run again. Idempotent: a
   * job already done under this token answers `done`. With `transaction`, the completion joins
   * the caller's transaction and answers `done` only for the running → done transition.
   */
  jobComplete(params: JobCompleteParams): Promise<CompleteOutcome>;

  /** {@link jobComplete} for many leases in one round trip, each fenced by its own token (idempotent likewise). */
  jobCompleteMany(params: JobCompleteManyParams): Promise<CompleteOutcome[]>;

  /** Records the attempt's error and applies the decision: retry at now + delay, or park. */
  jobFail(params: JobFailParams): Promise<FailOutcome>;

  /** Gives a lease back (graceful shutdown): the job is due at once and the attempt is not counted. */
  jobRelease(params: JobReleaseParams): Promise<ReleaseOutcome>;

  /**
   * Gives back every lease still held under `owner`, exactly as {@link jobRelease} does; returns
   * how many. For a claim whose answer was lost (the connection dropped after it committed): its
   * worker never learned the tokens, so it releases by the claim's owner instead, and the lost
   * claim costs neither an attempt nor a lease's wait. Jobs claimed again since are not touched.
   */
  jobReleaseByOwner(params: JobReleaseByOwnerParams): Promise<number>;

  /** Cancels a live job; a running one loses its lease, so its next heartbeat aborts the handler. */
  jobCancel(params: JobCancelParams): Promise<CancelOutcome>;

  /** Any job by id, in any state, including parked ones; null when unknown or pruned. */
  jobGet(params: { id: string }): Promise<Job | null>;

  /** Jobs by state, queue and kind, ordered by id. */
  jobList(params: JobListParams): Promise<Job[]>;

  /** Deletes finished done/cancelled records older than the retention; returns how many. */
  jobPruneFinished(params: JobPruneParams): Promise<number>;

  /** The earliest instant at which a live job becomes claimable (now or later), or null if none. */
  jobNextRunAt(params: NextRunAtParams): Promise<Date | null>;

  /** Parked jobs, ordered by id. */
  deadLetterList(params: DeadLetterListParams): Promise<Job[]>;

  /**
   * Moves a parked job back to pending with fresh attempts, due now; id, token and errors kept.
   * A recurring run whose (schedule, slot) another job now holds drops its slot (keeping its
   * schedule id) instead of failing on the unique key.
   */
  deadLetterRetry(params: DeadLetterRetryParams): Promise<Job | null>;

  /** Deletes parked jobs; returns how many. */
  deadLetterPurge(params: DeadLetterPurgeParams): Promise<number>;

  /** Counts by queue and state, with each queue's pause state; paused queues appear even when empty. */
  queueStats(params?: AtTime): Promise<QueueStats[]>;

  /** Pauses a queue: claims skip it from now on, its jobs stay (nothing is lost). Idempotent. */
  queuePause(params: QueueNameParams): Promise<QueueState>;

  /** Resumes a queue: its due jobs are claimable at once, and listeners are woken. Idempotent. */
  queueResume(params: QueueNameParams): Promise<QueueState>;

  /** Every queue that was ever paused or resumed, with its state, ordered by name. */
  queueList(): Promise<QueueState[]>;

  /**
   * Creates or replaces a schedule in one transaction. Creating (or un-pausing, or changing cron,
   * time zone or jitter) deletes the schedule's pending runs that never started and enqueues the
   * next slot after now: nothing counts as missed. A replace that keeps the timing keeps the
   * pending run (the new job template applies from the next planned run). A paused spec enqueues
   * nothing. Throws a ValidationError naming the field, writing nothing, for a spec that could
   * not be planned (bad id, cron, time zone or jitter).
   */
  scheduleUpsert(params: ScheduleUpsertParams): Promise<ScheduleUpsertResult>;

  /** A schedule with its last and next slot and next run time; null when unknown. */
  scheduleGet(params: { id: string }): Promise<Schedule | null>;

  /** Schedules ordered by id (keyset paging on afterId), each with its next run time. */
  scheduleList(params: ScheduleListParams): Promise<Schedule[]>;

  /**
   * Pauses a schedule: it enqueues nothing more, and its pending runs that never started are
   * deleted (not cancelled, so their slots stay free); running ones and their retries finish.
   * Null when unknown; a paused schedule is returned unchanged.
   */
  schedulePause(params: ScheduleIdParams): Promise<Schedule | null>;

  /**
   * Resumes a paused schedule: enqueues the next slot after now. Slots that passed while it was
   * paused never run, whatever the misfire policy (pausing is deliberate, not a misfire). Null
   * when unknown; an active schedule is returned unchanged.
   */
  scheduleResume(params: ScheduleIdParams): Promise<Schedule | null>;

  /** Deletes a schedule and its pending runs that never started; running ones finish. False when unknown. */
  scheduleDelete(params: { id: string }): Promise<boolean>;

  /**
   * Re-links broken chains: every active schedule whose latest planned run is no longer live
   * (an operator cancelled it, or it was claimed while the schedule could not plan) is planned
   * again from its last slot, applying its misfire policy to the slots missed since. Returns how
   * many schedules got new runs. Called periodically by workers; cheap when nothing is broken.
   */
  scheduleRepair(params?: ScheduleRepairParams): Promise<number>;

  /**
   * Calls `listener` when jobs may have become due (a submit, a retry, a release), in this process
   * and, where `capabilities.listenNotify`, in others. Treat it as a hint: it can be lost, so
   * callers still poll. Resolves to an unsubscribe function.
   */
  subscribe(listener: (wakeUp: WakeUp) => void): Promise<() => Promise<void>>;

  /** Releases connections and handles; the store is unusable afterwards. */
  close(): Promise<void>;
}
