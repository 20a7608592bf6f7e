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
 * - Heartbeat, complete, fail and release take the token and the lease owner from the claim; a
 *   token or owner that is not the job's current one (or a job no longer running) changes nothing
 *   and answers stale/null. Claims record an owner unique to the claim (random per worker process,
 *   numbered per claim), so a token number re-issued by a promoted standby that never saw the
 *   first claim validates no write of the first holder.
 *   "The lease is no longer yours" is a value, never an exception.
 * - Completion is idempotent for its own claim: completing a job that is already `done` under the
 *   same token changes nothing and answers `done` (the earlier call committed and only its answer
 *   was lost, docs/reliability.md, fault class 5); any other token, or a job cancelled, parked, pending
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
 *
 * Stability: this contract is experimental. `Store` and its `*Params` types are exported so a
 * custom runtime can call a store directly (docs/library.md, "The Store contract"), but methods
 * and fields may change between minor versions while Docket is 0.x; the `Docket` API is the
 * stable surface.
 */

import type { AttemptError, ClaimedJob, Job } from '../job/job.js';
import type { BulkAction, JobFilter, ListOrder } from '../job/job-filter.js';
import type { JobSpec } from '../job/job-spec.js';
import type { RetryDecision } from '../retry/backoff.js';
import type { Schedule, ScheduleSpec } from '../schedule/schedule.js';

/** What a store can do, as data; callers branch on these, never on the store's type. */
export interface StoreCapabilities {
  /**
   * Other processes' submits, retries and releases wake this one (PostgreSQL LISTEN/NOTIFY), so
   * workers may poll seldom. False on SQLite, which hears other processes' submits only (by
   * watching the file) and leaves their retries and releases to a short poll.
   */
  listenNotify: boolean;
  /** Concurrent claimers skip rows another claimer holds instead of waiting (FOR UPDATE SKIP LOCKED). */
  skipLocked: boolean;
  /** Submit and complete can join a caller's own database transaction. */
  callerTransactions: boolean;
  /**
   * Job ids can be reserved before their submit ({@link Store.jobReserveIds}) and connection
   * losses are recognised ({@link Store.isConnectionLoss}), so a submit whose connection dropped
   * (its commit unknown) can be sent again under the same ids without ever writing a job twice.
   * False for an embedded store (SQLite), whose writes never cross a connection.
   */
  reservableJobIds: boolean;
  /**
   * The database runs inside this process (SQLite): every statement runs on the calling thread,
   * so a second claim in flight cannot overlap the first (nor the handlers), and each
   * transaction's fixed cost (BEGIN IMMEDIATE, the commit's WAL writes) is paid on that thread in
   * full. The worker's automatic defaults then lease the whole room in one claim and write
   * completions 1,000 at a time (src/worker/worker-options.ts; decision 0016).
   */
  inProcess: boolean;
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

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobSubmitParams extends AtTime, InCallerTransaction {
  jobs: readonly JobSpec[];
  /**
   * The id of each job (same length as `jobs`), reserved by {@link Store.jobReserveIds}; only on a
   * store with `capabilities.reservableJobIds` (others throw ConfigurationError). A job already
   * stored under its id is answered as this call's own (`created` as when it was written) and
   * never written again: the retry of a submit whose commit was ambiguous. Left out, the store
   * draws the ids itself.
   */
  ids?: readonly string[] | undefined;
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobReserveIdsParams {
  /** How many ids, 1 to 100 000. */
  count: number;
}

/**
 * Which kinds a claim (or a next-run-at query) may hand out. Kind-aware claims are how routing is
 * a guarantee: a worker names the kinds it has handlers for, so a job of any other kind stays
 * pending (visible as unhandled) instead of being claimed and failed. Both fields are filters
 * inside the claim statement, served by the pending index, never a post-filter: the claim walks
 * the distinct pending (queue, kind, priority) triples and drops disallowed ones before reading
 * any of their rows (docs/decisions/0006-kind-aware-claims.md). Lapsed leases are re-claimed
 * only for allowed kinds too. Parking a lapsed job whose attempts are used up is kind-agnostic:
 * it hands nothing out, and the workers of that kind may all be gone.
 */
export interface KindFilter {
  /** Only jobs of these kinds; every kind when omitted (a catch-all worker). An empty array claims nothing. */
  kinds?: readonly string[] | undefined;
  /** Never jobs of these kinds (remote workers never get built-in kinds); applied after `kinds`. */
  excludeKinds?: readonly string[] | undefined;
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobClaimParams extends AtTime, KindFilter {
  /** Identifies the claiming worker; stored as lease_owner. */
  owner: string;
  /** At most this many jobs (0 returns nothing and writes nothing). */
  limit: number;
  /** Lease length; the lease ends at now + leaseMs. */
  leaseMs: number;
  /** Only these queues; all queues when omitted. */
  queues?: readonly string[] | undefined;
  /**
   * Whether this claim also takes over lapsed leases and parks the lapsed jobs whose attempts are
   * used up (default true). Finding them reads the running jobs' index from its head, where every
   * job that finished since the last VACUUM leaves a dead entry on PostgreSQL: a busy worker
   * therefore asks for them only every so often (LAPSED_SEARCH_INTERVAL_MS, src/worker/lapsed-search-pacer.ts), not in
   * each of its hundreds of claims a second. False claims due pending jobs only.
   */
  includeLapsed?: boolean | undefined;
}

/**
 * A fenced reference to a claimed job: its id, the token of the claim and the claim's own lease
 * owner. A write is accepted only when the token and the owner both match the row. The token
 * alone is not enough once a database can forget its last commits: a standby promoted without the
 * primary's last WAL (asynchronous replication) re-issues token numbers whose first issue it never
 * saw, but not the random owner of a claim it never saw, so the old holder's write finds no match.
 * A {@link ClaimedJob} is a JobLease as it stands (it carries `leaseOwner`).
 */
export interface JobLease {
  id: string;
  token: number;
  /**
   * The lease owner the claim recorded (`ClaimedJob.leaseOwner`), unique to that claim. Every
   * write Docket's worker and HTTP service make carries it. Omitted, the write is fenced by the
   * token alone, which a promoted standby that lost the last commits can repeat.
   */
  leaseOwner?: string | undefined;
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobHeartbeatParams extends AtTime, JobLease {
  leaseMs: number;
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobHeartbeatManyParams extends AtTime {
  leases: readonly JobLease[];
  leaseMs: number;
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobCompleteParams extends AtTime, JobLease, InCallerTransaction, CompletionRecord {}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobCompleteManyParams extends AtTime, CompletionRecord {
  leases: readonly JobLease[];
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface CompletionRecord {
  /**
   * `true`: an accepted completion deletes the job's row in the same statement instead of keeping
   * it as a `done` record (Docket's `retentionMs: 0`). Fenced exactly as the update is. A deleted
   * row keeps no token, so a completion repeated after a lost reply answers `stale`, not `done`.
   */
  deleteRecord?: boolean | undefined;
}

/** `done`: the completion was accepted and the job can never run again. `stale`: refused. */
export type CompleteOutcome = 'done' | 'stale';

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobFailParams extends AtTime, JobFailure {}

export type FailOutcome = { outcome: 'retry'; runAt: Date } | { outcome: 'parked' } | { outcome: 'stale' };

/** One failed attempt of a {@link JobFailManyParams} batch: its lease, error and decision. */
export interface JobFailure extends JobLease {
  error: Pick<AttemptError, 'message' | 'kind' | 'detail'>;
  /** Decided by retry/backoff.ts from the claim's attempts and the job's policy. */
  decision: RetryDecision;
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobFailManyParams extends AtTime {
  failures: readonly JobFailure[];
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobReleaseParams extends AtTime, JobLease {}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobReleaseByOwnerParams extends AtTime {
  /** The lease owner a claim recorded; each claim of a worker uses its own. */
  owner: string;
}

/** `released`: due again at once, its attempt given back. `stale`: the lease was not ours. */
export type ReleaseOutcome = 'released' | 'stale';

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobCancelParams extends AtTime {
  id: string;
}

export type CancelOutcome = 'cancelled' | 'not_found' | 'already_finished';

/**
 * A page of a job list: keyset paging by id in the list's order (never OFFSET), so a page costs
 * the same wherever it starts.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
export interface ListPageParams {
  /** Page size; default 100, at most 1000. */
  limit?: number | undefined;
  /**
   * Keyset paging: only jobs after this id in the list's order (ids compare numerically):
   * greater ids for `asc`, smaller for `desc`.
   */
  afterId?: string | undefined;
  /** By id ascending (default, oldest first) or descending (newest first). */
  order?: ListOrder | undefined;
}

/**
 * Jobs by the {@link JobFilter} (states, queue, kind, id and run-at ranges, payload equality).
 * Each store serves state + queue (+ id order) from an index (PostgreSQL: jobs (state, queue, id)
 * over every state but running; SQLite: a (queue, id) index per piling-up state; both: the running
 * rows' lease index and dead_jobs (queue, id)); the other tests filter the rows that range reads.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
export interface JobListParams extends JobFilter, ListPageParams {}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface DeadLetterListParams extends Omit<JobFilter, 'states'>, ListPageParams {}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface DeadLetterRetryParams extends AtTime {
  id: string;
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface DeadLetterPurgeParams {
  /** Purge these ids; with neither field, nothing is purged. */
  ids?: readonly string[] | undefined;
  /** Purge every dead job parked before this instant. */
  parkedBefore?: Date | undefined;
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface JobPruneParams {
  /** Deletes done and cancelled records that finished before this instant. */
  finishedBefore: Date;
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface NextRunAtParams extends AtTime, KindFilter {
  queues?: readonly string[] | undefined;
}

/** What a worker process says about itself when it registers (see {@link Store.workerRegister}). */
export interface WorkerRegistration {
  /** Unique per worker process (local workers: generated; remote workers: their `workerId`). */
  id: string;
  /** Host name the process runs on ('' when unknown, e.g. a remote worker that did not say). */
  host: string;
  /** Process id, or null when unknown (remote workers). */
  pid: number | null;
  /** Docket version (local) or the client's version string (remote), '' when unknown. */
  version: string;
  /** Queues it claims from; null means every queue. */
  queues: readonly string[] | null;
  /** Kinds it has handlers for; null means a catch-all (every kind). */
  kinds: readonly string[] | null;
  /** Kinds it never claims (remote workers: the built-in kinds). */
  excludeKinds: readonly string[];
  /** How many jobs it runs at once. */
  concurrency: number;
  /** `local`: a Worker in a Node process; `remote`: an HTTP worker known by its claims. */
  origin: 'local' | 'remote';
}

/** A live worker as the registry shows it; times are the database's. */
export interface WorkerRecord extends WorkerRegistration {
  startedAt: Date;
  lastSeenAt: Date;
  /** After this instant (lastSeenAt + the ttl it registered with) the record is expired and not listed. */
  expiresAt: Date;
}

/** @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x. */
export interface WorkerRegisterParams extends AtTime {
  worker: WorkerRegistration;
  /**
   * The record expires this long after now unless registered again (a heartbeat re-registers);
   * an integer from 1 ms to one day. A bad registration throws ValidationError naming the field
   * (`worker.kinds[1]`, `ttlMs`) and writes nothing.
   */
  ttlMs: number;
}

/**
 * Parameters of {@link Store.jobDueCountsByKind}.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
export interface DueCountsParams extends AtTime {
  /**
   * Bounds the work (the dashboard's refresh): each (queue, kind, priority) range is counted up
   * to this many due rows, so a count at or above it is a lower bound. Omitted: exact counts (one
   * pass over the pending rows, as the unhandled parker needs).
   */
  exactUpTo?: number | undefined;
}

/** Due jobs counted by queue and kind, for working out which of them no live worker handles. */
export interface DueKindCount {
  queue: string;
  kind: string;
  /**
   * Available now, in a queue that is not paused: pending with run_at <= now, plus running with
   * a lapsed lease (due again, exactly as {@link QueueStats.available} counts them, so a queue's
   * unhandled count never exceeds its available count). Always > 0 (empty pairs are left out).
   */
  count: number;
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
  /**
   * Of `available`, how many no live worker handles (no registered worker claims their queue and
   * kind). Filled in by Docket from the worker registry (`routing/`); stores answer 0.
   */
  unhandled: number;
}

/**
 * Parameters of {@link Store.scheduleUpsert}.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
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

/**
 * Parameters of {@link Store.scheduleList}.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
export interface ScheduleListParams {
  /** Page size; default 100, at most 1000. */
  limit?: number | undefined;
  /** Keyset paging: only ids after this one (ids compare as text). */
  afterId?: string | undefined;
  /** Only paused (true) or only active (false) schedules; all when omitted. */
  paused?: boolean | undefined;
}

/**
 * Names one schedule, at an optional pinned instant.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
export interface ScheduleIdParams extends AtTime {
  id: string;
}

/**
 * Parameters of {@link Store.scheduleRepair}.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
export interface ScheduleRepairParams extends AtTime {
  /** At most this many schedules repaired per call (default 100), so one sweep stays short. */
  limit?: number | undefined;
}

/**
 * Parameters of {@link Store.queuePause} and {@link Store.queueResume}.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
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

/** A count field of {@link QueueCounts}. */
export type QueueCountField = 'scheduled' | 'available' | 'running' | 'unhandled' | 'done' | 'cancelled' | 'dead';

/**
 * One queue's counts for the dashboard: the {@link QueueStats} counts, each exact up to
 * `exactUpTo` and otherwise possibly the planner's estimate, named in `estimated`.
 */
export interface QueueCounts extends QueueStats {
  /** The fields whose value is an estimate (empty when every count is exact). */
  estimated: QueueCountField[];
}

/**
 * Parameters of {@link Store.queueCounts}.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
export interface QueueCountsParams extends AtTime {
  /**
   * Counts up to this many per queue and state are exact (default 10 000); a larger one may be
   * the planner's estimate (PostgreSQL) and is then named in `estimated`. Bounds the rows one
   * refresh reads, whatever the table's size.
   */
  exactUpTo?: number | undefined;
}

/**
 * Parameters of {@link Store.jobActivity}: the window [from, to) cut into buckets of `bucketMs`
 * aligned to the epoch.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
export interface JobActivityParams {
  from: Date;
  to: Date;
  /** Bucket length, 1 s to 1 day; (to - from) / bucketMs at most 1440 buckets. */
  bucketMs: number;
}

/** What finished in one bucket of {@link Store.jobActivity}. */
export interface ActivityBucket {
  /** The bucket's start. */
  at: Date;
  /** Jobs that reached done in the bucket (by finished_at). */
  completed: number;
  /** Jobs parked as dead letters in the bucket (by parked_at; retried or purged ones are gone). */
  failed: number;
  /**
   * Start lateness of the bucket's completed jobs (claim time minus run-at of the attempt that
   * succeeded), counted into the buckets of LATENESS_BUCKET_BOUNDS_MS (src/job/activity.ts);
   * LATENESS_BUCKET_COUNT entries. Jobs claimed before started_at was recorded are left out.
   */
  latenessHistogram: number[];
}

/**
 * Parameters of {@link Store.jobCountMatching}: the jobs `action` would touch now, i.e. the
 * filter narrowed to the action's states (BULK_ACTION_STATES in src/job/job-filter.ts).
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
export interface JobCountParams extends AtTime {
  action: BulkAction;
  filter: JobFilter;
  /** Exact up to this many (default 1 000 000); above, possibly the planner's estimate. */
  exactUpTo?: number | undefined;
}

/** A count that may be an estimate. */
export interface MatchCount {
  count: number;
  estimated: boolean;
}

/**
 * Parameters of {@link Store.jobBulkApply}: one batch of a bulk action. The store reads the next
 * `limit` jobs the filter matches (within the action's states) with ids above `afterId`, in id
 * order, and applies the action to them in one short transaction (PostgreSQL: rows another
 * transaction holds are skipped, not waited for). The caller walks on from `lastId`.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
export interface JobBulkApplyParams extends AtTime {
  action: BulkAction;
  filter: JobFilter;
  /** Only ids above this one (the previous batch's `lastId`); from the start when omitted. */
  afterId?: string | undefined;
  /** Batch size, 1 to 10 000. */
  limit: number;
  /** `reschedule` only (required there, refused elsewhere): the new run-at. */
  runAt?: Date | undefined;
}

/** What one {@link Store.jobBulkApply} batch did. */
export interface BulkBatchResult {
  /** Matching jobs the batch read (at most `limit`); fewer than `limit` means the walk is done. */
  scanned: number;
  /** Of those, how many the action changed (retry, purge, cancel, reschedule). */
  affected: number;
  /** The largest id read, where the next batch starts; null when nothing was read. */
  lastId: string | null;
}

/**
 * A hint that jobs may be due sooner than a worker expects. `runAt` is the earliest run time
 * among the jobs behind the hint, or null for "something changed, look again" (for example after
 * a reconnect, when notifications sent in between were lost). `queue` and `kind`, when present,
 * say every job behind the hint has that queue and kind, so a claimer that claims neither can
 * ignore it (wakeUpConcerns in wake-up.ts); a hint without them may concern anyone.
 */
export interface WakeUp {
  runAt: Date | null;
  queue?: string | undefined;
  kind?: string | undefined;
}

/**
 * The persistence contract; see the file header for the invariants.
 *
 * @experimental Part of the Store contract, which may change between minor versions while Docket is 0.x.
 */
export interface Store {
  readonly capabilities: StoreCapabilities;

  /** The database's current time: the only clock that decides due times and leases. */
  now(): Promise<Date>;

  /**
   * Writes jobs (one round trip for the batch), committed before it resolves; results in input
   * order. With `transaction`, written inside the caller's transaction instead (see the header).
   *
   * Idempotency keys are unique per (queue, kind) among live jobs: the same key in another queue
   * or kind is another job, and a finished job frees its key. A repeat in the same scope with an
   * equal payload (JSON equality: key order ignored) is answered with the live job, `created:
   * false`; so is a repeat of an earlier input of the same batch. A repeat with a different
   * payload throws IdempotencyConflictError and writes nothing of the batch: field
   * `idempotencyKey` for a submit of one job, `jobs[i].idempotencyKey` (input position) for a
   * batch of more; `existingId` names the live job, or is '' when the other holder is an earlier
   * input of the same batch. Only the payload is compared (a repeat's runAt, priority, … are not).
   */
  jobSubmit(params: JobSubmitParams): Promise<SubmitResult[]>;

  /**
   * Reserves `count` job ids no other submit will use, for {@link jobSubmit}'s `ids`. Only on a
   * store with `capabilities.reservableJobIds`; others throw ConfigurationError.
   */
  jobReserveIds(params: JobReserveIdsParams): Promise<string[]>;

  /**
   * Whether `error`, thrown by one of this store's calls, means the connection to the database
   * was lost (or could not be made): the call's outcome is unknown and a retry on a fresh
   * connection may succeed. False for errors about the request itself.
   */
  isConnectionLoss(error: unknown): boolean;

  /**
   * Leases up to `limit` claimable jobs of the allowed queues and kinds, by priority (lower
   * first), then run_at, then id, across all allowed kinds. `kinds: []` claims (and parks) nothing.
   */
  jobClaim(params: JobClaimParams): Promise<ClaimedJob[]>;

  /** Extends the lease to now + leaseMs; null when the token is stale or the lease already lapsed. */
  jobHeartbeat(params: JobHeartbeatParams): Promise<Date | null>;

  /** {@link jobHeartbeat} for many leases in one round trip; results in input order. */
  jobHeartbeatMany(params: JobHeartbeatManyParams): Promise<(Date | null)[]>;

  /**
   * Marks the job done if the token (and owner) is current; a done job can never run again.
   * Idempotent: a job already done under this token and owner answers `done`. With `transaction`, the completion joins
   * the caller's transaction and answers `done` only for the running → done transition.
   */
  jobComplete(params: JobCompleteParams): Promise<CompleteOutcome>;

  /** {@link jobComplete} for many leases in one round trip, each fenced by its own token (idempotent likewise). */
  jobCompleteMany(params: JobCompleteManyParams): Promise<CompleteOutcome[]>;

  /** Records the attempt's error and applies the decision: retry at now + delay, or park. */
  jobFail(params: JobFailParams): Promise<FailOutcome>;

  /**
   * {@link jobFail} for many failed attempts in one round trip, each fenced by its own token and
   * owner; answers in input order. A lease named twice is written once: its first copy answers,
   * the later ones answer `stale`.
   */
  jobFailMany(params: JobFailManyParams): Promise<FailOutcome[]>;

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

  /** Jobs by the filter, ordered by id (either way), keyset-paged. */
  jobList(params: JobListParams): Promise<Job[]>;

  /** Deletes finished done/cancelled records older than the retention; returns how many. */
  jobPruneFinished(params: JobPruneParams): Promise<number>;

  /**
   * The earliest instant at which a live job of the allowed queues and kinds becomes claimable
   * (now or later), or null if none; foreign kinds never wake a worker that cannot run them.
   */
  jobNextRunAt(params: NextRunAtParams): Promise<Date | null>;

  /** Parked jobs by the filter (no states), ordered by id (either way), keyset-paged. */
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
   * and, where `capabilities.listenNotify`, in others (SQLite hears other processes' submits too,
   * but not their retries or releases). Treat it as a hint: it can be lost, so callers still poll. Resolves to an unsubscribe function.
   */
  subscribe(listener: (wakeUp: WakeUp) => void): Promise<() => Promise<void>>;

  /**
   * Records (or refreshes) a worker in the registry: an upsert by id that keeps `startedAt` of a
   * live record, sets lastSeenAt = now and expiresAt = now + ttlMs (database clock). Expired
   * records may be deleted by any call. Returns the record as stored.
   */
  workerRegister(params: WorkerRegisterParams): Promise<WorkerRecord>;

  /** Removes a worker's record (graceful stop); false when there was none. */
  workerDeregister(params: { id: string }): Promise<boolean>;

  /** Live (unexpired at now) workers, ordered by id; deletes expired records as it goes. */
  workerList(params?: AtTime): Promise<WorkerRecord[]>;

  /**
   * Counts of available jobs (due pending, lapsed running) by queue and kind, paused queues left
   * out, ordered by queue, then kind (bytewise). A dashboard query: at most one pass over the
   * pending rows, never on the claim path.
   */
  jobDueCountsByKind(params?: DueCountsParams): Promise<DueKindCount[]>;

  /**
   * Counts by queue and state for the dashboard, like {@link queueStats} but bounded: each count
   * reads at most `exactUpTo` index entries and is otherwise the planner's estimate, named in
   * `estimated`. Never a full-table count, whatever the table's size.
   */
  queueCounts(params?: QueueCountsParams): Promise<QueueCounts[]>;

  /**
   * Completions, dead-letter parkings and start lateness per bucket over [from, to), every
   * bucket present (zeros when idle), oldest first. Index range scans on finished_at and
   * parked_at: the cost is the rows finished inside the window, not the table's size.
   */
  jobActivity(params: JobActivityParams): Promise<ActivityBucket[]>;

  /** How many jobs a bulk action would touch now (see {@link JobCountParams}). */
  jobCountMatching(params: JobCountParams): Promise<MatchCount>;

  /**
   * One batch of a bulk action (see {@link JobBulkApplyParams}): retry moves dead letters back
   * to pending exactly as {@link deadLetterRetry}, purge deletes them, cancel cancels live jobs
   * as {@link jobCancel}, reschedule sets pending jobs' run_at. Idempotent: a job already
   * retried, purged or cancelled no longer matches, so a repeated batch changes nothing more.
   * Wakes listeners when it made jobs due.
   */
  jobBulkApply(params: JobBulkApplyParams): Promise<BulkBatchResult>;

  /**
   * Optional: the store's independent partitions (a sharded store's shards), each driven by a
   * worker on its own: its own claims, wake-ups, timers, heartbeats and completion batches, so a
   * slow or unreachable partition never holds up another's, and each claims full batches.
   * Undefined (or absent) for a store of one database: the worker then drives the store itself.
   */
  partitions?(): StorePartitions | undefined;

  /** Releases connections and handles; the store is unusable afterwards. */
  close(): Promise<void>;
}

/**
 * The calls a worker makes on one partition of a store ({@link Store.partitions}), with the same
 * meaning as on the store: claims, next-run-at and wake-ups cover that partition's jobs only; the
 * lease writes take only leases of its jobs.
 */
export type StorePartition = Pick<
  Store,
  | 'now'
  | 'jobClaim'
  | 'jobNextRunAt'
  | 'jobReleaseByOwner'
  | 'jobHeartbeatMany'
  | 'jobCompleteMany'
  | 'jobFailMany'
  | 'subscribe'
  | 'isConnectionLoss'
>;

/** A store's partitions and which one holds a job. */
export interface StorePartitions {
  readonly parts: readonly StorePartition[];
  /** The index in `parts` of the partition that holds job `id` (its id names it, no lookup). */
  partOfId(id: string): number;
}
