/**
 * Runs claimed jobs' handlers, one {@link JobExecution} each, and carries out what each
 * execution's state calls for: the completion, the failed attempt, the release, or nothing (a
 * lost lease). Counts the handlers holding slots, so the worker knows its free room and shutdown
 * knows when every handler has settled.
 */
import type { Clock } from '../clock/clock.js';
import type { ClaimedJob } from '../job/job.js';
import type { JobLease } from '../store/store.js';
import type { DocketEvents } from './docket-events.js';
import type { FailureWriter } from './failure-writer.js';
import { IntrusiveList } from './intrusive-list.js';
import type { CompletionResult, JobCompleter } from './job-completer.js';
import { JobExecution, type JobExecutionHooks } from './job-execution.js';
import type { HandlerOutcome } from './job-executor.js';
import { invokeHandler, WorkerJobContext } from './job-executor.js';
import type { AbortReason, JobHandler } from './job-handler.js';
import type { Logger } from './logger.js';
import type { OutcomeWriter } from './outcome-writer.js';
import type { PartitionedBatchers } from './partitioned-batchers.js';
import type { PartitionedRenewer } from './partitioned-renewer.js';
import type { WorkerReporter } from './worker-reporter.js';

/** What an {@link ExecutionRunner} runs with. */
export interface ExecutionRunnerDependencies {
  workerId: string;
  /** Read at each job's start, so handlers registered later are used. */
  handlers: ReadonlyMap<string, JobHandler<never>>;
  clock: Clock;
  logger: Logger;
  events: DocketEvents;
  report: WorkerReporter;
  outcomes: OutcomeWriter;
  completer: PartitionedBatchers<JobCompleter>;
  /** Where failed attempts wait for their batch (a lost lease withdraws one). */
  failures: PartitionedBatchers<FailureWriter>;
  renewer: PartitionedRenewer;
  /** Keeps an outcome write for shutdown to wait on (and errors from escaping). */
  track(write: Promise<void>): void;
  /** A bug in the worker's own bookkeeping surfaced while finishing a job: reported, never thrown. */
  onInternalError(error: unknown): void;
  /** A handler let go of the slot of `lease` after holding it `heldMs`: start buffered jobs, claim again. */
  onSlotFreed(heldMs: number, lease: JobLease): void;
}

/**
 * The executions of one worker. It is every execution's {@link JobExecutionHooks} itself, so a
 * job's run allocates no hook object or closures of its own (the drain's per-job garbage).
 */
export class ExecutionRunner implements JobExecutionHooks {
  /** Every execution not yet finished, oldest first (found by its lease only on rare paths). */
  private readonly executions = new IntrusiveList<JobExecution>();
  /** Executions whose handler holds a slot (state running or handed_over). */
  private holdingSlots = 0;
  private handlersIdle: (() => void) | undefined;

  constructor(private readonly deps: ExecutionRunnerDependencies) {}

  /** Handlers running (holding slots) right now. */
  get running(): number {
    return this.holdingSlots;
  }

  /** Starts `job`'s handler under `lease` (the renewer's held lease); a job whose kind has no handler fails at once. */
  run(job: ClaimedJob, lease: JobLease): void {
    const { deps } = this;
    const execution = new JobExecution(job, lease, deps.clock, this);
    this.executions.append(execution);
    this.holdingSlots += 1;
    const handler = deps.handlers.get(job.kind);
    if (!handler) {
      execution.failWithoutHandler();
      const known = [...deps.handlers.keys()];
      const message =
        `no handler registered for kind "${job.kind}" on worker ${deps.workerId}` +
        ` (registered: ${known.length > 0 ? known.map((k) => `"${k}"`).join(', ') : 'none'})`;
      deps.outcomes.fail(execution, { kind: 'thrown', message, detail: undefined });
      return;
    }
    if (job.timeoutMs !== null) execution.armTimeout(() => this.cutOff(execution, 'timeout'));
    if (deps.events.has('started')) {
      const latenessMs = deps.clock.now() - job.runAt.getTime();
      deps.events.emit('started', { job, workerId: deps.workerId, latenessMs });
    }
    const ctx = new WorkerJobContext(job, execution.abort, deps.logger, (transaction) =>
      deps.outcomes.completeInTransaction(execution, transaction),
    );
    invokeHandler(handler, job, ctx, execution.abort, execution);
  }

  /**
   * The execution running (or finishing) here under `lease` (the held lease it was run under), if
   * any: a walk, for the rare lost lease (a map per job cost every job; decision 0021).
   */
  executionOf(lease: JobLease): JobExecution | undefined {
    return this.executions.find((execution) => execution.lease === lease);
  }

  /**
   * Whether `execution`'s outcome has left for the database: its handler settled and no batch
   * holds its write any more (the write is in a round trip, or answered). A heartbeat refused
   * meanwhile says nothing of the lease: the database may have refused it because that very write
   * had just completed, failed or released the job. The write's own answer says whether the lease
   * had passed on (it is then reported stale).
   */
  outcomeWriteSent(execution: JobExecution): boolean {
    const { lease } = execution;
    return !execution.handlerRunning && !this.deps.completer.queued(lease) && !this.deps.failures.queued(lease);
  }

  /**
   * The renewer lost the lease of `execution`: cuts its handler off, or withdraws its completion
   * still waiting in a batch (it is then never written).
   */
  leaseLost(execution: JobExecution): void {
    if (execution.handlerRunning) this.cutOff(execution, 'lease_lost');
    else {
      this.deps.completer.withdraw(execution.lease);
      this.deps.failures.withdraw(execution.lease);
    }
  }

  /** Resolves once no handler runs, or after `graceMs`, whichever is first. */
  async handlersSettled(graceMs: number): Promise<void> {
    if (this.holdingSlots === 0) return;
    const { clock } = this.deps;
    await new Promise<void>((resolve) => {
      const timer = clock.setTimeout(resolve, graceMs);
      this.handlersIdle = () => {
        clock.clearTimeout(timer);
        resolve();
      };
    });
    this.handlersIdle = undefined;
  }

  /** Cuts every running handler off for shutdown; their leases are released. */
  cutOffAll(): void {
    for (const execution of this.executions.toArray()) this.cutOff(execution, 'shutdown');
  }

  /**
   * {@link JobExecutionHooks.onHandlerSettled}: the handler settled (or was cut off first): starts
   * the write its execution says is due. A failed attempt's write is
   * tracked (shutdown waits for it); a completion joins the completer's next batch, which shutdown
   * drains, and {@link completionWritten} hears the verdict. Nothing here is a promise per job on
   * the common path: a drain completes every job, and each promise layer was garbage.
   */
  onHandlerSettled(execution: JobExecution, outcome: HandlerOutcome): void {
    const { deps } = this;
    try {
      const action = execution.settle(outcome);
      if (action === 'fail' && outcome.kind === 'threw') {
        const error = { kind: 'thrown' as const, message: outcome.message, detail: outcome.detail };
        deps.outcomes.fail(execution, error, outcome.hints);
      } else if (action === 'completed_in_transaction') {
        deps.report.completed(execution.job, execution.elapsedMs());
      } else if (action === 'complete') {
        deps.completer.of(execution.lease).complete(execution.lease, execution, this.completionWritten);
      }
    } catch (error) {
      deps.onInternalError(error);
    }
  }

  /** What became of a completion {@link onHandlerSettled} queued (one function for every job). */
  private readonly completionWritten = (execution: JobExecution, result: CompletionResult): void => {
    const { report } = this.deps;
    execution.finish();
    if (result === 'done') report.completed(execution.job, execution.elapsedMs());
    else if (result === 'stale') report.stale(execution.job, 'complete');
    else report.counters.discarded += 1;
  };

  /** {@link JobExecutionHooks.onHandlerSettledLate}: a handler settled after its cut-off; its result is discarded. */
  onHandlerSettledLate(): void {
    this.deps.report.counters.discarded += 1;
  }

  /** {@link JobExecutionHooks.onSlotFreed}: one handler fewer holds a slot. */
  onSlotFreed(execution: JobExecution): void {
    this.holdingSlots -= 1;
    if (this.holdingSlots === 0) this.handlersIdle?.();
    this.deps.onSlotFreed(execution.elapsedMs(), execution.lease);
  }

  /** {@link JobExecutionHooks.onFinished}: nothing more is written for `execution`; forget its lease. */
  onFinished(execution: JobExecution): void {
    this.deps.renewer.remove(execution.lease);
    this.executions.remove(execution);
  }

  /** Cuts a running handler off and starts the write its cut-off calls for (none for a lost lease). */
  private cutOff(execution: JobExecution, reason: AbortReason): void {
    if (!execution.cutOff(reason)) return;
    const { outcomes, track } = this.deps;
    if (reason === 'timeout') {
      this.deps.report.counters.timedOut += 1;
      const message = `timed out: ${execution.cutOffMessage('timeout')}`;
      outcomes.fail(execution, { kind: 'timeout', message, detail: undefined });
    } else if (reason === 'shutdown') {
      track(outcomes.release(execution.job, execution.lease, execution));
    }
  }
}
