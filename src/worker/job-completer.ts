/**
 * Batches completions: many finished jobs share one `jobCompleteMany` round trip, each still
 * fenced by its own token (the batching, one round trip in flight and the retries are
 * {@link LeaseWriteBatcher}'s).
 */
import type { CompleteOutcome, JobLease, StorePartition } from '../store/store.js';
import {
  type BatchedWriteCallback,
  type BatchedWriteResult,
  LeaseWriteBatcher,
  type LeaseWriteBatcherOptions,
} from './lease-write-batcher.js';

/** What became of one completion: the store's answer, or `abandoned` when it was never written. */
export type CompletionResult = BatchedWriteResult<CompleteOutcome>;

/** Told what became of a completion; the same function serves every job (no closure per job). */
export type CompletionCallback<T> = BatchedWriteCallback<T, CompleteOutcome>;

/** Settings and callbacks for a {@link JobCompleter}. */
export interface JobCompleterOptions extends LeaseWriteBatcherOptions {
  /** Completions delete the job's row (retention 0) rather than keep a done record. */
  deleteDoneRecords?: boolean | undefined;
}

/** Collects completions and writes them in batches. */
export class JobCompleter extends LeaseWriteBatcher<null, CompleteOutcome> {
  constructor(store: Pick<StorePartition, 'jobCompleteMany'>, options: JobCompleterOptions) {
    const deleteRecord = options.deleteDoneRecords;
    super(
      (batch) => store.jobCompleteMany({ leases: batch.map((item) => item.lease), deleteRecord }),
      'stale',
      options,
    );
  }

  /** Queues a completion; `onWritten(target, result)` is told the store's verdict once its batch is written (or `abandoned`). */
  complete<T>(lease: JobLease, target: T, onWritten: CompletionCallback<T>): void {
    this.add(lease, null, target, onWritten);
  }
}
