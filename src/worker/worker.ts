/**
 * The worker runtime: turns claimed rows into executed handlers.
 *
 * Overview. A {@link JobClaimer} leases due jobs into free slots (and, with `prefetch`, into a local
 * buffer of leased jobs that start as slots free, without a round trip); each job's handler runs with an
 * AbortSignal while the `LeaseRenewer` heartbeats every lease this worker holds in one batch (per partition);
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
 * Partitions: on a store with partitions (a sharded store's shards, `Store.partitions()`), each
 * partition gets its own JobClaimer, prefetch buffer, LeaseRenewer and JobCompleter, so a slow or
 * unreachable shard delays only its own claims, heartbeats and completions. Each partition has
 * the room one worker on it alone would have, so every shard is claimed in full-size batches
 * (see freeSlots); each partition may always hold its even share of the handler slots
 * (fairShare), and buffered jobs start the partitions in turn, so none starves. A store without partitions is the one partition.
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
import type { JobLease, Store, StorePartitions } from '../store/store.js';
import { AdaptivePrefetch } from './adaptive-prefetch.js';
import { ClaimKinds } from './claim-kinds.js';
import type { DocketEvents } from './docket-events.js';
import { ExecutionRunner } from './execution-runner.js';
import { FailureWriter } from './failure-writer.js';
import { logGivingUp, writeRetryWindowMs } from './fenced-write.js';
import { JobClaimer } from './job-claimer.js';
import { JobCompleter } from './job-completer.js';
import type { JobHandler } from './job-handler.js';
import type { LeaseLossReason } from './lease-renewer.js';
import type { Logger } from './logger.js';
import { childLogger } from './logger.js';
import { OutcomeWriter } from './outcome-writer.js';
import { PartitionedBatchers } from './partitioned-batchers.js';
import { PartitionedBuffer } from './partitioned-buffer.js';
import { PartitionedRenewer } from './partitioned-renewer.js';
import type { BufferedJob } from './prefetch-buffer.js';
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
  /**
   * Delete a completed job's row instead of keeping it as a `done` record (Docket option
   * `retentionMs: 0`): a delete costs the database a quarter of the update (decision 0022).
   */
  deleteDoneRecords?: boolean | undefined;
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
  /**
   * The store's partitions (a sharded store's shards), or the store itself as the one partition.
   * Each gets its own claim loop, prefetch buffer, heartbeats and completion batches.
   */
  private readonly partitions: StorePartitions;
  private readonly buffer: PartitionedBuffer;
  /** Per partition, the buffer's size policy with `prefetch: 'auto'` (the default); undefined when it is fixed. */
  private readonly autoPrefetch: AdaptivePrefetch[] | undefined;
  /** Per partition, handlers running jobs claimed from it. */
  private readonly runningByPart: number[];
  /** Per partition, whether its last claim was answered (a connection loss is logged once over all of them). */
  private readonly partAnswered: boolean[];
  /** The claim loop told first of the next freed slot: rotates, so no partition always goes first. */
  private slotTurn = 0;
  private startingBuffered = false;
  private readonly renewer: PartitionedRenewer;
  private readonly completer: PartitionedBatchers<JobCompleter>;
  /** Failed attempts, batched as completions are (decision 0024). */
  private readonly failures: PartitionedBatchers<FailureWriter>;
  /**
   * Most unbatched outcome writes in flight before claims pause: releases, and a failure whose
   * lease a handler's transaction had.
   */
  private readonly writesAhead: number;
  /** Most completions and failures left unwritten before claims pause: four batches, and never under {@link writesAhead}. */
  private readonly completionsAhead: number;
  /** Whether a claim loop found no room because of unwritten completions (told when they clear). */
  private pausedForCompletions = false;
  private readonly claimers: JobClaimer[];
  private readonly upkeep: WorkerUpkeep;
  private stopping: Promise<void> | undefined;
  /** The kinds claims name; null for a catch-all worker. Resolved by start(). */
  private readonly claimKinds: ClaimKinds;
  private readonly outcomes: OutcomeWriter;

  /** Validates `options` (throws ConfigurationError) and prepares the worker; `start()` runs it. */
  constructor(deps: WorkerDependencies, options: WorkerOptions = {}) {
    this.options = resolveWorkerOptions(options, {
      crossProcessWakeUps: deps.store.capabilities.listenNotify,
      inProcessStore: deps.store.capabilities.inProcess,
    });
    this.writesAhead = this.options.concurrency * 4 + 1000;
    this.completionsAhead = Math.max(this.options.completionBatchSize * 4, this.writesAhead);
    this.id = this.options.id;
    this.deps = deps;
    this.store = deps.store;
    this.clock = deps.clock ?? systemClock;
    const clock = this.clock;
    this.logger = childLogger(deps.logger, { workerId: this.id });
    this.report = new WorkerReporter(this.id, this.logger, deps.events, clock);
    const offered = deps.store.partitions?.();
    this.partitions = offered && offered.parts.length > 0 ? offered : { parts: [deps.store], partOfId: () => 0 };
    const partCount = this.partitions.parts.length;
    this.buffer = new PartitionedBuffer(partCount);
    this.runningByPart = new Array<number>(partCount).fill(0);
    this.partAnswered = new Array<boolean>(partCount).fill(true);
    this.autoPrefetch = this.options.prefetchAuto
      ? this.partitions.parts.map(() => new AdaptivePrefetch(clock, this.options.prefetch))
      : undefined;
    this.claimKinds = new ClaimKinds({
      handlers: deps.handlers,
      kinds: this.options.kinds,
      catchAll: this.options.catchAll,
      workerId: this.id,
    });
    const onError = (error: unknown, operation: string) => this.report.error(error, operation);
    this.renewer = new PartitionedRenewer(
      this.partitions,
      this.options.leaseMs,
      this.options.heartbeatIntervalMs,
      { onLost: (lease, reason) => this.onLeaseLost(lease, reason), onError: (error) => onError(error, 'heartbeat') },
      clock,
    );
    const batching = {
      batchSize: this.options.completionBatchSize,
      flushMs: this.options.completionFlushMs,
      isHeld: (lease: JobLease) => this.renewer.holds(lease),
      onRoundTripEnded: () => {
        // Only after claims paused for completions: otherwise handler slots freeing tell the loops.
        if (this.pausedForCompletions && this.unwrittenOutcomes() <= this.completionsAhead) {
          this.pausedForCompletions = false;
          this.slotFreed();
        }
      },
      // As long as a single fenced write retries.
      giveUpAfterMs: writeRetryWindowMs(this.options.leaseMs),
      random: deps.random,
      clock,
    };
    const givingUpOn = (operation: string) => (lease: JobLease) => logGivingUp(this.logger, operation, lease);
    this.completer = new PartitionedBatchers(
      this.partitions,
      (part) =>
        new JobCompleter(part, {
          ...batching,
          deleteDoneRecords: deps.deleteDoneRecords === true,
          onError: (error) => onError(error, 'complete'),
          onGiveUp: givingUpOn('complete'),
        }),
    );
    this.failures = new PartitionedBatchers(
      this.partitions,
      (part) =>
        new FailureWriter(part, {
          ...batching,
          onError: (error) => onError(error, 'fail'),
          onGiveUp: givingUpOn('fail'),
        }),
    );
    this.claimers = this.partitions.parts.map(
      (part, index) =>
        new JobClaimer(part, {
          owner: this.id,
          leaseMs: this.options.leaseMs,
          queues: this.options.queues,
          kinds: () => this.currentKinds(),
          pollIntervalMs: this.options.pollIntervalMs,
          claimBatchSize: this.options.claimBatchSize,
          maxConcurrentClaims: this.options.maxConcurrentClaims,
          minClaimSize: () => {
            const prefetch = this.prefetch(index);
            return prefetch > 0 ? Math.max(1, Math.ceil(prefetch / 2)) : 1;
          },
          freeSlots: () => this.freeSlots(index),
          idleSlots: () => this.idleSlots(index),
          onClaimed: (jobs, sentAt, limit) => this.onClaimed(index, jobs, sentAt, limit),
          onError: (error, operation) => {
            if (operation === 'claim') {
              this.partAnswered[index] = false;
              // The failed claim's reserved room is free again for the other partitions' loops.
              if (this.claimers.length > 1) this.slotFreed();
            }
            onError(error, operation);
          },
          onClaimAnswered: () => {
            this.partAnswered[index] = true;
            this.storeAnswered();
          },
          random: deps.random,
          clock,
        }),
    );
    this.outcomes = new OutcomeWriter({
      store: this.store,
      renewer: this.renewer,
      report: this.report,
      clock,
      random: deps.random,
      logger: this.logger,
      leaseMs: this.options.leaseMs,
      deleteDoneRecords: deps.deleteDoneRecords === true,
      failures: this.failures,
      track: (write) => this.track(write),
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
      failures: this.failures,
      renewer: this.renewer,
      track: (write) => this.track(write),
      onInternalError: (error) => this.report.error(error, 'internal'),
      onSlotFreed: (heldMs, lease) => {
        const part = this.partitions.partOfId(lease.id);
        this.runningByPart[part] = (this.runningByPart[part] ?? 0) - 1;
        this.autoPrefetch?.[part]?.settled(heldMs);
        this.startBuffered();
        this.slotFreed();
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
      onRegistered: () => this.storeAnswered(),
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
    await Promise.all(this.claimers.map((claimer) => claimer.start()));
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
    await Promise.all(this.claimers.map((claimer) => claimer.stop()));
    // No more claims: leave the registry now, so what only this worker served shows as unhandled.
    await this.upkeep.stop();
    // Prefetched jobs go back at once, so another worker starts them instead of waiting out the grace period.
    for (const { job, lease } of this.buffer.takeAll()) this.track(this.outcomes.release(job, lease));
    await this.runner.handlersSettled(this.options.shutdownGraceMs);
    this.runner.cutOffAll();
    while (this.writes.size > 0) await Promise.all([...this.writes]);
    await Promise.all([this.completer.drain(), this.failures.drain()]);
    await this.renewer.stop();
    this.state = 'stopped';
    this.logger.info({ stopMs: Math.round(this.clock.monotonic() - startedAt) }, 'docket: worker stopped');
    this.deps.onStop?.(this);
  }

  /**
   * Room for new jobs from partition `part`, buffer included (its claimer subtracts its own
   * claims in flight). With one partition: concurrency plus prefetch, minus running and buffered.
   * Over several (a sharded store's shards), each partition has the room one worker on it alone
   * would have, so every shard is claimed in full-size batches (a claim split over N shards costs
   * each shard N times the statements per job), within one bound for them all: the handler slots
   * plus each partition's prefetch, other partitions' claims in flight counted against it.
   */
  private freeSlots(part: number): number {
    if (this.state !== 'running') return 0;
    // Backpressure: while outcome writes pile up (a slow or failing database), claim nothing more.
    if (this.writes.size > this.writesAhead) return 0;
    // The same for completions and failures: a slot is freed when its handler settles, before its
    // outcome is written, so claims and handlers could run ahead of the writes without bound. On a million-job
    // drain they did: 182,000 jobs whose handlers had run waited, leased, heartbeated and held in
    // memory, for their completions (docs/benchmarks.md, issue 17). Writing completions is a
    // worker's real pace; a newly freed room is told when a round trip ends (onRoundTripEnded).
    if (this.unwrittenOutcomes() > this.completionsAhead) {
      this.pausedForCompletions = true;
      return 0;
    }
    const own =
      this.options.concurrency + this.prefetch(part) - (this.runningByPart[part] ?? 0) - this.buffer.sizeOf(part);
    if (this.claimers.length === 1) return own;
    let shared = this.options.concurrency - this.runner.running - this.buffer.size;
    for (const [index, claimer] of this.claimers.entries()) {
      shared += this.prefetch(index);
      if (index !== part) shared -= claimer.reservedSlots;
    }
    return Math.max(Math.min(own, shared), this.fairShare(part));
  }

  /**
   * Room a partition always has, whatever the others hold or have in flight: its even share of
   * the handler slots (at least one job), less what it holds. So a shard with a due job (a single
   * new one, or a job whose lease lapsed when its worker died) is claimed at its next wake-up,
   * timer or poll even while busy shards keep every slot full, as the merged claim asked every
   * shard for at least one job; its job then starts at the next freed slot, the buffer starting
   * partitions in turn. Over several partitions the worker may hold up to one such share each
   * beyond the common bound: a few jobs buffered, leased and heartbeated.
   */
  private fairShare(part: number): number {
    if (this.claimers.length === 1) return 0;
    const share = Math.max(1, Math.ceil(this.options.concurrency / this.claimers.length));
    return Math.max(0, share - (this.runningByPart[part] ?? 0) - this.buffer.sizeOf(part));
  }

  /** Completions and failed attempts whose handlers have settled but whose writes the store has not answered. */
  private unwrittenOutcomes(): number {
    return this.completer.unwritten + this.failures.unwritten;
  }

  /** Jobs to hold beyond the free slots now, per partition: the fixed `prefetch`, or the automatic one's current target. */
  private prefetch(part: number): number {
    const auto = this.autoPrefetch?.[part];
    return auto ? auto.current() : this.options.prefetch;
  }

  /** Handler slots with no job to run (neither running nor buffered), less other partitions' claims in flight. */
  private idleSlots(part: number): number {
    if (this.state !== 'running') return 0;
    let idle = this.options.concurrency - this.runner.running - this.buffer.size;
    if (this.claimers.length === 1) return idle;
    for (const [index, claimer] of this.claimers.entries()) if (index !== part) idle -= claimer.reservedSlots;
    return Math.max(idle, this.fairShare(part));
  }

  /** Tells every claim loop a slot was freed, a different one first each time. */
  private slotFreed(): void {
    const count = this.claimers.length;
    this.slotTurn = (this.slotTurn + 1) % count;
    for (let step = 0; step < count; step += 1) this.claimers[(this.slotTurn + step) % count]!.slotFreed();
  }

  /**
   * A store round trip succeeded. Over several partitions the connection counts as recovered only
   * once every partition's claims answer again: one shard down while the others answer would
   * otherwise log the loss and the recovery at every claim.
   */
  private storeAnswered(): void {
    if (this.claimers.length === 1 || this.partAnswered.every(Boolean)) this.report.storeAnswered();
  }

  private onClaimed(part: number, jobs: ClaimedJob[], sentAt: number, limit: number): void {
    this.autoPrefetch?.[part]?.claimAnswered(jobs.length, limit);
    // A short claim gives back room it had reserved: the other partitions' loops may use it now.
    if (jobs.length < limit && this.claimers.length > 1) this.slotFreed();
    const batch: BufferedJob[] = [];
    for (const job of jobs) {
      this.report.counters.claimed += 1;
      // The held lease is the job's lease from here on: every write and check of it passes it.
      const lease = this.renewer.add(job, sentAt);
      if (this.state !== 'running') {
        // A claim that was in flight when stop began: give the job straight back.
        this.track(this.outcomes.release(job, lease));
        continue;
      }
      if (this.deps.events.has('claimed')) this.deps.events.emit('claimed', { job, workerId: this.id });
      batch.push({ job, lease });
    }
    this.buffer.addBatch(part, batch);
    this.startBuffered();
  }

  /** Starts buffered jobs while slots are free, partitions in turn; a job whose lease was lost meanwhile is dropped. */
  private startBuffered(): void {
    // A job that fails at once (no handler) frees its slot inside runner.run(): loop here, never recurse.
    if (this.startingBuffered) return;
    this.startingBuffered = true;
    try {
      while (this.state === 'running' && this.runner.running < this.options.concurrency) {
        const next = this.buffer.next();
        if (!next) break;
        const { entry, part } = next;
        if (!this.renewer.holds(entry.lease)) continue;
        this.runningByPart[part] = (this.runningByPart[part] ?? 0) + 1;
        this.runner.run(entry.job, entry.lease);
      }
    } finally {
      this.startingBuffered = false;
    }
  }

  private onLeaseLost(lease: JobLease, reason: LeaseLossReason): void {
    // Counted and logged before the handler is cut off. A prefetched job that lost its lease
    // (cancelled, or heartbeats could not reach the database) never starts here.
    const execution = this.runner.executionOf(lease);
    // A heartbeat that crossed the job's own outcome write on another connection is refused once
    // that write commits: no loss, and the write's answer reports a stale lease if there was one.
    // Counted as lost, 388 of 400 jobs whose failures were written in batches were each reported
    // both failed and stale on a loaded CI machine, with a warning that their handlers were aborted.
    if (execution && this.runner.outcomeWriteSent(execution)) return;
    const job = execution?.job ?? this.buffer.take(lease)?.job;
    this.report.leaseLost(job, reason);
    if (execution) this.runner.leaseLost(execution);
  }

  private track(promise: Promise<void>): void {
    const tracked = promise
      .catch((error: unknown) => this.report.error(error, 'internal'))
      .finally(() => {
        this.writes.delete(tracked);
        this.slotFreed();
      });
    this.writes.add(tracked);
  }
}
