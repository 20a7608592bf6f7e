/**
 * The fenced outcome writes of a worker's executions that are not batched completions: a failed
 * attempt (batched by the {@link FailureWriter}s, with a decision from `decideAfterFailure`), a
 * lease given back (`jobRelease`) and a completion inside the handler's own transaction. Each is
 * fenced by the claim's token and retried through database errors only while the lease is still
 * ours.
 */
import type { Clock } from '../clock/clock.js';
import { ConfigurationError } from '../job/errors.js';
import type { AttemptError, ClaimedJob } from '../job/job.js';
import { decideAfterFailure, type RetryDecision, type RetryHints } from '../retry/backoff.js';
import type { FailOutcome, JobLease, Store } from '../store/store.js';
import { leaseOf } from '../store/store-params.js';
import type { FailureWriter } from './failure-writer.js';
import { writeWhileHeld } from './fenced-write.js';
import type { JobExecution } from './job-execution.js';
import { StaleLeaseError } from './job-handler.js';
import type { BatchedWriteResult } from './lease-write-batcher.js';
import type { Logger } from './logger.js';
import type { PartitionedBatchers } from './partitioned-batchers.js';
import type { PartitionedRenewer } from './partitioned-renewer.js';
import type { WorkerReporter } from './worker-reporter.js';

/** What an {@link OutcomeWriter} writes with and reports to. */
export interface OutcomeWriterDependencies {
  store: Store;
  renewer: PartitionedRenewer;
  report: WorkerReporter;
  clock: Clock;
  random: () => number;
  logger: Logger;
  leaseMs: number;
  /** Completions delete the job's row (retention 0) rather than keep a done record. */
  deleteDoneRecords: boolean;
  /** Where failed attempts wait for their batch, per partition. */
  failures: PartitionedBatchers<FailureWriter>;
  /** Keeps an unbatched outcome write for shutdown to wait on (and errors from escaping). */
  track(write: Promise<void>): void;
}

/** Writes fail, release and in-transaction completions for one worker. */
export class OutcomeWriter {
  constructor(private readonly deps: OutcomeWriterDependencies) {}

  /**
   * Records the failed attempt of `execution` and finishes it once written; `hints` steer the
   * retry decision. The write joins its partition's next failure batch (decision 0024), fenced by
   * the lease's token and owner; a lost lease abandons it. Only an execution whose lease went to
   * the handler's transaction (`ctx.completeInTransaction`, then rolled back) is written alone:
   * the renewer no longer holds that lease, so the batch would abandon it.
   */
  fail(
    execution: JobExecution,
    error: Pick<AttemptError, 'message' | 'kind' | 'detail'>,
    hints: RetryHints = {},
  ): void {
    const { job, lease } = execution;
    const decision = decideAfterFailure({
      attempts: job.attempts,
      maxAttempts: job.maxAttempts,
      policy: job.retryPolicy,
      random: this.deps.random,
      hints,
    });
    if (execution.completedInTransaction) {
      this.deps.track(this.failAlone(execution, error, decision));
      return;
    }
    this.deps.failures.of(lease).fail(lease, { error, decision }, { execution, error }, this.failureWritten);
  }

  /** What became of a failure {@link fail} queued (one function for every failure). */
  private readonly failureWritten = (
    { execution, error }: { execution: JobExecution; error: Pick<AttemptError, 'message' | 'kind' | 'detail'> },
    result: BatchedWriteResult<FailOutcome>,
  ): void => {
    execution.finish();
    if (result !== 'abandoned') this.reportFailure(execution, error, result);
  };

  /** The failure of an execution whose lease the handler's transaction had: one fenced write. */
  private async failAlone(
    execution: JobExecution,
    error: Pick<AttemptError, 'message' | 'kind' | 'detail'>,
    decision: RetryDecision,
  ): Promise<void> {
    const outcome = await this.fencedWrite(execution.lease, 'fail', execution, () =>
      this.deps.store.jobFail({ ...leaseOf(execution.lease), error, decision }),
    );
    execution.finish();
    if (outcome !== undefined) this.reportFailure(execution, error, outcome);
  }

  private reportFailure(
    execution: JobExecution,
    error: Pick<AttemptError, 'message' | 'kind' | 'detail'>,
    outcome: FailOutcome,
  ): void {
    const { job } = execution;
    if (outcome.outcome === 'stale') {
      this.deps.report.stale(job, 'fail');
      return;
    }
    const retryAt = outcome.outcome === 'retry' ? outcome.runAt : null;
    this.deps.report.failed(job, error, execution.elapsedMs(), retryAt);
    if (outcome.outcome === 'parked') this.deps.report.parked(job, error);
  }

  /** Gives a lease back (shutdown, a claim answered while stopping); finishes its execution if it has one. */
  async release(job: ClaimedJob, lease: JobLease, execution?: JobExecution): Promise<void> {
    const outcome = await this.fencedWrite(lease, 'release', execution, () =>
      this.deps.store.jobRelease(leaseOf(lease)),
    );
    if (execution) execution.finish();
    else this.deps.renewer.remove(lease);
    if (outcome === 'released') this.deps.report.counters.released += 1;
    else if (outcome === 'stale') this.deps.report.stale(job, 'release');
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
  async completeInTransaction(execution: JobExecution, transaction: unknown): Promise<void> {
    const { job, lease } = execution;
    if (!this.deps.store.capabilities.callerTransactions) {
      throw new ConfigurationError(
        'ctx.completeInTransaction needs a store that can join your transaction (capabilities.callerTransactions: PostgreSQL); ' +
          'this store cannot. Return from the handler to complete the job instead.',
      );
    }
    const refusal = execution.transactionRefusal();
    if (refusal !== null) throw new StaleLeaseError(job.id, lease.token, `${refusal}; roll your transaction back`);
    const outcome = await this.deps.store.jobComplete({
      ...leaseOf(lease),
      transaction,
      deleteRecord: this.deps.deleteDoneRecords,
    });
    if (outcome === 'stale') {
      this.deps.report.stale(job, 'complete');
      throw new StaleLeaseError(
        job.id,
        lease.token,
        'the lease is no longer current (a newer claim holds the job, it was cancelled or is already done); roll your transaction back',
      );
    }
    if (execution.abortReason !== null) {
      throw new StaleLeaseError(
        job.id,
        lease.token,
        `this attempt was cut off (${execution.abortReason}) while completing; roll your transaction back`,
      );
    }
    execution.handOver();
    this.deps.renewer.remove(lease);
  }

  /**
   * A fenced write, retried through database errors while the lease is ours: held by the
   * renewer, or handed to the handler's transaction (after that transaction rolled back the job
   * is still running under it, so a fail or release fenced by its token is still right).
   */
  private fencedWrite<T>(
    lease: JobLease,
    operation: string,
    execution: JobExecution | undefined,
    write: () => Promise<T>,
  ): Promise<T | undefined> {
    const { renewer, report } = this.deps;
    return writeWhileHeld(
      {
        operation,
        lease,
        isHeld: () => execution?.completedInTransaction === true || renewer.holds(lease),
        leaseMs: this.deps.leaseMs,
        clock: this.deps.clock,
        random: this.deps.random,
        logger: this.deps.logger,
        onError: (error, op) => report.error(error, op),
      },
      write,
    );
  }
}
