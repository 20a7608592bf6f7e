/**
 * The worker runtime: turns claimed rows into executed handlers.
 *
 * Overview. A {@link JobClaimer} leases due jobs into free slots (and, with `prefetch`, into a local
 * buffer of leased jobs that start as slots free, without a round trip); each job's handler runs with an
 * AbortSignal while the {@link LeaseRenewer} heartbeats every lease this worker holds in one batch;
 * a return is completed through the {@link JobCompleter} (batched, each fenced by its own token),
 * a throw is recorded with `jobFail` and a decision from `decideAfterFailure`. Each job's run is a
 * JobExecution, whose one state says which of these is under way; the {@link ExecutionRunner}
 * runs them and the OutcomeWriter writes fail, release and in-transaction completions.
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
 * Routing: a worker claims only the kinds it has handlers for (or its explicit `kinds` subset),
 * resolved at `start()` and widened when a handler is registered while it runs (ClaimKinds);
 * `catchAll: true` claims every kind. It keeps a record of itself (queues, kinds, concurrency) in
 * the live worker registry while it runs ({@link WorkerUpkeep}), which is how the unhandled
 * counts know which kinds are served.
 *
 * Logging, counters and events: {@link WorkerReporter}. Time: every timer and duration reads the
 * injected {@link Clock} (`deps.clock`, the real one by default), so tests can pin it.
 *
 * Shutdown (`stop`): stop claiming (claims already in flight and prefetched jobs are released at once), let running
 * handlers finish within `shutdownGraceMs`, then abort the rest and release their leases so another
 * worker takes them immediately, write every pending outcome, stop heartbeating, clear every timer.
 */
import type { Clock } from '../clock/clock.js';
import { systemClock } from '../clock/clock.js';
import type { ClaimedJob } from '../job/job.js';
import type { JobLease, Store } from '../store/store.js';
import { AdaptivePrefetch } from './adaptive-prefetch.js';
import { ClaimKinds } from './claim-kinds.js';
import type { DocketEvents } from './docket-events.js';
import { ExecutionRunner } from './execution-runner.js';
import { JobClaimer } from './job-claimer.js';
import { JobCompleter } from './job-completer.js';
import type { JobHandler } from './job-handler.js';
import type { LeaseLossReason } from './lease-renewer.js';
import { LeaseRenewer } from './lease-renewer.js';
import type { Logger } from './logger.js';
import { childLogger } from './logger.js';
import { OutcomeWriter } from './outcome-writer.js';
import { type BufferedJob, PrefetchBuffer } from './prefetch-buffer.js';
import type { ResolvedWorkerOptions, WorkerOptions } from './worker-options.js';
import { resolveWorkerOptions } from './worker-options.js';
import { WorkerReporter, type WorkerStats } from './worker-reporter.js';
import { WorkerUpkeep } from './worker-upkeep.js';

export type { WorkerStats } from './worker-reporter.js';

/** What a worker needs from the Docket that creates it. */
export interface WorkerDependencies {
  store: Store;
  /**
   * Handlers by kind; read at each job's start, so handlers registered later are used. The kinds
   * claimed are taken from it at `start()`, and again at a claim after it has grown.
   */
  handlers: ReadonlyMap<string, JobHandler<never>>;
  events: DocketEvents;
  logger: Logger;
  /** Uniform [0, 1): retry jitter and timer spreading. */
  random: () => number;
  /** Paces every timer (poll, heartbeat, timeouts, grace) and measures durations; default: the real clock. */
  clock?: Clock | undefined;
  /**
   * Park due jobs that no live worker has served for longer than this, ms (Docket option
   * `unhandledAfterMs`); undefined: never, they wait for a handler.
   */
  unhandledAfterMs?: number | undefined;
  /** Told when the worker starts and after it has stopped (the Docket prunes while workers run). */
  onStart?: ((worker: Worker) => void) | undefined;
  onStop?: ((worker: Worker) => void) | undefined;
}

type WorkerState = 'idle' | 'running' | 'stopping' | 'stopped';

/** Runs handlers for claimed jobs; created by `docket.worker(options)`. */
export class Worker {
  /** Names this worker; its claims record `<id>/<instance>.<claim number>` as lease owner. */
  readonly id: string;
  /** The options in force, defaults applied. */
  readonly options: ResolvedWorkerOptions;

  private state: WorkerState = 'idle';
  private readonly store: Store;
  private readonly deps: WorkerDependencies;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly report: WorkerReporter;
  private readonly writes = new Set<Promise<void>>();
  /** Runs handlers and counts those holding slots (a job with no handler holds one only while it starts). */
  private readonly runner: ExecutionRunner;
  private readonly buffer = new PrefetchBuffer();
  /** The buffer's size policy with `prefetch: 'auto'` (the default); undefined when it is fixed. */
  private readonly autoPrefetch: AdaptivePrefetch | undefined;
  private startingBuffered = false;
  private readonly renewer: LeaseRenewer;
  private readonly completer: JobCompleter;
  private readonly claimer: JobClaimer;
  private readonly upkeep: WorkerUpkeep;
  private stopping: Promise<void> | undefined;
  /** The kinds claims name; null for a catch-all worker. Resolved by start(). */
  private readonly claimKinds: ClaimKinds;
  private readonly outcomes: OutcomeWriter;

  /** Validates `options` (throws ConfigurationError) and prepares the worker; `start()` runs it. */
  constructor(deps: WorkerDependencies, options: WorkerOptions = {}) {
    this.options = resolveWorkerOptions(options, { crossProcessWakeUps: deps.store.capabilities.listenNotify });
    this.id = this.options.id;
    this.deps = deps;
    this.store = deps.store;
    this.clock = deps.clock ?? systemClock;
    const clock = this.clock;
    this.logger = childLogger(deps.logger, { workerId: this.id });
    this.report = new WorkerReporter(this.id, this.logger, deps.events, clock);
    this.autoPrefetch = this.options.prefetchAuto ? new AdaptivePrefetch(clock, this.options.prefetch) : undefined;
    this.claimKinds = new ClaimKinds({
      handlers: deps.handlers,
      kinds: this.options.kinds,
      catchAll: this.options.catchAll,
      workerId: this.id,
    });
    const onError = (error: unknown, operation: string) => this.report.error(error, operation);
    this.renewer = new LeaseRenewer(
      this.store,
      this.options.leaseMs,
      this.options.heartbeatIntervalMs,
      { onLost: (lease, reason) => this.onLeaseLost(lease, reason), onError: (error) => onError(error, 'heartbeat') },
      clock,
    );
    this.completer = new JobCompleter(this.store, {
      batchSize: this.options.completionBatchSize,
      flushMs: this.options.completionFlushMs,
      maxInFlight: 2,
      isHeld: (lease) => this.renewer.holds(lease),
      onError: (error) => onError(error, 'complete'),
      random: deps.random,
      clock,
    });
    this.claimer = new JobClaimer(this.store, {
      owner: this.id,
      leaseMs: this.options.leaseMs,
      queues: this.options.queues,
      kinds: () => this.currentKinds(),
      pollIntervalMs: this.options.pollIntervalMs,
      claimBatchSize: this.options.claimBatchSize,
      maxConcurrentClaims: this.options.maxConcurrentClaims,
      minClaimSize: () => {
        const prefetch = this.prefetch();
        return prefetch > 0 ? Math.max(1, Math.ceil(prefetch / 2)) : 1;
      },
      freeSlots: () => this.freeSlots(),
      idleSlots: () => this.idleSlots(),
      onClaimed: (jobs, sentAt, limit) => this.onClaimed(jobs, sentAt, limit),
      onError,
      onClaimAnswered: () => this.report.storeAnswered(),
      random: deps.random,
      clock,
    });
    this.outcomes = new OutcomeWriter({
      store: this.store,
      renewer: this.renewer,
      report: this.report,
      clock,
      random: deps.random,
      logger: this.logger,
      leaseMs: this.options.leaseMs,
    });
    this.runner = new ExecutionRunner({
      workerId: this.id,
      handlers: deps.handlers,
      clock,
      logger: this.logger,
      events: deps.events,
      report: this.report,
      outcomes: this.outcomes,
      completer: this.completer,
      renewer: this.renewer,
      track: (write) => this.track(write),
      onSlotFreed: (heldMs) => {
        this.autoPrefetch?.settled(heldMs);
        this.startBuffered();
        this.claimer.slotFreed();
      },
    });
    this.upkeep = new WorkerUpkeep(this.store, {
      workerId: this.id,
      queues: this.options.queues,
      kinds: () => this.claimKinds.current,
      concurrency: this.options.concurrency,
      registryTtlMs: this.options.registryTtlMs,
      registryRefreshMs: this.options.registryRefreshMs,
      unhandledAfterMs: deps.unhandledAfterMs,
      random: deps.random,
      clock,
      logger: this.logger,
      onError,
      onRegistered: () => this.report.storeAnswered(),
      onUnhandledParked: (job, message) => this.report.unhandledParked(job, message, deps.unhandledAfterMs),
    });
  }

  /** Whether the worker is claiming jobs. */
  get isRunning(): boolean {
    return this.state === 'running';
  }

  /** Handlers running right now. */
  get runningCount(): number {
    return this.runner.running;
  }

  /** Prefetched jobs held leased and waiting for a free slot. */
  get bufferedCount(): number {
    return this.buffer.size;
  }

  /** A snapshot of the worker's counters. */
  get stats(): WorkerStats {
    return { ...this.report.counters };
  }

  /**
   * The kinds this worker claims (sorted), or null for a catch-all worker; empty before `start()`
   * resolves them.
   */
  get kinds(): readonly string[] | null {
    return this.options.catchAll ? null : (this.claimKinds.current ?? []);
  }

  /**
   * Starts claiming and running jobs; resolves once it is registered and wake-ups are subscribed.
   * A stopped worker may start again. Throws ConfigurationError (nothing started) when the worker
   * could claim nothing useful: no handlers and no `catchAll`, or a `kinds` entry with no handler.
   */
  async start(): Promise<void> {
    if (this.state === 'running') return;
    if (this.state === 'stopping') await this.stopping;
    this.claimKinds.resolve();
    this.state = 'running';
    this.stopping = undefined;
    this.renewer.start();
    this.upkeep.startRepair();
    this.deps.onStart?.(this);
    await this.upkeep.register();
    await this.claimer.start();
    this.logger.info(
      {
        concurrency: this.options.concurrency,
        leaseMs: this.options.leaseMs,
        queues: this.options.queues ?? 'all',
        kinds: this.claimKinds.current ?? 'all (catchAll)',
      },
      'docket: worker started',
    );
  }

  /**
   * The kinds the next claim names, widened to handlers registered since start (published to
   * the registry at once); undefined claims every kind.
   */
  private currentKinds(): readonly string[] | undefined {
    if (this.state === 'running' && this.claimKinds.widen()) {
      this.logger.info({ kinds: this.claimKinds.current }, 'docket: worker now also claims newly registered kinds');
      this.upkeep.refreshRegistration();
    }
    return this.claimKinds.current ?? undefined;
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
    const startedAt = this.clock.monotonic();
    await this.claimer.stop();
    // No more claims: leave the registry now, so what only this worker served shows as unhandled.
    await this.upkeep.stop();
    // Prefetched jobs go back at once, so another worker starts them instead of waiting out the grace period.
    for (const { job, lease } of this.buffer.takeAll()) this.track(this.outcomes.release(job, lease));
    await this.runner.handlersSettled(this.options.shutdownGraceMs);
    this.runner.cutOffAll();
    while (this.writes.size > 0) await Promise.all([...this.writes]);
    await this.completer.drain();
    await this.renewer.stop();
    this.state = 'stopped';
    this.logger.info({ stopMs: Math.round(this.clock.monotonic() - startedAt) }, 'docket: worker stopped');
    this.deps.onStop?.(this);
  }

  private freeSlots(): number {
    if (this.state !== 'running') return 0;
    // Backpressure: while outcome writes pile up (a slow or failing database), claim nothing more.
    if (this.writes.size > this.options.concurrency * 4 + 1000) return 0;
    return this.options.concurrency + this.prefetch() - this.runner.running - this.buffer.size;
  }

  /** Jobs to hold beyond the free slots now: the fixed `prefetch`, or the automatic one's current target. */
  private prefetch(): number {
    return this.autoPrefetch ? this.autoPrefetch.current() : this.options.prefetch;
  }

  private idleSlots(): number {
    if (this.state !== 'running') return 0;
    return this.options.concurrency - this.runner.running - this.buffer.size;
  }

  private onClaimed(jobs: ClaimedJob[], sentAt: number, limit: number): void {
    this.autoPrefetch?.claimAnswered(jobs.length, limit);
    const batch: BufferedJob[] = [];
    for (const job of jobs) {
      const lease: JobLease = { id: job.id, token: job.token, leaseOwner: job.leaseOwner };
      const key = LeaseRenewer.key(lease);
      this.report.counters.claimed += 1;
      this.renewer.add(lease, sentAt, key);
      if (this.state !== 'running') {
        // A claim that was in flight when stop began: give the job straight back.
        this.track(this.outcomes.release(job, lease));
        continue;
      }
      if (this.deps.events.has('claimed')) this.deps.events.emit('claimed', { job, workerId: this.id });
      batch.push({ job, lease, key });
    }
    this.buffer.addBatch(batch);
    this.startBuffered();
  }

  /** Starts buffered jobs while slots are free; a job whose lease was lost meanwhile is dropped. */
  private startBuffered(): void {
    // A job that fails at once (no handler) frees its slot inside runner.run(): loop here, never recurse.
    if (this.startingBuffered) return;
    this.startingBuffered = true;
    try {
      while (this.state === 'running' && this.runner.running < this.options.concurrency) {
        const next = this.buffer.next();
        if (!next) break;
        if (this.renewer.holds(next.lease, next.key)) this.runner.run(next.job, next.lease, next.key);
      }
    } finally {
      this.startingBuffered = false;
    }
  }

  private onLeaseLost(lease: JobLease, reason: LeaseLossReason): void {
    // Counted and logged before the handler is cut off. A prefetched job that lost its lease
    // (cancelled, or heartbeats could not reach the database) never starts here.
    const job = this.runner.jobOf(lease) ?? this.buffer.take(LeaseRenewer.key(lease))?.job;
    this.report.leaseLost(job, reason);
    this.runner.leaseLost(lease);
  }

  private track(promise: Promise<void>): void {
    const tracked = promise
      .catch((error: unknown) => this.report.error(error, 'internal'))
      .finally(() => {
        this.writes.delete(tracked);
        this.claimer.slotFreed();
      });
    this.writes.add(tracked);
  }
}
