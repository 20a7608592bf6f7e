/**
 * One claimed job's run on this worker, as an explicit state machine (River's `jobexecutor`).
 *
 * ```
 *            ┌──── handOver (ctx.completeInTransaction) ───► handed_over ──┐
 *            │                                                  │          │ returned
 *  running ──┼── returned ──► completing ──► finished ◄─────────┼──────────┘
 *            ├── threw / timeout / no handler ──► failing ──► finished
 *            ├── cut off by shutdown ──► releasing ──► finished     (also from handed_over)
 *            └── lease lost ──────────────────────► finished
 * ```
 *
 * While `running` or `handed_over` the handler holds one of the worker's slots; leaving those
 * states frees it, exactly once (`onSlotFreed`). `completing`, `failing` and `releasing` are the
 * one outcome write of the attempt; `finished` means nothing more is written (`onFinished`,
 * exactly once). Every transition goes through {@link JobExecution.moveTo} and its table, so an
 * impossible one (a second outcome for one lease) throws instead of writing twice.
 */
import type { Clock, ClockTimer } from '../clock/clock.js';
import type { ClaimedJob } from '../job/job.js';
import type { JobLease } from '../store/store.js';
import type { ListLinks } from './intrusive-list.js';
import type { HandlerOutcome, InvocationListener } from './job-executor.js';
import { InvocationAbort } from './job-executor.js';
import type { AbortReason } from './job-handler.js';
import { JobAbortError } from './job-handler.js';

/** Where one execution stands; see the module comment for the diagram. */
export type ExecutionState = 'running' | 'handed_over' | 'completing' | 'failing' | 'releasing' | 'finished';

/** Every allowed transition, in one place. */
const TRANSITIONS: Readonly<Record<ExecutionState, readonly ExecutionState[]>> = {
  running: ['handed_over', 'completing', 'failing', 'releasing', 'finished'],
  handed_over: ['finished', 'failing', 'releasing'],
  completing: ['finished'],
  failing: ['finished'],
  releasing: ['finished'],
  finished: [],
};

/** States in which the handler still runs and holds a slot. */
const HANDLER_STATES: ReadonlySet<ExecutionState> = new Set(['running', 'handed_over']);

/** Where a cut-off sends the execution: a lost lease writes nothing, a timeout fails, a shutdown releases. */
const CUT_OFF_TARGET: Readonly<Record<AbortReason, ExecutionState>> = {
  lease_lost: 'finished',
  timeout: 'failing',
  shutdown: 'releasing',
};

/** What the worker must write after the handler settled. */
export type SettleAction =
  /** The attempt was already cut off: its cut-off decided the outcome, write nothing more. */
  | 'none'
  /** Record the failed attempt (`jobFail`); the state is now `failing`. */
  | 'fail'
  /** Queue the completion (`jobComplete`); the state is now `completing`. */
  | 'complete'
  /** The handler's own transaction completed the job: count it, write nothing; now `finished`. */
  | 'completed_in_transaction';

/** What an execution tells its worker. */
export interface JobExecutionHooks {
  /** The handler no longer holds its slot (it settled or was cut off); called once. */
  onSlotFreed(execution: JobExecution): void;
  /** Nothing more will be written for this execution; called once. */
  onFinished(execution: JobExecution): void;
  /** The handler's invocation ended with `outcome` (or was cut off first); called once. */
  onHandlerSettled(execution: JobExecution, outcome: HandlerOutcome): void;
  /** The handler settled after it was cut off; its result is discarded. */
  onHandlerSettledLate(execution: JobExecution): void;
}

/**
 * One claimed job running (or finishing) on this worker. It hears its own handler's invocation
 * (passing it on to its hooks), so a job's run needs no listener object or closure of its own.
 */
export class JobExecution implements InvocationListener, ListLinks<JobExecution> {
  /** The handler's cut-off switch. */
  readonly abort = new InvocationAbort();
  /** When the execution began, on the clock's monotonic scale. */
  readonly startedAt: number;
  private current: ExecutionState = 'running';
  private cutOffReason: AbortReason | null = null;
  /**
   * Lease custody, not lifecycle: once the handler's transaction took the completion, the lease
   * is no longer heartbeated, yet a fail or release under it is still ours to try (fenced by the
   * token) until this execution is finished.
   */
  private leaseInTransaction = false;
  private timeoutTimer: ClockTimer | undefined;
  /** Its worker's list of unfinished executions runs through these. */
  previous: JobExecution | undefined = undefined;
  next: JobExecution | undefined = undefined;

  constructor(
    readonly job: ClaimedJob,
    readonly lease: JobLease,
    private readonly clock: Clock,
    private readonly hooks: JobExecutionHooks,
  ) {
    this.startedAt = clock.monotonic();
  }

  /** The current state. */
  get state(): ExecutionState {
    return this.current;
  }

  /** Whether the handler is still running (and holds a slot). */
  get handlerRunning(): boolean {
    return HANDLER_STATES.has(this.current);
  }

  /** Why the handler was cut off, or null if it was not. */
  get abortReason(): AbortReason | null {
    return this.cutOffReason;
  }

  /** Whether `ctx.completeInTransaction` took the completion (the worker writes none of its own). */
  get completedInTransaction(): boolean {
    return this.leaseInTransaction;
  }

  /** Milliseconds since the execution began. */
  elapsedMs(): number {
    return this.clock.monotonic() - this.startedAt;
  }

  /** Arms the job's timeout (if it has one): `onTimeout` is called when it passes while the handler runs. */
  armTimeout(onTimeout: () => void): void {
    if (this.job.timeoutMs === null || this.current !== 'running') return;
    this.timeoutTimer = this.clock.setTimeout(() => {
      this.timeoutTimer = undefined;
      if (this.current === 'running') onTimeout();
    }, this.job.timeoutMs);
  }

  /** {@link InvocationListener.handlerSettled}: passed on to the hooks, which call {@link settle}. */
  handlerSettled(outcome: HandlerOutcome): void {
    this.hooks.onHandlerSettled(this, outcome);
  }

  /** {@link InvocationListener.handlerSettledLate}: passed on to the hooks. */
  handlerSettledLate(): void {
    this.hooks.onHandlerSettledLate(this);
  }

  /** No handler could be run: straight to recording the failed attempt. */
  failWithoutHandler(): void {
    this.moveTo('failing');
  }

  /** The handler settled with `outcome`: moves on and says what to write. */
  settle(outcome: HandlerOutcome): SettleAction {
    // Cut off (lease lost, timeout, shutdown): the cut-off already freed the slot and settled the lease.
    if (outcome.kind === 'aborted' || !this.handlerRunning) return 'none';
    if (outcome.kind === 'threw') {
      this.moveTo('failing');
      return 'fail';
    }
    if (this.current === 'handed_over') {
      // Completing again would mark the job done even if the handler's transaction rolled back;
      // if it did, the lease lapses and the job runs again.
      this.moveTo('finished');
      return 'completed_in_transaction';
    }
    this.moveTo('completing');
    return 'complete';
  }

  /**
   * Cuts the handler off for `reason`: aborts its signal with a {@link JobAbortError} and moves to
   * the state that settles the lease (lost: finished; timeout: failing; shutdown: releasing).
   * Returns false (nothing done) when the handler is no longer running. The handler may never
   * settle; its slot and shutdown do not wait for it.
   */
  cutOff(reason: AbortReason): boolean {
    if (!this.handlerRunning) return false;
    this.cutOffReason = reason;
    this.abort.abort(new JobAbortError(reason, this.cutOffMessage(reason)));
    this.moveTo(CUT_OFF_TARGET[reason]);
    return true;
  }

  /** Why a cut-off happened, in words (the abort error's message; a timeout's recorded error). */
  cutOffMessage(reason: AbortReason): string {
    switch (reason) {
      case 'lease_lost':
        return 'the lease on this job was lost (it lapsed, was taken over or the job was cancelled)';
      case 'timeout':
        return `the job's timeout of ${this.job.timeoutMs} ms passed`;
      case 'shutdown':
        return 'the worker is shutting down and the grace period ended';
    }
  }

  /**
   * Why `ctx.completeInTransaction` must be refused now, or null when it may go ahead: only a
   * running handler that has not been cut off may complete in its transaction.
   */
  transactionRefusal(): string | null {
    if (this.cutOffReason !== null) return `this attempt was cut off (${this.cutOffReason})`;
    if (!this.handlerRunning) return 'its handler already settled';
    return null;
  }

  /**
   * The handler's transaction took the completion: no timeout any more, no completion of the
   * worker's own. A handler that settled without awaiting the call keeps its state.
   */
  handOver(): void {
    this.leaseInTransaction = true;
    this.clock.clearTimeout(this.timeoutTimer);
    this.timeoutTimer = undefined;
    if (this.current === 'running') this.moveTo('handed_over');
  }

  /** The outcome write is done (or given up): nothing more will be written. */
  finish(): void {
    this.moveTo('finished');
  }

  /** The one place the state changes: checks the table, frees the slot and reports the end. */
  private moveTo(next: ExecutionState): void {
    const from = this.current;
    if (!TRANSITIONS[from].includes(next)) {
      throw new Error(`job ${this.job.id} (token ${this.lease.token}): no transition from ${from} to ${next}`);
    }
    this.current = next;
    if (HANDLER_STATES.has(from) && !HANDLER_STATES.has(next)) {
      this.clock.clearTimeout(this.timeoutTimer);
      this.timeoutTimer = undefined;
      this.hooks.onSlotFreed(this);
    }
    if (next === 'finished') this.hooks.onFinished(this);
  }
}
