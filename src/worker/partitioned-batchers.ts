/**
 * Lease-write batching over a store's partitions (a sharded store's shards): one batcher per
 * partition (a {@link JobCompleter} for completions, a {@link FailureWriter} for failed attempts),
 * each with its own batches, round trips in flight and retry backoff, so a partition that is slow
 * or unreachable delays only its own writes. One batcher for all would wait for the slowest
 * partition in every batch it sends, and its batches, split by partition, would be a fraction of
 * the size each partition could take.
 */
import type { JobLease, StorePartition, StorePartitions } from '../store/store.js';

/** What a partition's batcher offers besides its own way of queueing a write. */
interface PartitionBatcher {
  queued(lease: JobLease): boolean;
  withdraw(lease: JobLease): void;
  readonly unwritten: number;
  drain(): Promise<void>;
}

/** One batcher per partition, a write routed to its job's partition. */
export class PartitionedBatchers<B extends PartitionBatcher> {
  private readonly batchers: B[];

  constructor(
    private readonly partitions: StorePartitions,
    make: (part: StorePartition) => B,
  ) {
    this.batchers = partitions.parts.map(make);
  }

  /** The batcher of the partition that holds the job under `lease`. */
  of(lease: JobLease): B {
    return this.batchers[this.partitions.partOfId(lease.id)] ?? this.batchers[0]!;
  }

  /** Whether a write under `lease` waits in its partition's batcher to be sent. */
  queued(lease: JobLease): boolean {
    return this.of(lease).queued(lease);
  }

  /** Withdraws a queued write whose lease was lost; it resolves `abandoned`. */
  withdraw(lease: JobLease): void {
    this.of(lease).withdraw(lease);
  }

  /** Writes not yet answered, over every partition. */
  get unwritten(): number {
    let total = 0;
    for (const batcher of this.batchers) total += batcher.unwritten;
    return total;
  }

  /** Writes everything pending on every partition and waits until no round trip is in flight. */
  async drain(): Promise<void> {
    await Promise.all(this.batchers.map((batcher) => batcher.drain()));
  }
}
