/**
 * SqliteStore: the embedded Store, one SQLite file shared by every process on a host.
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
 * Wake-ups: no cross-process notification exists, so capabilities say listenNotify: false and
 * other processes find work by polling; in-process subscribers hear of submits, retries and
 * releases due within {@link WAKE_UP_HORIZON_MS}.
 */
import Database from 'better-sqlite3';
import { ConfigurationError, ValidationError } from '../../job/errors.js';
import type { ClaimedJob, Job, JobState } from '../../job/job.js';
import { JOB_STATES } from '../../job/job.js';
import { validateQueue } from '../../job/job-spec.js';
import type { Schedule } from '../../schedule/schedule.js';
import type { OpenStoreOptions } from '../open-store.js';
import {
  advanceSchedule,
  assertPlannableSpec,
  decideClaimedRun,
  type ScheduleAdvance,
  timingChanged,
} from '../schedule-plan.js';
import type {
  CancelOutcome,
  CompleteOutcome,
  DeadLetterListParams,
  DeadLetterPurgeParams,
  DeadLetterRetryParams,
  FailOutcome,
  JobCancelParams,
  JobClaimParams,
  JobCompleteManyParams,
  JobCompleteParams,
  JobFailParams,
  JobHeartbeatManyParams,
  JobHeartbeatParams,
  JobLease,
  JobListParams,
  JobPruneParams,
  JobReleaseByOwnerParams,
  JobReleaseParams,
  JobSubmitParams,
  NextRunAtParams,
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
} from '../store.js';
import * as sql from './job-queries.js';
import { attemptErrorJson, type JobRow, rowToJob } from './job-row.js';
import { runSqliteMigrations } from './migrations.js';
import * as scheduleSql from './schedule-queries.js';
import { type QueueRow, rowToQueueState, rowToSchedule, type ScheduleRow, scheduleParams } from './schedule-queries.js';

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
export const LEASE_EXPIRED_MESSAGE = 'lease expired: the worker stopped heartbeating (crashed or stalled)';

/** Rows deleted per transaction when pruning, so other processes' claims wait milliseconds, not seconds. */
const PRUNE_BATCH = 5000;

const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;

/** A claim candidate as JOB_DUE_PENDING and JOB_LAPSED return it. */
interface Candidate {
  id: number;
  priority: number;
  run_at: number;
}

/** The contract's claim order: priority (lower first), then run_at, then id. */
function claimOrder(
  a: Pick<Candidate, 'priority' | 'run_at' | 'id'>,
  b: Pick<Candidate, 'priority' | 'run_at' | 'id'>,
): number {
  return a.priority - b.priority || a.run_at - b.run_at || a.id - b.id;
}

type Listener = (wakeUp: WakeUp) => void;

/** Parses a job id; null for anything that cannot name a row (callers answer "not found"). */
function parseId(id: string): number | null {
  if (typeof id !== 'string' || !/^[0-9]{1,16}$/.test(id)) return null;
  const value = Number(id);
  return Number.isSafeInteger(value) ? value : null;
}

function pageSize(limit: number | undefined): number {
  if (limit === undefined) return DEFAULT_PAGE;
  if (!Number.isInteger(limit) || limit < 1) {
    throw new ValidationError('limit', `must be a positive integer, got ${String(limit)}`);
  }
  return Math.min(limit, MAX_PAGE);
}

function afterIdOf(afterId: string | undefined): number {
  if (afterId === undefined) return 0;
  const value = parseId(afterId);
  if (value === null) throw new ValidationError('afterId', `must be a job id, got ${JSON.stringify(afterId)}`);
  return value;
}

function positiveMs(field: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new ValidationError(field, `must be a positive integer of milliseconds, got ${String(value)}`);
  }
  return value;
}

/** The embedded store on better-sqlite3; see the file header for its locking, clock and durability. */
export class SqliteStore implements Store {
  readonly capabilities: StoreCapabilities = { listenNotify: false, skipLocked: false, callerTransactions: false };

  /** Migration versions this open applied (empty when the file was already current). */
  readonly appliedMigrations: readonly number[];

  private readonly db: Database.Database;
  private readonly listeners = new Set<Listener>();
  private closed = false;
  private readonly stmt: Statements;

  private constructor(db: Database.Database, appliedMigrations: number[]) {
    this.db = db;
    this.appliedMigrations = appliedMigrations;
    this.stmt = prepareStatements(db);
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
      return new SqliteStore(db, applied);
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
    return now === undefined ? (this.stmt.now.get() as number) : now.getTime();
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
    if (earliestMs === null || earliestMs > nowMs + WAKE_UP_HORIZON_MS || this.listeners.size === 0) return;
    const wakeUp: WakeUp = { runAt: new Date(earliestMs) };
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
    if (params.jobs.length === 0) return [];
    const { results, nowMs, earliestMs } = this.write(() => {
      const nowMs = this.clock(params.now);
      let earliestMs: number | null = null;
      const results = params.jobs.map((spec): SubmitResult => {
        if (spec.idempotencyKey !== null) {
          // Also finds a job inserted earlier in this batch: a repeated key maps to the first.
          const existing = this.stmt.findLiveByKey.get({ key: spec.idempotencyKey });
          if (existing) return { id: String(existing.id), created: false, runAt: new Date(existing.run_at) };
        }
        const runAtMs = spec.runAt === null ? nowMs + Math.ceil(spec.delayMs) : spec.runAt.getTime();
        const row = this.stmt.insert.get({
          kind: spec.kind,
          queue: spec.queue,
          payload: spec.payloadJson,
          priority: spec.priority,
          run_at: runAtMs,
          max_attempts: spec.maxAttempts,
          retry_policy: JSON.stringify(spec.retryPolicy),
          idempotency_key: spec.idempotencyKey,
          timeout_ms: spec.timeoutMs,
          schedule_id: spec.scheduleId,
          schedule_slot: spec.scheduleSlot === null ? null : spec.scheduleSlot.getTime(),
          now: nowMs,
        });
        if (!row) throw new Error('INSERT … RETURNING returned no row');
        if (earliestMs === null || row.run_at < earliestMs) earliestMs = row.run_at;
        return { id: String(row.id), created: true, runAt: new Date(row.run_at) };
      });
      return { results, nowMs, earliestMs };
    });
    this.notify(earliestMs, nowMs);
    return results;
  }

  async jobClaim(params: JobClaimParams): Promise<ClaimedJob[]> {
    if (!Number.isInteger(params.limit) || params.limit < 0) {
      throw new ValidationError('limit', `must be a non-negative integer, got ${String(params.limit)}`);
    }
    if (params.limit === 0) return [];
    const leaseMs = positiveMs('leaseMs', params.leaseMs);
    if (params.queues !== undefined && params.queues.length === 0) return [];
    const claimed = this.write(() => {
      const nowMs = this.clock(params.now);
      const queues = params.queues === undefined ? null : JSON.stringify(params.queues);
      // Every job in these queues whose last allowed attempt vanished without a result is parked
      // first, whatever the limit: handing it out would let a job that kills its worker every
      // time run for ever (invariant I5), and parking only the ones a small batch walked past
      // would leave the rest in a state that differs from store to store.
      for (const exhausted of this.stmt.lapsedExhausted.all({ now: nowMs, queues })) {
        this.moveToDead(exhausted.id, nowMs, {
          attempt: exhausted.attempts,
          atMs: nowMs,
          kind: 'lease_expired',
          message: `${LEASE_EXPIRED_MESSAGE}; parked after ${exhausted.attempts} attempts`,
        });
      }
      const candidates = this.claimCandidates(nowMs, params.limit, params.queues);
      if (candidates.length === 0) return { jobs: [], earliestMs: null, nowMs };
      const rows = this.stmt.claimMany.all({
        ids: JSON.stringify(candidates.map((candidate) => candidate.id)),
        now: nowMs,
        lease_until: nowMs + leaseMs,
        owner: params.owner,
        message: LEASE_EXPIRED_MESSAGE,
      });
      if (rows.length !== candidates.length) throw new Error('claim candidates vanished inside their transaction');
      const jobs = rows.sort(claimOrder).map((row) => rowToJob(row) as ClaimedJob);
      const planned = this.planClaimedRuns(jobs, nowMs);
      return { jobs: planned.jobs, earliestMs: planned.earliestMs, nowMs };
    });
    this.notify(claimed.earliestMs, claimed.nowMs);
    return claimed.jobs;
  }

  /**
   * The design's rule, inside the claim's transaction: for each claimed recurring run that is its
   * schedule's latest, plan the next run(s) with the transaction's now and insert them. Runs whose
   * schedule was paused or deleted and that never started are deleted instead of handed out (the
   * PostgreSQL twin needs this for a race; here it keeps the two stores' rules identical).
   */
  private planClaimedRuns(jobs: ClaimedJob[], nowMs: number): { jobs: ClaimedJob[]; earliestMs: number | null } {
    const runs = jobs
      .filter((job) => job.scheduleId !== null)
      .sort((a, b) => (a.scheduleSlot?.getTime() ?? 0) - (b.scheduleSlot?.getTime() ?? 0));
    if (runs.length === 0) return { jobs, earliestMs: null };
    const now = new Date(nowMs);
    const byId = new Map<string, Schedule | null>();
    const advances: ScheduleAdvance[] = [];
    const dropped = new Set<string>();
    for (const job of runs) {
      const id = job.scheduleId as string;
      if (!byId.has(id)) {
        const row = this.stmt.scheduleGet.get({ id });
        byId.set(id, row ? rowToSchedule(row) : null);
      }
      const schedule = byId.get(id) ?? null;
      const decision = decideClaimedRun(
        { schedule, slot: job.scheduleSlot, attempts: job.attempts, errorCount: job.errors.length },
        now,
      );
      if (decision.action === 'drop') dropped.add(job.id);
      if (decision.action !== 'plan' || schedule === null) continue;
      advances.push(decision.advance);
      byId.set(id, { ...schedule, lastSlotAt: decision.advance.lastSlotAt ?? schedule.lastSlotAt });
    }
    for (const id of dropped) this.stmt.delete.run({ id: Number(id) });
    const earliestMs = this.applyAdvances(advances, nowMs);
    return { jobs: jobs.filter((job) => !dropped.has(job.id)), earliestMs };
  }

  /**
   * Inserts planned runs (a slot that has a job already is skipped by the unique index) and moves
   * each schedule's progress columns; inside a write transaction. Returns the earliest inserted
   * run time, for the wake-up after commit.
   */
  private applyAdvances(advances: readonly ScheduleAdvance[], nowMs: number): number | null {
    let earliestMs: number | null = null;
    for (const advance of advances) {
      for (const run of advance.runs) {
        const inserted = this.stmt.scheduleInsertRun.get({
          id: advance.scheduleId,
          slot: run.slot.getTime(),
          run_at: run.runAt.getTime(),
          now: nowMs,
        });
        if (inserted && (earliestMs === null || inserted.run_at < earliestMs)) earliestMs = inserted.run_at;
      }
      this.stmt.scheduleAdvance.run({
        id: advance.scheduleId,
        last_slot_at: advance.lastSlotAt?.getTime() ?? null,
        next_slot_at: advance.nextSlotAt?.getTime() ?? null,
        next_run_at: advance.nextRunAt?.getTime() ?? null,
        now: nowMs,
      });
    }
    return earliestMs;
  }

  /**
   * The first `limit` claimable jobs in claim order (priority, run_at, id): lapsed leases from
   * jobs_running_lease, merged with each (queue, priority) pair's due range from
   * jobs_pending_claim. Pairs are read lowest priority first, and the walk stops once `limit`
   * candidates rank before every pair still unread, so a claim reads about `limit` rows.
   */
  private claimCandidates(nowMs: number, limit: number, queues: readonly string[] | undefined): Candidate[] {
    const candidates = this.stmt.lapsed.all({
      now: nowMs,
      limit,
      queues: queues === undefined ? null : JSON.stringify(queues),
    });
    const pairs = this.pendingPairs(queues).sort((a, b) => a.priority - b.priority);
    for (const pair of pairs) {
      const ahead = candidates.filter((candidate) => candidate.priority < pair.priority).length;
      if (ahead >= limit) break;
      candidates.push(...this.stmt.duePending.all({ ...pair, now: nowMs, limit }));
    }
    return candidates.sort(claimOrder).slice(0, limit);
  }

  /** The distinct (queue, priority) pairs holding pending jobs in queues not paused, one index seek each. */
  private pendingPairs(queues: readonly string[] | undefined): { queue: string; priority: number }[] {
    const paused = new Set(this.stmt.queuePausedNames.all() as string[]);
    const queueNames: string[] = [];
    if (queues === undefined) {
      for (let after = ''; ; ) {
        const queue = this.stmt.pendingNextQueue.get({ after }) as string | undefined;
        if (queue === undefined) break;
        queueNames.push(queue);
        after = queue;
      }
    } else {
      queueNames.push(...new Set(queues));
    }
    const pairs: { queue: string; priority: number }[] = [];
    for (const queue of queueNames) {
      // A paused queue's backlog is never walked: claims and next-run-at skip it.
      if (paused.has(queue)) continue;
      for (let after = Number.MIN_SAFE_INTEGER; ; ) {
        const priority = this.stmt.pendingNextPriority.get({ queue, after }) as number | undefined;
        if (priority === undefined) break;
        pairs.push({ queue, priority });
        after = priority;
      }
    }
    return pairs;
  }

  /** Moves a job from jobs to dead_jobs with one more error entry; inside a write transaction. */
  private moveToDead(id: number, nowMs: number, entry: Parameters<typeof attemptErrorJson>[0]): void {
    this.stmt.park.run({ id, now: nowMs, entry: attemptErrorJson(entry) });
    this.stmt.delete.run({ id });
  }

  private heartbeatOne(lease: JobLease, leaseMs: number, nowMs: number): Date | null {
    const id = parseId(lease.id);
    if (id === null) return null;
    const row = this.stmt.heartbeat.get({ id, token: lease.token, now: nowMs, lease_until: nowMs + leaseMs });
    return row ? new Date(row.lease_until) : null;
  }

  async jobHeartbeat(params: JobHeartbeatParams): Promise<Date | null> {
    const leaseMs = positiveMs('leaseMs', params.leaseMs);
    return this.write(() => this.heartbeatOne(params, leaseMs, this.clock(params.now)));
  }

  async jobHeartbeatMany(params: JobHeartbeatManyParams): Promise<(Date | null)[]> {
    if (params.leases.length === 0) return [];
    const leaseMs = positiveMs('leaseMs', params.leaseMs);
    return this.write(() => {
      const nowMs = this.clock(params.now);
      return params.leases.map((lease) => this.heartbeatOne(lease, leaseMs, nowMs));
    });
  }

  private completeOne(lease: JobLease, nowMs: number): CompleteOutcome {
    const id = parseId(lease.id);
    if (id === null) return 'stale';
    if (this.stmt.complete.run({ id, token: lease.token, now: nowMs }).changes === 1) return 'done';
    // Already done under this token: our earlier completion committed and only its reply was lost.
    return this.stmt.doneWithToken.get({ id, token: lease.token }) === undefined ? 'stale' : 'done';
  }

  async jobComplete(params: JobCompleteParams): Promise<CompleteOutcome> {
    refuseCallerTransaction(params.transaction, 'jobComplete');
    return this.write(() => this.completeOne(params, this.clock(params.now)));
  }

  async jobCompleteMany(params: JobCompleteManyParams): Promise<CompleteOutcome[]> {
    if (params.leases.length === 0) return [];
    return this.write(() => {
      const nowMs = this.clock(params.now);
      return params.leases.map((lease) => this.completeOne(lease, nowMs));
    });
  }

  async jobFail(params: JobFailParams): Promise<FailOutcome> {
    const id = parseId(params.id);
    if (id === null) return { outcome: 'stale' };
    const { outcome, nowMs } = this.write((): { outcome: FailOutcome; nowMs: number } => {
      const nowMs = this.clock(params.now);
      const held = this.stmt.findHeld.get({ id, token: params.token });
      if (!held) return { outcome: { outcome: 'stale' }, nowMs };
      const entry = {
        attempt: held.attempts,
        atMs: nowMs,
        kind: params.error.kind,
        message: params.error.message,
        detail: params.error.detail,
      };
      if (params.decision.kind === 'park') {
        this.moveToDead(id, nowMs, entry);
        return { outcome: { outcome: 'parked' }, nowMs };
      }
      // Rounded up: a retry is never earlier than its backoff's lower bound (invariant I4).
      const runAtMs = nowMs + Math.max(0, Math.ceil(params.decision.delayMs));
      this.stmt.retry.run({ id, run_at: runAtMs, entry: attemptErrorJson(entry) });
      return { outcome: { outcome: 'retry', runAt: new Date(runAtMs) }, nowMs };
    });
    if (outcome.outcome === 'retry') this.notify(outcome.runAt.getTime(), nowMs);
    return outcome;
  }

  async jobRelease(params: JobReleaseParams): Promise<ReleaseOutcome> {
    const id = parseId(params.id);
    if (id === null) return 'stale';
    const { released, nowMs } = this.write(() => {
      const nowMs = this.clock(params.now);
      const released = this.stmt.release.run({ id, token: params.token, now: nowMs }).changes === 1;
      return { released, nowMs };
    });
    if (!released) return 'stale';
    // Due at once (its run_at is at or before now), so the wake-up says now.
    this.notify(nowMs, nowMs);
    return 'released';
  }

  async jobReleaseByOwner(params: JobReleaseByOwnerParams): Promise<number> {
    const { count, nowMs } = this.write(() => {
      const nowMs = this.clock(params.now);
      const count = this.stmt.releaseByOwner.all({ owner: params.owner, now: nowMs }).length;
      return { count, nowMs };
    });
    if (count > 0) this.notify(nowMs, nowMs);
    return count;
  }

  async jobCancel(params: JobCancelParams): Promise<CancelOutcome> {
    const id = parseId(params.id);
    if (id === null) return 'not_found';
    return this.write((): CancelOutcome => {
      const nowMs = this.clock(params.now);
      if (this.stmt.cancel.run({ id, now: nowMs }).changes === 1) return 'cancelled';
      const exists = this.stmt.get.get({ id }) ?? this.stmt.deadGet.get({ id });
      return exists ? 'already_finished' : 'not_found';
    });
  }

  async jobGet(params: { id: string }): Promise<Job | null> {
    const id = parseId(params.id);
    if (id === null) return null;
    const row = this.read(() => this.stmt.get.get({ id }) ?? this.stmt.deadGet.get({ id }));
    return row ? rowToJob(row) : null;
  }

  async jobList(params: JobListParams): Promise<Job[]> {
    const limit = pageSize(params.limit);
    const afterId = afterIdOf(params.afterId);
    const states = params.states === undefined ? [...JOB_STATES] : [...params.states];
    for (const [index, state] of states.entries()) {
      if (!(JOB_STATES as readonly string[]).includes(state)) {
        throw new ValidationError(`states[${index}]`, `must be one of ${JOB_STATES.join(', ')}, got ${String(state)}`);
      }
    }
    const tableStates = states.filter((state): state is Exclude<JobState, 'dead'> => state !== 'dead');
    const filter = { queue: params.queue ?? null, kind: params.kind ?? null, after_id: afterId, limit };
    const rows = this.read(() => {
      const live = tableStates.length > 0 ? this.stmt.list.all({ ...filter, states: JSON.stringify(tableStates) }) : [];
      const dead = states.includes('dead') ? this.stmt.deadList.all(filter) : [];
      return [...live, ...dead].sort((a, b) => a.id - b.id).slice(0, limit);
    });
    return rows.map(rowToJob);
  }

  async jobPruneFinished(params: JobPruneParams): Promise<number> {
    const before = params.finishedBefore.getTime();
    let total = 0;
    for (;;) {
      const deleted = this.write(() => this.stmt.pruneBatch.run({ before, limit: PRUNE_BATCH }).changes);
      total += deleted;
      if (deleted < PRUNE_BATCH) return total;
    }
  }

  async jobNextRunAt(params: NextRunAtParams): Promise<Date | null> {
    if (params.queues !== undefined && params.queues.length === 0) return null;
    const queues = params.queues === undefined ? null : JSON.stringify(params.queues);
    const earliestMs = this.read(() => {
      const nowMs = this.clock(params.now);
      let earliest: number | null = null;
      for (const pair of this.pendingPairs(params.queues)) {
        const runAt = this.stmt.firstPendingRunAt.get(pair) as number | undefined;
        if (runAt !== undefined && (earliest === null || runAt < earliest)) earliest = runAt;
      }
      const leaseEnd = this.stmt.nextLeaseEnd.get({ queues }) as number | undefined;
      if (leaseEnd !== undefined && (earliest === null || leaseEnd < earliest)) earliest = leaseEnd;
      return earliest === null ? null : Math.max(earliest, nowMs);
    });
    return earliestMs === null ? null : new Date(earliestMs);
  }

  async deadLetterList(params: DeadLetterListParams): Promise<Job[]> {
    const rows = this.stmt.deadList.all({
      queue: params.queue ?? null,
      kind: params.kind ?? null,
      after_id: afterIdOf(params.afterId),
      limit: pageSize(params.limit),
    });
    return rows.map(rowToJob);
  }

  async deadLetterRetry(params: DeadLetterRetryParams): Promise<Job | null> {
    const id = parseId(params.id);
    if (id === null) return null;
    const result = this.write(() => {
      const nowMs = this.clock(params.now);
      if (this.stmt.deadRetry.run({ id, now: nowMs }).changes === 0) return null;
      this.stmt.deadDelete.run({ id });
      const row = this.stmt.get.get({ id });
      return row ? { row, nowMs } : null;
    });
    if (!result) return null;
    this.notify(result.row.run_at, result.nowMs);
    return rowToJob(result.row);
  }

  async deadLetterPurge(params: DeadLetterPurgeParams): Promise<number> {
    const ids = params.ids?.map(parseId).filter((id): id is number => id !== null);
    const hasIds = ids !== undefined && ids.length > 0;
    if (!hasIds && params.parkedBefore === undefined) return 0;
    return this.write(
      () =>
        this.stmt.deadPurge.run({
          ids: hasIds ? JSON.stringify(ids) : null,
          before: params.parkedBefore === undefined ? null : params.parkedBefore.getTime(),
        }).changes,
    );
  }

  async queueStats(params: { now?: Date | undefined } = {}): Promise<QueueStats[]> {
    return this.read(() => {
      const nowMs = this.clock(params.now);
      return this.stmt.queueStats.all({ now: nowMs }).map((row) => {
        const stats: QueueStats = {
          queue: row.queue,
          scheduled: Number(row.scheduled),
          available: Number(row.available),
          running: Number(row.running),
          done: Number(row.done),
          cancelled: Number(row.cancelled),
          dead: Number(row.dead),
        };
        if (Number(row.paused) === 1) stats.paused = true;
        return stats;
      });
    });
  }

  async queuePause(params: QueueNameParams): Promise<QueueState> {
    const name = validateQueue(params.name, 'name');
    return this.write(() => {
      const row = this.stmt.queuePause.get({ name, now: this.clock(params.now) });
      return rowToQueueState(row as QueueRow);
    });
  }

  async queueResume(params: QueueNameParams): Promise<QueueState> {
    const name = validateQueue(params.name, 'name');
    const { state, nowMs } = this.write(() => ({
      state: rowToQueueState(this.stmt.queueResume.get({ name }) as QueueRow),
      nowMs: this.clock(params.now),
    }));
    // Its due jobs are claimable at once.
    this.notify(nowMs, nowMs);
    return state;
  }

  async queueList(): Promise<QueueState[]> {
    return this.stmt.queueList.all().map(rowToQueueState);
  }

  async scheduleUpsert(params: ScheduleUpsertParams): Promise<ScheduleUpsertResult> {
    const { spec } = params;
    assertPlannableSpec(spec);
    const { result, earliestMs, nowMs } = this.write(() => {
      const nowMs = this.clock(params.now);
      const now = new Date(nowMs);
      const values = scheduleParams(spec, nowMs);
      const inserted = this.stmt.scheduleInsert.get(values);
      if (inserted) {
        if (spec.paused)
          return { result: { schedule: rowToSchedule(inserted), created: true }, earliestMs: null, nowMs };
        // Starts afresh at now: nothing before its creation counts as missed.
        const earliestMs = this.applyAdvances([advanceSchedule(spec, now, now, false)], nowMs);
        return { result: { schedule: this.mustGetSchedule(spec.id), created: true }, earliestMs, nowMs };
      }
      const before = rowToSchedule(this.stmt.scheduleGet.get({ id: spec.id }) as ScheduleRow);
      this.stmt.scheduleReplace.run(values);
      let earliestMs: number | null = null;
      if (spec.paused) {
        this.stmt.scheduleDeleteUnstartedRuns.run({ id: spec.id });
        this.stmt.scheduleSetPaused.run({ id: spec.id, paused: 1, now: nowMs });
      } else if (before.paused || timingChanged(before, spec)) {
        this.stmt.scheduleDeleteUnstartedRuns.run({ id: spec.id });
        earliestMs = this.applyAdvances([advanceSchedule(spec, now, now, false)], nowMs);
      }
      return { result: { schedule: this.mustGetSchedule(spec.id), created: false }, earliestMs, nowMs };
    });
    this.notify(earliestMs, nowMs);
    return result;
  }

  async scheduleGet(params: { id: string }): Promise<Schedule | null> {
    const row = this.stmt.scheduleGet.get({ id: params.id });
    return row ? rowToSchedule(row) : null;
  }

  async scheduleList(params: ScheduleListParams): Promise<Schedule[]> {
    const rows = this.stmt.scheduleList.all({
      after_id: params.afterId ?? '',
      paused: params.paused === undefined ? null : params.paused ? 1 : 0,
      limit: pageSize(params.limit),
    });
    return rows.map(rowToSchedule);
  }

  async schedulePause(params: ScheduleIdParams): Promise<Schedule | null> {
    return this.write(() => {
      const row = this.stmt.scheduleGet.get({ id: params.id });
      if (!row || row.paused === 1) return row ? rowToSchedule(row) : null;
      this.stmt.scheduleDeleteUnstartedRuns.run({ id: params.id });
      this.stmt.scheduleSetPaused.run({ id: params.id, paused: 1, now: this.clock(params.now) });
      return this.mustGetSchedule(params.id);
    });
  }

  async scheduleResume(params: ScheduleIdParams): Promise<Schedule | null> {
    const result = this.write(() => {
      const row = this.stmt.scheduleGet.get({ id: params.id });
      if (!row || row.paused === 0) return { schedule: row ? rowToSchedule(row) : null, earliestMs: null, nowMs: 0 };
      const nowMs = this.clock(params.now);
      const now = new Date(nowMs);
      this.stmt.scheduleSetPaused.run({ id: params.id, paused: 0, now: nowMs });
      // Planned from now: slots that passed while paused are not misfires and never run.
      const earliestMs = this.applyAdvances([advanceSchedule(rowToSchedule(row), now, now, false)], nowMs);
      return { schedule: this.mustGetSchedule(params.id), earliestMs, nowMs };
    });
    this.notify(result.earliestMs, result.nowMs);
    return result.schedule;
  }

  async scheduleDelete(params: { id: string }): Promise<boolean> {
    return this.write(() => {
      if (this.stmt.scheduleDelete.run({ id: params.id }).changes === 0) return false;
      this.stmt.scheduleDeleteUnstartedRuns.run({ id: params.id });
      return true;
    });
  }

  async scheduleRepair(params: ScheduleRepairParams = {}): Promise<number> {
    const limit = params.limit ?? 100;
    const { repaired, earliestMs, nowMs } = this.write(() => {
      const nowMs = this.clock(params.now);
      const now = new Date(nowMs);
      // From the last slot: the slots since are misfires, which each schedule's policy decides.
      const advances = this.stmt.scheduleBroken
        .all({ limit })
        .map(rowToSchedule)
        .map((schedule) => advanceSchedule(schedule, schedule.lastSlotAt as Date, now, false));
      const earliestMs = this.applyAdvances(advances, nowMs);
      return { repaired: advances.filter((advance) => advance.runs.length > 0).length, earliestMs, nowMs };
    });
    this.notify(earliestMs, nowMs);
    return repaired;
  }

  /** A schedule that must exist (read back inside the transaction that wrote it). */
  private mustGetSchedule(id: string): Schedule {
    const row = this.stmt.scheduleGet.get({ id });
    if (!row) throw new Error(`schedule ${id} vanished inside its own transaction`);
    return rowToSchedule(row);
  }

  async subscribe(listener: (wakeUp: WakeUp) => void): Promise<() => Promise<void>> {
    if (this.closed) throw new ConfigurationError('SqliteStore.subscribe: the store is closed');
    this.listeners.add(listener);
    return async () => {
      this.listeners.delete(listener);
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.listeners.clear();
    this.db.close();
  }
}

/**
 * Prepares every statement once per connection: re-preparing per call costs more than most of
 * these statements take to run.
 */
function prepareStatements(db: Database.Database) {
  return {
    now: db.prepare(sql.DATABASE_NOW).pluck(),
    findLiveByKey: db.prepare<{ key: string }, { id: number; run_at: number }>(sql.JOB_FIND_LIVE_BY_KEY),
    insert: db.prepare<Record<string, unknown>, { id: number; run_at: number }>(sql.JOB_INSERT),
    pendingNextQueue: db.prepare(sql.JOB_PENDING_NEXT_QUEUE).pluck(),
    pendingNextPriority: db.prepare(sql.JOB_PENDING_NEXT_PRIORITY).pluck(),
    duePending: db.prepare<Record<string, unknown>, Candidate>(sql.JOB_DUE_PENDING),
    lapsed: db.prepare<Record<string, unknown>, Candidate>(sql.JOB_LAPSED),
    lapsedExhausted: db.prepare<Record<string, unknown>, { id: number; attempts: number }>(sql.JOB_LAPSED_EXHAUSTED),
    claimMany: db.prepare<Record<string, unknown>, JobRow>(sql.JOB_CLAIM_MANY),
    park: db.prepare(sql.JOB_PARK),
    delete: db.prepare(sql.JOB_DELETE),
    heartbeat: db.prepare<Record<string, unknown>, { lease_until: number }>(sql.JOB_HEARTBEAT),
    complete: db.prepare(sql.JOB_COMPLETE),
    doneWithToken: db.prepare<{ id: number; token: number }>(sql.JOB_DONE_WITH_TOKEN),
    findHeld: db.prepare<Record<string, unknown>, { attempts: number }>(sql.JOB_FIND_HELD),
    retry: db.prepare(sql.JOB_RETRY),
    release: db.prepare(sql.JOB_RELEASE),
    releaseByOwner: db.prepare(sql.JOB_RELEASE_BY_OWNER),
    cancel: db.prepare(sql.JOB_CANCEL),
    get: db.prepare<{ id: number }, JobRow>(sql.JOB_GET),
    deadGet: db.prepare<{ id: number }, JobRow>(sql.DEAD_GET),
    list: db.prepare<Record<string, unknown>, JobRow>(sql.JOB_LIST),
    deadList: db.prepare<Record<string, unknown>, JobRow>(sql.DEAD_LIST),
    pruneBatch: db.prepare(sql.JOB_PRUNE_BATCH),
    firstPendingRunAt: db.prepare(sql.JOB_FIRST_PENDING_RUN_AT).pluck(),
    nextLeaseEnd: db.prepare(sql.JOB_NEXT_LEASE_END).pluck(),
    deadRetry: db.prepare(sql.DEAD_RETRY),
    deadDelete: db.prepare(sql.DEAD_DELETE),
    deadPurge: db.prepare(sql.DEAD_PURGE),
    queueStats: db.prepare<{ now: number }, Omit<QueueStats, 'paused'> & { paused: number }>(sql.QUEUE_STATS),
    scheduleInsert: db.prepare<Record<string, unknown>, ScheduleRow>(scheduleSql.SCHEDULE_INSERT),
    scheduleReplace: db.prepare<Record<string, unknown>, ScheduleRow>(scheduleSql.SCHEDULE_REPLACE),
    scheduleGet: db.prepare<{ id: string }, ScheduleRow>(scheduleSql.SCHEDULE_GET),
    scheduleList: db.prepare<Record<string, unknown>, ScheduleRow>(scheduleSql.SCHEDULE_LIST),
    scheduleSetPaused: db.prepare<Record<string, unknown>, ScheduleRow>(scheduleSql.SCHEDULE_SET_PAUSED),
    scheduleDelete: db.prepare<{ id: string }>(scheduleSql.SCHEDULE_DELETE),
    scheduleDeleteUnstartedRuns: db.prepare<{ id: string }>(scheduleSql.SCHEDULE_DELETE_UNSTARTED_RUNS),
    scheduleInsertRun: db.prepare<Record<string, unknown>, { run_at: number }>(scheduleSql.SCHEDULE_INSERT_RUN),
    scheduleAdvance: db.prepare<Record<string, unknown>, ScheduleRow>(scheduleSql.SCHEDULE_ADVANCE),
    scheduleBroken: db.prepare<{ limit: number }, ScheduleRow>(scheduleSql.SCHEDULE_BROKEN),
    queuePause: db.prepare<{ name: string; now: number }, QueueRow>(scheduleSql.QUEUE_PAUSE),
    queueResume: db.prepare<{ name: string }, QueueRow>(scheduleSql.QUEUE_RESUME),
    queueList: db.prepare<[], QueueRow>(scheduleSql.QUEUE_LIST),
    queuePausedNames: db.prepare(scheduleSql.QUEUE_PAUSED_NAMES).pluck(),
  };
}

type Statements = ReturnType<typeof prepareStatements>;

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
