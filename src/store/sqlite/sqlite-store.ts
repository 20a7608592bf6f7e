/**
 * SqliteStore: the embedded Store, one SQLite file shared by every process on a host. Wiring
 * only: transactions, the clock and wake-ups live here; the statements and the steps that run
 * them are in the same files as the PostgreSQL store's (job-queries.ts with rows in job-row.ts,
 * claim-queries.ts, schedule-queries.ts, worker-queries.ts, migrations.ts), and the parameter
 * rules (store-params.ts) and schedule decisions (schedule-plan.ts) are shared and pure.
 *
 * Who may write what: every write runs in one `BEGIN IMMEDIATE` transaction, so writers to the
 * file are serial (SQLite has one writer) and a check-then-write inside a transaction never races.
 * Other processes wait for the write lock up to busy_timeout (default 5 s) instead of failing.
 * Readers never block the writer: the file is in WAL mode.
 *
 * Which clock is trusted: the database clock, read once per transaction *after* the write lock
 * is held (a clock read before waiting for the lock could be seconds old and extend a lease that
 * has already lapsed). On one host every process shares that clock. A pinned `now` overrides it.
 *
 * Durability: synchronous=NORMAL in WAL mode, so an acknowledged write survives `kill -9` of any
 * process (it is in the WAL, handed to the operating system). A power loss or kernel crash can
 * lose the last commits before the next checkpoint; `synchronous: 'full'` closes that gap at the
 * cost of an fsync per commit.
 *
 * Recurring runs: a claim that hands out a schedule's latest run plans and inserts the next run
 * inside the same IMMEDIATE transaction, so the claim and its successor commit together.
 *
 * Wake-ups: subscribers in this process hear of its submits, retries and releases due within
 * {@link WAKE_UP_HORIZON_MS}, and, while anyone is subscribed, of other processes' submits within
 * a few milliseconds (foreign-submit-watcher.ts: SQLite has no NOTIFY, so a store with subscribers
 * reads the file's change counter every few ms). Other processes' retries and releases are found
 * by the workers' polling; so capabilities still say listenNotify: false, and workers here keep
 * their short poll.
 */
import Database from 'better-sqlite3';
import { ConfigurationError, ValidationError } from '../../job/errors.js';
import type { ClaimedJob, Job } from '../../job/job.js';
import { validateQueue } from '../../job/job-spec.js';
import type { Schedule } from '../../schedule/schedule.js';
import { ClaimedRowValues } from '../claimed-row-values.js';
import {
  checkBulkApplyParams,
  checkCountParams,
  checkDeadLetterListParams,
  checkExactUpTo,
  checkListParams,
} from '../dashboard-params.js';
import { assertBatchKeysAgree } from '../idempotency.js';
import type { OpenStoreOptions } from '../open-store.js';
import {
  advanceSchedule,
  assertPlannableSpec,
  claimedScheduleIds,
  planClaimedRuns,
  plannedThroughSlotAt,
  planUpsert,
} from '../schedule-plan.js';
import type {
  ActivityBucket,
  AtTime,
  BulkBatchResult,
  CancelOutcome,
  CompleteOutcome,
  DeadLetterListParams,
  DeadLetterPurgeParams,
  DeadLetterRetryParams,
  DueCountsParams,
  DueKindCount,
  FailOutcome,
  JobActivityParams,
  JobBulkApplyParams,
  JobCancelParams,
  JobClaimParams,
  JobCompleteManyParams,
  JobCompleteParams,
  JobCountParams,
  JobFailManyParams,
  JobFailParams,
  JobHeartbeatManyParams,
  JobHeartbeatParams,
  JobListParams,
  JobPruneParams,
  JobReleaseByOwnerParams,
  JobReleaseParams,
  JobReserveIdsParams,
  JobSubmitParams,
  MatchCount,
  NextRunAtParams,
  QueueCounts,
  QueueCountsParams,
  QueueNameParams,
  QueueState,
  QueueStats,
  ReleaseOutcome,
  ScheduleIdParams,
  ScheduleListParams,
  ScheduleRepairParams,
  ScheduleUpsertParams,
  ScheduleUpsertResult,
  Store,
  StoreCapabilities,
  SubmitResult,
  WakeUp,
  WorkerRecord,
  WorkerRegisterParams,
} from '../store.js';
import {
  claimLimit,
  earliestRetry,
  LEASE_EXPIRED_MESSAGE,
  pageSize,
  parseJobId,
  positiveMs,
  STALE_FAILURE,
} from '../store-params.js';
import { wakeUpsFor } from '../wake-up.js';
import { validateWorkerId, validateWorkerRegister } from '../worker-registry.js';
import { SqliteClaimQueries } from './claim-queries.js';
import { SqliteDashboardQueries } from './dashboard-queries.js';
import { ForeignSubmitWatcher } from './foreign-submit-watcher.js';
import { PRUNE_BATCH, SqliteJobQueries } from './job-queries.js';
import { claimedValuesToJob, rowToJob } from './job-row.js';
import { runSqliteMigrations } from './migrations.js';
import { SqliteScheduleQueries } from './schedule-queries.js';
import { SqliteWorkerQueries } from './worker-queries.js';

/** Options for {@link SqliteStore.open}. */
export interface SqliteStoreOptions extends OpenStoreOptions {
  /**
   * `normal` (default): durable against a process crash or `kill -9`; a power loss can lose the
   * last commits. `full`: an fsync per commit, durable against power loss too, slower.
   */
  synchronous?: 'normal' | 'full' | undefined;
}

/** Default wait for another process's write lock before a write fails with SQLITE_BUSY. */
export const DEFAULT_BUSY_TIMEOUT_MS = 5000;

/** Subscribers hear of jobs due within this long; later ones are found by the worker's polling. */
export const WAKE_UP_HORIZON_MS = 5000;

/** Recorded when a claim finds a job whose previous lease lapsed without a result. */
export { LEASE_EXPIRED_MESSAGE };

type Listener = (wakeUp: WakeUp) => void;

/** The embedded store on better-sqlite3; see the file header for its locking, clock and durability. */
export class SqliteStore implements Store {
  readonly capabilities: StoreCapabilities = {
    listenNotify: false,
    skipLocked: false,
    callerTransactions: false,
    reservableJobIds: false,
    inProcess: true,
  };

  /** Migration versions this open applied (empty when the file was already current). */
  readonly appliedMigrations: readonly number[];

  private readonly db: Database.Database;
  private readonly listeners = new Set<Listener>();
  private closed = false;
  private readonly claims: SqliteClaimQueries;
  private readonly jobs: SqliteJobQueries;
  private readonly dashboard: SqliteDashboardQueries;
  private readonly schedules: SqliteScheduleQueries;
  private readonly workers: SqliteWorkerQueries;
  /** Undefined for an in-memory database: no other connection can reach it. */
  private readonly foreignSubmits: ForeignSubmitWatcher | undefined;

  private constructor(db: Database.Database, appliedMigrations: number[], watchOtherProcesses: boolean) {
    this.db = db;
    this.appliedMigrations = appliedMigrations;
    this.claims = new SqliteClaimQueries(db);
    this.jobs = new SqliteJobQueries(db);
    this.dashboard = new SqliteDashboardQueries(db);
    this.schedules = new SqliteScheduleQueries(db);
    this.workers = new SqliteWorkerQueries(db);
    this.foreignSubmits = watchOtherProcesses
      ? new ForeignSubmitWatcher(db, this.jobs, (wakeUps) => this.tell(wakeUps, this.clock(undefined)))
      : undefined;
  }

  /**
   * Opens (creating if needed) and migrates the store at `path`, a file path or `:memory:`
   * (one process only: nothing else can see an in-memory database).
   */
  static async open(path: string, options: SqliteStoreOptions = {}): Promise<SqliteStore> {
    const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
    if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
      throw new ValidationError('busyTimeoutMs', `must be a non-negative integer, got ${String(busyTimeoutMs)}`);
    }
    const db = new Database(path, { timeout: busyTimeoutMs });
    try {
      db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      if (path !== ':memory:') {
        // Several processes opening a new file together race to switch it to WAL; the switch
        // needs a moment of exclusive access and can answer SQLITE_BUSY without waiting.
        setWalMode(db, busyTimeoutMs);
      }
      db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
      const applied = runSqliteMigrations(db);
      // An in-memory database has no other process to watch for.
      return new SqliteStore(db, applied, path !== ':memory:');
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /** The connection's safety settings as SQLite reports them (for diagnostics and tests). */
  settings(): { journalMode: string; busyTimeoutMs: number; synchronous: 'off' | 'normal' | 'full' | 'extra' } {
    const levels = ['off', 'normal', 'full', 'extra'] as const;
    return {
      journalMode: String(this.db.pragma('journal_mode', { simple: true })),
      busyTimeoutMs: Number(this.db.pragma('busy_timeout', { simple: true })),
      synchronous: levels[Number(this.db.pragma('synchronous', { simple: true }))] ?? 'off',
    };
  }

  /** The transaction's instant: pinned, or the database clock read under the write lock. */
  private clock(now: Date | undefined): number {
    return now === undefined ? this.jobs.now() : now.getTime();
  }

  /** Runs `fn` in one BEGIN IMMEDIATE transaction: the write lock is taken before `fn` reads anything. */
  private write<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  /** Runs reads that must agree with each other in one snapshot. */
  private read<T>(fn: () => T): T {
    return this.db.transaction(fn).deferred();
  }

  private notify(earliestMs: number | null, nowMs: number): void {
    if (earliestMs !== null) this.tell([{ runAt: new Date(earliestMs) }], nowMs);
  }

  /** Tells every listener each wake-up due within the horizon. */
  private tell(wakeUps: readonly WakeUp[], nowMs: number): void {
    if (this.listeners.size === 0) return;
    for (const wakeUp of wakeUps) {
      if (wakeUp.runAt !== null && wakeUp.runAt.getTime() > nowMs + WAKE_UP_HORIZON_MS) continue;
      this.tellEach(wakeUp);
    }
  }

  private tellEach(wakeUp: WakeUp): void {
    for (const listener of this.listeners) {
      // Asynchronous, after the commit: a listener that claims at once must see the new rows,
      // and a throwing listener must not fail the write that already committed.
      queueMicrotask(() => {
        try {
          listener(wakeUp);
        } catch {
          // A listener's failure is its own; the hint is best-effort by contract.
        }
      });
    }
  }

  async now(): Promise<Date> {
    return new Date(this.clock(undefined));
  }

  async jobSubmit(params: JobSubmitParams): Promise<SubmitResult[]> {
    refuseCallerTransaction(params.transaction, 'jobSubmit');
    if (params.ids !== undefined) throw noReservableIds('jobSubmit with ids');
    if (params.jobs.length === 0) return [];
    // A batch that repeats a key with two payloads is refused before the transaction starts.
    assertBatchKeysAgree(params.jobs);
    // An IdempotencyConflictError thrown inside rolls the whole transaction back: nothing of the
    // batch is written (better-sqlite3 rolls back a transaction function that throws).
    const { results, nowMs } = this.write(() => {
      const nowMs = this.clock(params.now);
      return { nowMs, ...this.jobs.submit(params.jobs, nowMs) };
    });
    // Named by queue and kind, so this process's workers of others sleep on (decision 0025).
    const created = params.jobs.flatMap((spec, i) => {
      const result = results[i]!;
      return result.created ? [{ queue: spec.queue, kind: spec.kind, runAtMs: result.runAt.getTime() }] : [];
    });
    this.tell(wakeUpsFor(created), nowMs);
    return results;
  }

  /**
   * Refused: a write here never crosses a connection, so its outcome is never in doubt and a
   * submit needs no reserved ids (`capabilities.reservableJobIds` is false).
   */
  async jobReserveIds(_params: JobReserveIdsParams): Promise<string[]> {
    throw noReservableIds('jobReserveIds');
  }

  /** Never: an embedded database has no connection to lose. */
  isConnectionLoss(_error: unknown): boolean {
    return false;
  }

  async jobClaim(params: JobClaimParams): Promise<ClaimedJob[]> {
    if (claimLimit(params.limit) === 0) return [];
    const leaseMs = positiveMs('leaseMs', params.leaseMs);
    if (params.queues !== undefined && params.queues.length === 0) return [];
    // No kind can match an empty list: claim (and park) nothing, as the PostgreSQL twin.
    if (params.kinds !== undefined && params.kinds.length === 0) return [];
    const claimed = this.write(() => {
      const nowMs = this.clock(params.now);
      // Every job in these queues whose last allowed attempt vanished without a result is parked
      // first, whatever the limit and whatever its kind (parking hands nothing out): handing it out would let a job that kills its worker every
      // time run for ever (invariant I5), and parking only the ones a small batch walked past
      // would leave the rest in a state that differs from store to store.
      const includeLapsed = params.includeLapsed !== false;
      for (const exhausted of includeLapsed ? this.claims.lapsedExhausted(nowMs, params.queues) : []) {
        this.jobs.moveToDead(exhausted.id, nowMs, {
          attempt: exhausted.attempts,
          atMs: nowMs,
          kind: 'lease_expired',
          message: `${LEASE_EXPIRED_MESSAGE}; parked after ${exhausted.attempts} attempts`,
        });
      }
      const candidates = this.claims.candidates(nowMs, params.limit, params.queues, params, includeLapsed);
      if (candidates.length === 0) return { jobs: [], earliestMs: null, nowMs };
      const lease = { nowMs, leaseUntilMs: nowMs + leaseMs, owner: params.owner };
      const rows = this.claims.leaseMany(candidates, { ...lease, message: LEASE_EXPIRED_MESSAGE });
      const repeated = new ClaimedRowValues();
      const jobs = rows.map((row) => claimedValuesToJob(row, lease, repeated));
      const planned = this.applyClaimedRunPlan(jobs, nowMs);
      return { jobs: planned.jobs, earliestMs: planned.earliestMs, nowMs };
    });
    this.notify(claimed.earliestMs, claimed.nowMs);
    return claimed.jobs;
  }

  /**
   * Plans the claimed recurring runs ({@link planClaimedRuns}) and writes the plan inside the
   * claim's transaction: deletes the dropped runs and inserts the next ones.
   */
  private applyClaimedRunPlan(jobs: ClaimedJob[], nowMs: number): { jobs: ClaimedJob[]; earliestMs: number | null } {
    const scheduleIds = claimedScheduleIds(jobs);
    if (scheduleIds.length === 0) return { jobs, earliestMs: null };
    const schedules = new Map<string, Schedule | null>();
    for (const id of scheduleIds) schedules.set(id, this.schedules.get(id));
    const { advances, dropped } = planClaimedRuns(jobs, schedules, new Date(nowMs));
    for (const id of dropped) this.jobs.delete(Number(id));
    const earliestMs = this.schedules.apply(advances, nowMs);
    return { jobs: jobs.filter((job) => !dropped.has(job.id)), earliestMs };
  }

  async jobHeartbeat(params: JobHeartbeatParams): Promise<Date | null> {
    const leaseMs = positiveMs('leaseMs', params.leaseMs);
    return this.write(() => this.jobs.heartbeat(params, leaseMs, this.clock(params.now)));
  }

  async jobHeartbeatMany(params: JobHeartbeatManyParams): Promise<(Date | null)[]> {
    if (params.leases.length === 0) return [];
    const leaseMs = positiveMs('leaseMs', params.leaseMs);
    return this.write(() => {
      const nowMs = this.clock(params.now);
      return params.leases.map((lease) => this.jobs.heartbeat(lease, leaseMs, nowMs));
    });
  }

  async jobComplete(params: JobCompleteParams): Promise<CompleteOutcome> {
    refuseCallerTransaction(params.transaction, 'jobComplete');
    return this.write(() => this.jobs.complete(params, this.clock(params.now), params.deleteRecord === true));
  }

  async jobCompleteMany(params: JobCompleteManyParams): Promise<CompleteOutcome[]> {
    if (params.leases.length === 0) return [];
    return this.write(() => {
      const nowMs = this.clock(params.now);
      return this.jobs.completeMany(params.leases, nowMs, params.deleteRecord === true);
    });
  }

  async jobFail(params: JobFailParams): Promise<FailOutcome> {
    const [outcome] = await this.jobFailMany({ now: params.now, failures: [params] });
    return outcome ?? STALE_FAILURE;
  }

  /** Every failure in one write transaction (one commit); a lease named twice is written once, as on PostgreSQL. */
  async jobFailMany(params: JobFailManyParams): Promise<FailOutcome[]> {
    if (params.failures.length === 0) return [];
    const { outcomes, nowMs } = this.write(() => {
      const nowMs = this.clock(params.now);
      const outcomes = params.failures.map((failure): FailOutcome => {
        const id = parseJobId(failure.id);
        return id === null ? STALE_FAILURE : this.jobs.fail(id, failure, nowMs);
      });
      return { outcomes, nowMs };
    });
    const retryAt = earliestRetry(outcomes);
    if (retryAt !== null) this.notify(retryAt.getTime(), nowMs);
    return outcomes;
  }

  async jobRelease(params: JobReleaseParams): Promise<ReleaseOutcome> {
    const id = parseJobId(params.id);
    if (id === null) return 'stale';
    const { released, nowMs } = this.write(() => {
      const nowMs = this.clock(params.now);
      return { released: this.jobs.release(id, params, nowMs), nowMs };
    });
    if (!released) return 'stale';
    // Due at once (its run_at is at or before now), so the wake-up says now.
    this.notify(nowMs, nowMs);
    return 'released';
  }

  async jobReleaseByOwner(params: JobReleaseByOwnerParams): Promise<number> {
    const { count, nowMs } = this.write(() => {
      const nowMs = this.clock(params.now);
      return { count: this.jobs.releaseByOwner(params.owner, nowMs), nowMs };
    });
    if (count > 0) this.notify(nowMs, nowMs);
    return count;
  }

  async jobCancel(params: JobCancelParams): Promise<CancelOutcome> {
    const id = parseJobId(params.id);
    if (id === null) return 'not_found';
    return this.write(() => this.jobs.cancel(id, this.clock(params.now)));
  }

  async jobGet(params: { id: string }): Promise<Job | null> {
    const id = parseJobId(params.id);
    if (id === null) return null;
    const row = this.read(() => this.jobs.get(id));
    return row ? rowToJob(row) : null;
  }

  async queueCounts(params: QueueCountsParams = {}): Promise<QueueCounts[]> {
    return this.read(() =>
      this.dashboard.queueCounts(this.clock(params.now), params.exactUpTo, this.claims.pendingTriples(undefined)),
    );
  }

  async jobActivity(params: JobActivityParams): Promise<ActivityBucket[]> {
    return this.read(() => this.dashboard.activity(params));
  }

  async jobCountMatching(params: JobCountParams): Promise<MatchCount> {
    const checked = checkCountParams(params);
    return this.read(() => this.dashboard.countMatching(checked, checked.exactUpTo));
  }

  /**
   * One bulk batch in one BEGIN IMMEDIATE transaction: the ids are read and acted on under the
   * same write lock (at most `limit` rows, so other writers wait one batch, not the whole walk).
   */
  async jobBulkApply(params: JobBulkApplyParams): Promise<BulkBatchResult> {
    const checked = checkBulkApplyParams(params);
    const result = this.write(() => {
      const nowMs = this.clock(params.now);
      const ids = this.dashboard.batchIds(checked, checked.afterId, checked.limit);
      let affected = 0;
      let earliestMs: number | null = null;
      if (ids.length > 0) {
        switch (checked.action) {
          case 'retry':
            for (const id of ids) if (this.jobs.deadRetry(id, nowMs) !== null) affected += 1;
            if (affected > 0) earliestMs = nowMs;
            break;
          case 'purge':
            affected = this.dashboard.purgeMany(ids);
            break;
          case 'cancel':
            affected = this.dashboard.cancelMany(ids, nowMs);
            break;
          case 'reschedule':
            affected = this.dashboard.rescheduleMany(ids, checked.runAt!.getTime());
            if (affected > 0) earliestMs = checked.runAt!.getTime();
            break;
        }
      }
      return { scanned: ids.length, affected, lastId: ids.length === 0 ? null : String(ids.at(-1)), earliestMs, nowMs };
    });
    this.notify(result.earliestMs, result.nowMs);
    return { scanned: result.scanned, affected: result.affected, lastId: result.lastId };
  }

  async jobList(params: JobListParams): Promise<Job[]> {
    const page = checkListParams(params);
    return this.read(() => this.dashboard.list(page)).map(rowToJob);
  }

  async jobPruneFinished(params: JobPruneParams): Promise<number> {
    const before = params.finishedBefore.getTime();
    let total = 0;
    for (;;) {
      const deleted = this.write(() => this.jobs.pruneBatch(before, PRUNE_BATCH));
      total += deleted;
      if (deleted < PRUNE_BATCH) return total;
    }
  }

  async jobNextRunAt(params: NextRunAtParams): Promise<Date | null> {
    if (params.queues !== undefined && params.queues.length === 0) return null;
    if (params.kinds !== undefined && params.kinds.length === 0) return null;
    const earliestMs = this.read(() => {
      const nowMs = this.clock(params.now);
      // Foreign kinds are left out: a job this worker cannot run must not wake it.
      return this.jobs.nextRunAt(this.claims.pendingTriples(params.queues, params), params, nowMs);
    });
    return earliestMs === null ? null : new Date(earliestMs);
  }

  async deadLetterList(params: DeadLetterListParams): Promise<Job[]> {
    const page = checkDeadLetterListParams(params);
    return this.read(() => this.dashboard.list(page)).map(rowToJob);
  }

  async deadLetterRetry(params: DeadLetterRetryParams): Promise<Job | null> {
    const id = parseJobId(params.id);
    if (id === null) return null;
    const result = this.write(() => {
      const nowMs = this.clock(params.now);
      const row = this.jobs.deadRetry(id, nowMs);
      return row ? { row, nowMs } : null;
    });
    if (!result) return null;
    this.notify(result.row.run_at, result.nowMs);
    return rowToJob(result.row);
  }

  async deadLetterPurge(params: DeadLetterPurgeParams): Promise<number> {
    const ids = params.ids?.map(parseJobId).filter((id): id is number => id !== null);
    const hasIds = ids !== undefined && ids.length > 0;
    if (!hasIds && params.parkedBefore === undefined) return 0;
    const before = params.parkedBefore === undefined ? null : params.parkedBefore.getTime();
    return this.write(() => this.jobs.deadPurge(hasIds ? ids : null, before));
  }

  async queueStats(params: { now?: Date | undefined } = {}): Promise<QueueStats[]> {
    return this.read(() => this.jobs.queueStats(this.clock(params.now)));
  }

  async jobDueCountsByKind(params: DueCountsParams = {}): Promise<DueKindCount[]> {
    const cap = params.exactUpTo === undefined ? null : checkExactUpTo(params.exactUpTo);
    return this.read(() =>
      this.jobs.dueCountsByKind(this.claims.pendingTriples(undefined), this.clock(params.now), cap),
    );
  }

  async workerRegister(params: WorkerRegisterParams): Promise<WorkerRecord> {
    const { worker, ttlMs } = validateWorkerRegister(params);
    return this.write(() => this.workers.register(worker, this.clock(params.now), ttlMs));
  }

  async workerDeregister(params: { id: string }): Promise<boolean> {
    const id = validateWorkerId(params.id);
    return this.write(() => this.workers.deregister(id));
  }

  async workerList(params: AtTime = {}): Promise<WorkerRecord[]> {
    return this.write(() => this.workers.list(this.clock(params.now)));
  }

  async queuePause(params: QueueNameParams): Promise<QueueState> {
    const name = validateQueue(params.name, 'name');
    return this.write(() => this.schedules.queuePause(name, this.clock(params.now)));
  }

  async queueResume(params: QueueNameParams): Promise<QueueState> {
    const name = validateQueue(params.name, 'name');
    const { state, nowMs } = this.write(() => ({
      state: this.schedules.queueResume(name),
      nowMs: this.clock(params.now),
    }));
    // Its due jobs are claimable at once.
    this.notify(nowMs, nowMs);
    return state;
  }

  async queueList(): Promise<QueueState[]> {
    return this.schedules.queueList();
  }

  async scheduleUpsert(params: ScheduleUpsertParams): Promise<ScheduleUpsertResult> {
    const { spec } = params;
    assertPlannableSpec(spec);
    const { result, earliestMs, nowMs } = this.write(() => {
      const nowMs = this.clock(params.now);
      const inserted = this.schedules.insert(spec, nowMs);
      const before = inserted ? null : this.schedules.mustGet(spec.id);
      if (!inserted) this.schedules.replace(spec, nowMs);
      const plan = planUpsert(before, spec, new Date(nowMs));
      if (plan.deleteUnstartedRuns) this.schedules.deleteUnstartedRuns(spec.id);
      if (plan.pause) this.schedules.setPaused(spec.id, true, nowMs);
      const earliestMs = plan.advance === null ? null : this.schedules.apply([plan.advance], nowMs);
      return { result: { schedule: this.schedules.mustGet(spec.id), created: before === null }, earliestMs, nowMs };
    });
    this.notify(earliestMs, nowMs);
    return result;
  }

  async scheduleGet(params: { id: string }): Promise<Schedule | null> {
    return this.schedules.get(params.id);
  }

  async scheduleList(params: ScheduleListParams): Promise<Schedule[]> {
    return this.schedules.list(params.afterId, params.paused, pageSize(params.limit));
  }

  async schedulePause(params: ScheduleIdParams): Promise<Schedule | null> {
    return this.write(() => {
      const schedule = this.schedules.get(params.id);
      if (!schedule || schedule.paused) return schedule;
      this.schedules.deleteUnstartedRuns(params.id);
      this.schedules.setPaused(params.id, true, this.clock(params.now));
      return this.schedules.mustGet(params.id);
    });
  }

  async scheduleResume(params: ScheduleIdParams): Promise<Schedule | null> {
    const result = this.write(() => {
      const schedule = this.schedules.get(params.id);
      if (!schedule?.paused) return { schedule, earliestMs: null, nowMs: 0 };
      const nowMs = this.clock(params.now);
      const now = new Date(nowMs);
      this.schedules.setPaused(params.id, false, nowMs);
      // Planned from now: slots that passed while paused are not misfires and never run.
      const earliestMs = this.schedules.apply([advanceSchedule(schedule, now, now, false)], nowMs);
      return { schedule: this.schedules.mustGet(params.id), earliestMs, nowMs };
    });
    this.notify(result.earliestMs, result.nowMs);
    return result.schedule;
  }

  async scheduleDelete(params: { id: string }): Promise<boolean> {
    return this.write(() => {
      if (!this.schedules.delete(params.id)) return false;
      this.schedules.deleteUnstartedRuns(params.id);
      return true;
    });
  }

  async scheduleRepair(params: ScheduleRepairParams = {}): Promise<number> {
    const limit = params.limit ?? 100;
    const { repaired, earliestMs, nowMs } = this.write(() => {
      const nowMs = this.clock(params.now);
      const now = new Date(nowMs);
      // From the last slot: the slots since are misfires, which each schedule's policy decides.
      const advances = this.schedules
        .broken(limit)
        .map((schedule) => advanceSchedule(schedule, plannedThroughSlotAt(schedule) as Date, now, false));
      const earliestMs = this.schedules.apply(advances, nowMs);
      return { repaired: advances.filter((advance) => advance.runs.length > 0).length, earliestMs, nowMs };
    });
    this.notify(earliestMs, nowMs);
    return repaired;
  }

  async subscribe(listener: (wakeUp: WakeUp) => void): Promise<() => Promise<void>> {
    if (this.closed) throw new ConfigurationError('SqliteStore.subscribe: the store is closed');
    this.listeners.add(listener);
    this.foreignSubmits?.start();
    return async () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.foreignSubmits?.stop();
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.listeners.clear();
    this.foreignSubmits?.stop();
    this.db.close();
  }
}

/** The error for an operation that needs `capabilities.reservableJobIds`. */
function noReservableIds(operation: string): ConfigurationError {
  return new ConfigurationError(
    `SqliteStore.${operation}: this store does not reserve job ids (capabilities.reservableJobIds is false); ` +
      'its writes never cross a connection, so a submit is never retried',
  );
}

/**
 * SQLite cannot join a caller's transaction (`capabilities.callerTransactions` is false): its one
 * connection per store is not the caller's, so the write could not commit or roll back with theirs.
 */
function refuseCallerTransaction(transaction: unknown, operation: string): void {
  if (transaction === undefined) return;
  throw new ConfigurationError(
    `SqliteStore.${operation}: this store cannot join a caller's transaction (capabilities.callerTransactions is false); ` +
      'transactional submit and completion need PostgreSQL. Leave out the transaction option to write on its own.',
  );
}

/** Switches the file to WAL, retrying while other processes opening it at the same moment hold it. */
function setWalMode(db: Database.Database, busyTimeoutMs: number): void {
  const deadline = Date.now() + Math.max(busyTimeoutMs, 1000);
  for (;;) {
    try {
      const mode = db.pragma('journal_mode = WAL', { simple: true });
      if (String(mode).toLowerCase() !== 'wal') throw new Error(`SQLite refused WAL mode (journal_mode=${mode})`);
      return;
    } catch (error) {
      const busy = (error as { code?: string }).code?.startsWith('SQLITE_BUSY') ?? false;
      if (!busy || Date.now() >= deadline) throw error;
      // A synchronous pause: open() has nothing else to do, and the other opener needs milliseconds.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
}
