/**
 * The worker runtime: turns claimed rows into executed handlers.
 *
 * Overview. A {@link JobClaimer} leases due jobs into free slots (and, with `prefetch`, into a local
 * buffer of leased jobs that start as slots free, without a round trip); each job's handler runs with an
 * AbortSignal while the {@link LeaseRenewer} heartbeats every lease this worker holds in one batch;
 * a return is completed through the {@link JobCompleter} (batched, each fenced by its own token),
 * a throw is recorded with `jobFail` and a decision from `decideAfterFailure`.
 *
 * Invariants:
 * - A job's outcome is written only while this worker still holds its lease. Once the lease is
 *   lost (heartbeat refused, cancelled, not confirmable), its timeout passes or shutdown's grace
 *   ends, the signal aborts, the slot is freed and nothing the handler later returns is written
 *   (it is counted as `discarded`). A timeout still records the failed attempt, under the lease.
 * - Every lease ends in exactly one of: complete, fail, release, or lost (left to lapse), or is
 *   handed to the handler's own transaction by `ctx.completeInTransaction` (then that
 *   transaction's commit completes the job, and its rollback leaves the lease to lapse).
 * - The database decides: the worker clock never judges a lease except to presume it lost when no
 *   heartbeat can reach the database before it would lapse.
 * - Nothing escapes as an unhandled rejection: every store call is awaited inside a try, errors
 *   are logged and emitted as `'error'` events and retried with backoff.
 *
 * Shutdown (`stop`): stop claiming (claims already in flight and prefetched jobs are released at once), let running
 * handlers finish within `shutdownGraceMs`, then abort the rest and release their leases so another
 * worker takes them immediately, write every pending outcome, stop heartbeating, clear every timer.
 */
import { performance } from 'node:perf_hooks';
import { ConfigurationError } from '../job/errors.js';
import type { AttemptError, ClaimedJob } from '../job/job.js';
import { decideAfterFailure, type RetryHints } from '../retry/backoff.js';
import type { JobLease, Store } from '../store/store.js';
import type { DocketEvents } from './docket-events.js';
import { JobClaimer } from './job-claimer.js';
import { JobCompleter } from './job-completer.js';
import type { HandlerOutcome } from './job-executor.js';
import { createJobContext, InvocationAbort, invokeHandler } from './job-executor.js';
import type { AbortReason, JobHandler } from './job-handler.js';
import { JobAbortError, StaleLeaseError } from './job-handler.js';
import type { LeaseLossReason } from './lease-renewer.js';
import { LeaseRenewer } from './lease-renewer.js';
import type { Logger } from './logger.js';
import { childLogger, errorFields } from './logger.js';
import { ScheduleRepairer } from './schedule-repairer.js';
import type { ResolvedWorkerOptions, WorkerOptions } from './worker-options.js';
import { resolveWorkerOptions } from './worker-options.js';

/** What a worker needs from the Docket that creates it. */
export interface WorkerDependencies {
  store: Store;
  /** Handlers by kind; read at each job's start, so handlers registered later are used. */
  handlers: ReadonlyMap<string, JobHandler<never>>;
  events: DocketEvents;
  logger: Logger;
  /** Uniform [0, 1): retry jitter and timer spreading. */
  random: () => number;
  /** Told when the worker starts and after it has stopped (the Docket prunes while workers run). */
  onStart?: ((worker: Worker) => void) | undefined;
  onStop?: ((worker: Worker) => void) | undefined;
}

/** Counters since the worker was created. */
export interface WorkerStats {
  claimed: number;
  completed: number;
  /** Failed attempts recorded (retried or parked). */
  failed: number;
  parked: number;
  /** Fenced writes the store refused (heartbeat, complete, fail, release). */
  stale: number;
  leaseLost: number;
  timedOut: number;
  /** Leases given back on shutdown. */
  released: number;
  /** Handler results dropped because the lease was lost, the job timed out or shutdown aborted it. */
  discarded: number;
  errors: number;
}

type WorkerState = 'idle' | 'running' | 'stopping' | 'stopped';

interface Execution {
  job: ClaimedJob;
  lease: JobLease;
  key: string;
  abort: InvocationAbort;
  startedAt: number;
  timeoutTimer: NodeJS.Timeout | undefined;
  /** The handler has returned or thrown (its outcome may still be being written). */
  handlerSettled: boolean;
  /** Set once the handler was cut off; its result will not be written. */
  abandoned: AbortReason | null;
  slotHeld: boolean;
  /**
   * The handler completed the job inside its own transaction: the worker writes no completion
   * for it and no longer heartbeats it (that transaction's row lock guards the job until it ends).
   */
  completedInTransaction: boolean;
}

/** The order claims hand jobs out in: priority, then run time, then id. */
function byClaimOrder(a: ClaimedJob, b: ClaimedJob): number {
  return a.priority - b.priority || a.runAt.getTime() - b.runAt.getTime() || compareIds(a.id, b.id);
}

/** Ids are decimal integers in text (PostgreSQL bigint) or opaque strings: shorter numbers sort first. */
function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** Outcome writes (fail, release) are retried through errors for at most this long, or leaseMs if longer. */
const WRITE_RETRY_WINDOW_MS = 10_000;

/** Runs handlers for claimed jobs; created by `docket.worker(options)`. */
export class Worker {
  /** Names this worker; its claims record `<id>/<instance>.<claim number>` as lease owner. */
  readonly id: string;
  /** The options in force, defaults applied. */
  readonly options: ResolvedWorkerOptions;

  private state: WorkerState = 'idle';
  private readonly store: Store;
  private readonly deps: WorkerDependencies;
  private readonly logger: Logger;
  private readonly executions = new Map<string, Execution>();
  private readonly writes = new Set<Promise<void>>();
  private active = 0;
  /** Prefetched jobs, leased and heartbeated, waiting for a slot; in claim order (priority, run_at). */
  private buffered: { job: ClaimedJob; lease: JobLease }[] = [];
  private startingBuffered = false;
  private runningHandlers = 0;
  private handlersIdle: (() => void) | undefined;
  private readonly renewer: LeaseRenewer;
  private readonly completer: JobCompleter;
  private readonly claimer: JobClaimer;
  private readonly repairer: ScheduleRepairer;
  private stopping: Promise<void> | undefined;
  private readonly counters: WorkerStats = {
    claimed: 0,
    completed: 0,
    failed: 0,
    parked: 0,
    stale: 0,
    leaseLost: 0,
    timedOut: 0,
    released: 0,
    discarded: 0,
    errors: 0,
  };

  /** Validates `options` (throws ConfigurationError) and prepares the worker; `start()` runs it. */
  constructor(deps: WorkerDependencies, options: WorkerOptions = {}) {
    this.options = resolveWorkerOptions(options, { crossProcessWakeUps: deps.store.capabilities.listenNotify });
    this.id = this.options.id;
    this.deps = deps;
    this.store = deps.store;
    this.logger = childLogger(deps.logger, { workerId: this.id });
    this.renewer = new LeaseRenewer(this.store, this.options.leaseMs, this.options.heartbeatIntervalMs, {
      onLost: (lease, reason) => this.onLeaseLost(lease, reason),
      onError: (error) => this.reportError(error, 'heartbeat'),
    });
    this.completer = new JobCompleter(this.store, {
      batchSize: this.options.completionBatchSize,
      flushMs: this.options.completionFlushMs,
      maxInFlight: 2,
      isHeld: (lease) => this.renewer.holds(lease),
      onError: (error) => this.reportError(error, 'complete'),
      random: deps.random,
    });
    this.claimer = new JobClaimer(this.store, {
      owner: this.id,
      leaseMs: this.options.leaseMs,
      queues: this.options.queues,
      pollIntervalMs: this.options.pollIntervalMs,
      claimBatchSize: this.options.claimBatchSize,
      maxConcurrentClaims: this.options.maxConcurrentClaims,
      minClaimSize: this.options.prefetch > 0 ? Math.max(1, Math.ceil(this.options.prefetch / 2)) : 1,
      freeSlots: () => this.freeSlots(),
      idleSlots: () => this.idleSlots(),
      onClaimed: (jobs, sentAt) => this.onClaimed(jobs, sentAt),
      onError: (error, operation) => this.reportError(error, operation),
      random: deps.random,
    });
    this.repairer = new ScheduleRepairer(this.store, {
      random: deps.random,
      logger: this.logger,
      onError: (error) => this.reportError(error, 'scheduleRepair'),
    });
  }

  /** Whether the worker is claiming jobs. */
  get isRunning(): boolean {
    return this.state === 'running';
  }

  /** Handlers running right now. */
  get runningCount(): number {
    return this.runningHandlers;
  }

  /** Prefetched jobs held leased and waiting for a free slot. */
  get bufferedCount(): number {
    return this.buffered.length;
  }

  /** A snapshot of the worker's counters. */
  get stats(): WorkerStats {
    return { ...this.counters };
  }

  /** Starts claiming and running jobs; resolves once wake-ups are subscribed. A stopped worker may start again. */
  async start(): Promise<void> {
    if (this.state === 'running') return;
    if (this.state === 'stopping') await this.stopping;
    this.state = 'running';
    this.stopping = undefined;
    this.renewer.start();
    this.repairer.start();
    this.deps.onStart?.(this);
    await this.claimer.start();
    this.logger.info('docket: worker started', {
      concurrency: this.options.concurrency,
      leaseMs: this.options.leaseMs,
      queues: this.options.queues ?? 'all',
    });
  }

  /**
   * Graceful stop: no new claims; running handlers get `shutdownGraceMs` to finish, then their
   * signals abort and their leases are released at once. Resolves when every outcome is written
   * and every timer cleared. Safe to call more than once.
   */
  stop(): Promise<void> {
    if (this.state === 'idle' || this.state === 'stopped') return Promise.resolve();
    if (!this.stopping) {
      this.state = 'stopping';
      this.stopping = this.shutdown();
    }
    return this.stopping;
  }

  /**
   * Fault injection for tests: pause (or resume) heartbeats as if the worker were frozen. Leases
   * then lapse in the database and, once unconfirmed past leaseMs, handlers are aborted.
   */
  pauseHeartbeats(paused: boolean): void {
    this.renewer.setPaused(paused);
  }

  private async shutdown(): Promise<void> {
    const startedAt = performance.now();
    await this.claimer.stop();
    await this.repairer.stop();
    // Prefetched jobs go back at once, so another worker starts them instead of waiting out the grace period.
    for (const { job, lease } of this.buffered.splice(0)) this.track(this.releaseLease(job, lease));
    if (this.runningHandlers > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.options.shutdownGraceMs);
        this.handlersIdle = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.handlersIdle = undefined;
    }
    for (const execution of [...this.executions.values()]) {
      if (!execution.handlerSettled) this.abandon(execution, 'shutdown');
    }
    while (this.writes.size > 0) await Promise.all([...this.writes]);
    await this.completer.drain();
    await this.renewer.stop();
    this.state = 'stopped';
    this.logger.info('docket: worker stopped', { stopMs: Math.round(performance.now() - startedAt) });
    this.deps.onStop?.(this);
  }

  private freeSlots(): number {
    if (this.state !== 'running') return 0;
    // Backpressure: while outcome writes pile up (a slow or failing database), claim nothing more.
    if (this.writes.size > this.options.concurrency * 4 + 1000) return 0;
    return this.options.concurrency + this.options.prefetch - this.active - this.buffered.length;
  }

  private idleSlots(): number {
    if (this.state !== 'running') return 0;
    return this.options.concurrency - this.active - this.buffered.length;
  }

  private onClaimed(jobs: ClaimedJob[], sentAt: number): void {
    const firstNew = this.buffered.length;
    for (const job of jobs) {
      const lease: JobLease = { id: job.id, token: job.token };
      this.counters.claimed += 1;
      this.renewer.add(lease, sentAt);
      if (this.state !== 'running') {
        // A claim that was in flight when stop began: give the job straight back.
        this.track(this.releaseLease(job, lease));
        continue;
      }
      if (this.deps.events.has('claimed')) this.deps.events.emit('claimed', { job, workerId: this.id });
      this.buffered.push({ job, lease });
    }
    const last = this.buffered[firstNew - 1];
    const first = this.buffered[firstNew];
    // Each claim comes back in (priority, run_at) order; merge a batch that outranks what is already waiting.
    if (last && first && byClaimOrder(first.job, last.job) < 0) {
      this.buffered.sort((a, b) => byClaimOrder(a.job, b.job));
    }
    this.startBuffered();
  }

  /** Starts buffered jobs while slots are free; a job whose lease was lost meanwhile is dropped. */
  private startBuffered(): void {
    // A job that fails at once (no handler) frees its slot inside execute(): loop here, never recurse.
    if (this.startingBuffered) return;
    this.startingBuffered = true;
    try {
      let taken = 0;
      while (this.state === 'running' && this.active < this.options.concurrency && taken < this.buffered.length) {
        const next = this.buffered[taken]!;
        taken += 1;
        if (this.renewer.holds(next.lease)) this.execute(next.job, next.lease);
      }
      if (taken > 0) this.buffered.splice(0, taken);
    } finally {
      this.startingBuffered = false;
    }
  }

  private execute(job: ClaimedJob, lease: JobLease): void {
    const execution: Execution = {
      job,
      lease,
      key: LeaseRenewer.key(lease),
      abort: new InvocationAbort(),
      startedAt: performance.now(),
      timeoutTimer: undefined,
      handlerSettled: false,
      abandoned: null,
      slotHeld: true,
      completedInTransaction: false,
    };
    this.executions.set(execution.key, execution);
    this.active += 1;
    const handler = this.deps.handlers.get(job.kind);
    if (!handler) {
      execution.handlerSettled = true;
      this.freeSlot(execution);
      const known = [...this.deps.handlers.keys()];
      this.track(
        this.recordFailure(execution, {
          kind: 'thrown',
          message:
            `no handler registered for kind "${job.kind}" on worker ${this.id}` +
            ` (registered: ${known.length > 0 ? known.map((k) => `"${k}"`).join(', ') : 'none'})`,
          detail: undefined,
        }),
      );
      return;
    }
    this.runningHandlers += 1;
    if (job.timeoutMs !== null) {
      execution.timeoutTimer = setTimeout(() => this.abandon(execution, 'timeout'), job.timeoutMs);
    }
    if (this.deps.events.has('started')) {
      this.deps.events.emit('started', { job, workerId: this.id, latenessMs: Date.now() - job.runAt.getTime() });
    }
    const ctx = createJobContext(job, execution.abort, this.logger, (transaction) =>
      this.completeInTransaction(execution, transaction),
    );
    const run = invokeHandler(handler, job, ctx, execution.abort, () => {
      this.counters.discarded += 1;
    }).then((outcome) => this.finish(execution, outcome));
    this.track(run);
  }

  private async finish(execution: Execution, outcome: HandlerOutcome): Promise<void> {
    if (!execution.handlerSettled) {
      execution.handlerSettled = true;
      this.handlerEnded();
    }
    if (execution.timeoutTimer) clearTimeout(execution.timeoutTimer);
    // Cut off (lease lost, timeout, shutdown): abandon() has already freed the slot and dealt with the lease.
    if (outcome.kind === 'aborted' || execution.abandoned !== null) return;
    this.freeSlot(execution);
    if (outcome.kind === 'threw') {
      await this.recordFailure(
        execution,
        { kind: 'thrown', message: outcome.message, detail: outcome.detail },
        outcome.hints,
      );
      return;
    }
    if (execution.completedInTransaction) {
      // Already completed in the handler's transaction. Completing again here would mark the job
      // done even if that transaction rolled back; if it did, the lease lapses and the job reruns.
      this.executions.delete(execution.key);
      this.recordCompleted(execution);
      return;
    }
    const result = await this.completer.complete(execution.lease);
    this.renewer.remove(execution.lease);
    this.executions.delete(execution.key);
    if (result === 'done') {
      this.recordCompleted(execution);
    } else if (result === 'stale') {
      this.counters.stale += 1;
      this.deps.events.emit('stale', { job: execution.job, workerId: this.id, operation: 'complete' });
    } else {
      this.counters.discarded += 1;
    }
  }

  private handlerEnded(): void {
    this.runningHandlers -= 1;
    if (this.runningHandlers === 0) this.handlersIdle?.();
  }

  private freeSlot(execution: Execution): void {
    if (!execution.slotHeld) return;
    execution.slotHeld = false;
    this.active -= 1;
    this.startBuffered();
    this.claimer.slotFreed();
  }

  /** Cuts a handler off: aborts its signal, frees its slot and settles its lease for `reason`. */
  private abandon(execution: Execution, reason: AbortReason): void {
    if (execution.abandoned !== null || execution.handlerSettled) return;
    execution.abandoned = reason;
    if (execution.timeoutTimer) clearTimeout(execution.timeoutTimer);
    const messages: Record<AbortReason, string> = {
      lease_lost: 'the lease on this job was lost (it lapsed, was taken over or the job was cancelled)',
      timeout: `the job's timeout of ${execution.job.timeoutMs} ms passed`,
      shutdown: 'the worker is shutting down and the grace period ended',
    };
    execution.abort.abort(new JobAbortError(reason, messages[reason]));
    this.freeSlot(execution);
    // The handler may never settle; its slot and shutdown must not wait for it.
    execution.handlerSettled = true;
    this.handlerEnded();
    if (reason === 'lease_lost') {
      this.executions.delete(execution.key);
    } else if (reason === 'timeout') {
      this.counters.timedOut += 1;
      this.track(
        this.recordFailure(execution, {
          kind: 'timeout',
          message: `timed out: ${messages.timeout}`,
          detail: undefined,
        }),
      );
    } else {
      this.track(this.releaseLease(execution.job, execution.lease));
    }
  }

  private onLeaseLost(lease: JobLease, reason: LeaseLossReason): void {
    this.counters.leaseLost += 1;
    const key = LeaseRenewer.key(lease);
    const execution = this.executions.get(key);
    const index = execution ? -1 : this.buffered.findIndex((entry) => LeaseRenewer.key(entry.lease) === key);
    // A prefetched job that lost its lease (cancelled, or heartbeats could not reach the database) never starts here.
    const job = execution?.job ?? (index >= 0 ? this.buffered.splice(index, 1)[0]?.job : undefined);
    if (job) {
      if (reason === 'heartbeat_refused') {
        this.counters.stale += 1;
        this.deps.events.emit('stale', { job, workerId: this.id, operation: 'heartbeat' });
      }
      this.deps.events.emit('leaseLost', { job, workerId: this.id, reason });
    }
    if (!execution) return;
    if (!execution.handlerSettled) this.abandon(execution, 'lease_lost');
    // The handler already returned and its completion waits in a batch: withdraw it unwritten.
    else this.completer.withdraw(lease);
  }

  private async recordFailure(
    execution: Execution,
    error: Pick<AttemptError, 'message' | 'kind' | 'detail'>,
    hints: RetryHints = {},
  ): Promise<void> {
    const { job, lease } = execution;
    const decision = decideAfterFailure({
      attempts: job.attempts,
      maxAttempts: job.maxAttempts,
      policy: job.retryPolicy,
      random: this.deps.random,
      hints,
    });
    const outcome = await this.writeWhileHeld(lease, 'fail', () =>
      this.store.jobFail({ id: lease.id, token: lease.token, error, decision }),
    );
    this.renewer.remove(lease);
    this.executions.delete(execution.key);
    if (outcome === undefined) return;
    const durationMs = performance.now() - execution.startedAt;
    if (outcome.outcome === 'stale') {
      this.counters.stale += 1;
      this.deps.events.emit('stale', { job, workerId: this.id, operation: 'fail' });
      return;
    }
    this.counters.failed += 1;
    const retryAt = outcome.outcome === 'retry' ? outcome.runAt : null;
    this.deps.events.emit('failed', { job, workerId: this.id, error, durationMs, retryAt });
    if (outcome.outcome === 'parked') {
      this.counters.parked += 1;
      this.deps.events.emit('parked', { job, workerId: this.id, error });
    }
  }

  /**
   * `ctx.completeInTransaction`: the fenced complete, run on the handler's own transaction.
   * Refused (StaleLeaseError, nothing written) once the attempt was cut off, since the worker's
   * rule is that nothing is written for it then. On success the lease leaves the heartbeat batch:
   * the UPDATE holds the job's row lock until that transaction ends, so a heartbeat would wait on
   * it (stalling every lease in its batch) and, after the commit, find the job done and report a
   * lease loss that is not one. Claimers skip the locked row meanwhile (SKIP LOCKED); after a
   * rollback the lease lapses and the job runs again. The job's timeout no longer applies.
   */
  private async completeInTransaction(execution: Execution, transaction: unknown): Promise<void> {
    const { job, lease } = execution;
    if (!this.store.capabilities.callerTransactions) {
      throw new ConfigurationError(
        'ctx.completeInTransaction needs a store that can join your transaction (capabilities.callerTransactions: PostgreSQL); ' +
          'this store cannot. Return from the handler to complete the job instead.',
      );
    }
    if (execution.abandoned !== null || execution.handlerSettled) {
      throw new StaleLeaseError(
        job.id,
        lease.token,
        `this attempt was cut off (${execution.abandoned ?? 'its handler already settled'}); roll your transaction back`,
      );
    }
    const outcome = await this.store.jobComplete({ id: lease.id, token: lease.token, transaction });
    if (outcome === 'stale') {
      this.counters.stale += 1;
      this.deps.events.emit('stale', { job, workerId: this.id, operation: 'complete' });
      throw new StaleLeaseError(
        job.id,
        lease.token,
        'the lease is no longer current (a newer claim holds the job, it was cancelled or is already done); roll your transaction back',
      );
    }
    if (execution.abandoned !== null) {
      throw new StaleLeaseError(
        job.id,
        lease.token,
        `this attempt was cut off (${execution.abandoned}) while completing; roll your transaction back`,
      );
    }
    execution.completedInTransaction = true;
    if (execution.timeoutTimer) clearTimeout(execution.timeoutTimer);
    execution.timeoutTimer = undefined;
    this.renewer.remove(lease);
  }

  /** Counts an accepted completion and tells listeners how long the handler ran. */
  private recordCompleted(execution: Execution): void {
    this.counters.completed += 1;
    if (this.deps.events.has('completed')) {
      this.deps.events.emit('completed', {
        job: execution.job,
        workerId: this.id,
        durationMs: performance.now() - execution.startedAt,
      });
    }
  }

  private async releaseLease(job: ClaimedJob, lease: JobLease): Promise<void> {
    const outcome = await this.writeWhileHeld(lease, 'release', () =>
      this.store.jobRelease({ id: lease.id, token: lease.token }),
    );
    this.renewer.remove(lease);
    this.executions.delete(LeaseRenewer.key(lease));
    if (outcome === 'released') this.counters.released += 1;
    else if (outcome === 'stale') {
      this.counters.stale += 1;
      this.deps.events.emit('stale', { job, workerId: this.id, operation: 'release' });
    }
  }

  /**
   * Runs a fenced write, retrying through database errors while the lease is still held. Gives up
   * (undefined) when the lease is lost or after the retry window; the lease then lapses and the
   * job runs again elsewhere, which at-least-once delivery allows.
   */
  private async writeWhileHeld<T>(lease: JobLease, operation: string, write: () => Promise<T>): Promise<T | undefined> {
    const deadline = performance.now() + Math.max(WRITE_RETRY_WINDOW_MS, this.options.leaseMs);
    for (let attempt = 0; ; attempt += 1) {
      // A lease handed to the handler's transaction is still ours to fail or release (fenced by
      // its token): after that transaction rolled back the job is running under it.
      const handedOver = this.executions.get(LeaseRenewer.key(lease))?.completedInTransaction === true;
      if (!handedOver && !this.renewer.holds(lease)) return undefined;
      try {
        return await write();
      } catch (error) {
        this.reportError(error, operation);
        if (performance.now() >= deadline) {
          this.logger.error(`docket: giving up ${operation}; the lease will lapse and the job run again`, {
            jobId: lease.id,
          });
          return undefined;
        }
        const delay = Math.min(2000, 50 * 2 ** attempt) * (0.5 + this.deps.random());
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  private track(promise: Promise<void>): void {
    const tracked = promise
      .catch((error: unknown) => this.reportError(error, 'internal'))
      .finally(() => {
        this.writes.delete(tracked);
        this.claimer.slotFreed();
      });
    this.writes.add(tracked);
  }

  private reportError(error: unknown, operation: string): void {
    this.counters.errors += 1;
    this.logger.warn(`docket: ${operation} failed`, { operation, ...errorFields(error) });
    this.deps.events.emit('error', { error, operation, workerId: this.id });
  }
}
