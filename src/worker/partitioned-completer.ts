/**
 * Completion batching over a store's partitions (a sharded store's shards): one
 * {@link JobCompleter} per partition, each with its own batches, round trips in flight and retry
 * backoff, so a partition that is slow or unreachable delays only its own completions. One
 * completer for all would wait for the slowest partition in every batch it sends, and its
 * batches, split by partition, would be a fraction of the size each partition could take.
 */
import type { JobLease, StorePartitions } from '../store/store.js';
import { type CompletionCallback, JobCompleter, type JobCompleterOptions } from './job-completer.js';

/** One completer per partition, a completion routed to its job's partition. */
export class PartitionedCompleter {
  private readonly completers: JobCompleter[];

  constructor(
    private readonly partitions: StorePartitions,
    options: JobCompleterOptions,
  ) {
    this.completers = partitions.parts.map((part) => new JobCompleter(part, options));
  }

  /** Queues a completion on its job's partition; `onWritten` is told that partition's verdict. */
  complete<T>(lease: JobLease, target: T, onWritten: CompletionCallback<T>): void {
    this.of(lease).complete(lease, target, onWritten);
  }

  /** Withdraws a queued completion whose lease was lost; it resolves `abandoned`. */
  withdraw(lease: JobLease): void {
    this.of(lease).withdraw(lease);
  }

  /** Completions not yet answered, over every partition. */
  get unwritten(): number {
    let total = 0;
    for (const completer of this.completers) total += completer.unwritten;
    return total;
  }

  /** Writes everything pending on every partition and waits until no round trip is in flight. */
  async drain(): Promise<void> {
    await Promise.all(this.completers.map((completer) => completer.drain()));
  }

  private of(lease: JobLease): JobCompleter {
    return this.completers[this.partitions.partOfId(lease.id)] ?? this.completers[0]!;
  }
}
