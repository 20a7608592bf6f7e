/**
 * Batches failed attempts: many share one `jobFailMany` round trip, each fenced by its own token
 * and carrying its own error and decision (decision 0024). Written one statement each, a
 * downstream outage (every job's first attempt throwing) drained at about 2,000 jobs/s against
 * 29,000 when they succeed: each failure was its own round trip, plan and commit, and its own
 * socket write in the worker. The batching itself is {@link LeaseWriteBatcher}'s, as for
 * completions.
 */
import type { AttemptError } from '../job/job.js';
import type { RetryDecision } from '../retry/backoff.js';
import type { FailOutcome, JobLease, StorePartition } from '../store/store.js';
import { leaseOf, STALE_FAILURE } from '../store/store-params.js';
import { type BatchedWriteCallback, LeaseWriteBatcher, type LeaseWriteBatcherOptions } from './lease-write-batcher.js';

/** What a failed attempt writes besides its lease. */
export interface FailedAttempt {
  error: Pick<AttemptError, 'message' | 'kind' | 'detail'>;
  decision: RetryDecision;
}

/** Collects failed attempts and writes them in batches. */
export class FailureWriter extends LeaseWriteBatcher<FailedAttempt, FailOutcome> {
  constructor(store: Pick<StorePartition, 'jobFailMany'>, options: LeaseWriteBatcherOptions) {
    super(
      (batch) =>
        store.jobFailMany({
          failures: batch.map(({ lease, request }) => ({ ...leaseOf(lease), ...request })),
        }),
      STALE_FAILURE,
      options,
    );
  }

  /** Queues a failed attempt; `onWritten(target, result)` is told the store's verdict once its batch is written (or `abandoned`). */
  fail<T>(lease: JobLease, attempt: FailedAttempt, target: T, onWritten: BatchedWriteCallback<T, FailOutcome>): void {
    this.add(lease, attempt, target, onWritten);
  }
}
