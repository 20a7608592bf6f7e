/**
 * The prefetch buffer of a worker over a store's partitions (a sharded store's shards): one
 * {@link PrefetchBuffer} per partition, each in its own claim order, and free handler slots
 * handed to the partitions in turn.
 *
 * Why in turn, not in one merged claim order: priority order is per partition (docs/sharding.md),
 * and a merged order would let one partition's stream of high-priority jobs keep another's
 * buffered jobs waiting, leased and heartbeated, for as long as that stream lasts. In turn, a
 * partition's buffered job starts within one round of freed slots, however busy the others are.
 */
import type { JobLease } from '../store/store.js';
import { type BufferedJob, PrefetchBuffer } from './prefetch-buffer.js';

/** A buffered job and the index of the partition it was claimed from. */
export interface PartitionedEntry {
  entry: BufferedJob;
  part: number;
}

/** One prefetch buffer per partition, started in turn. */
export class PartitionedBuffer {
  private readonly buffers: PrefetchBuffer[];
  /** The partition whose buffered job starts next, if it has one. */
  private turn = 0;

  constructor(parts: number) {
    this.buffers = Array.from({ length: Math.max(1, parts) }, () => new PrefetchBuffer());
  }

  /** How many jobs wait, over every partition. */
  get size(): number {
    let total = 0;
    for (const buffer of this.buffers) total += buffer.size;
    return total;
  }

  /** How many jobs of partition `part` wait. */
  sizeOf(part: number): number {
    return this.buffers[part]?.size ?? 0;
  }

  /** Adds one claim's jobs (in claim order) to its partition's buffer. */
  addBatch(part: number, batch: readonly BufferedJob[]): void {
    this.buffers[part]!.addBatch(batch);
  }

  /** Removes and returns the next job of the next partition in turn that has one. */
  next(): PartitionedEntry | undefined {
    const count = this.buffers.length;
    for (let step = 0; step < count; step += 1) {
      const part = (this.turn + step) % count;
      const entry = this.buffers[part]!.next();
      if (entry) {
        this.turn = (part + 1) % count;
        return { entry, part };
      }
    }
    return undefined;
  }

  /** Removes and returns the job held under `lease`, if it waits in any partition's buffer. */
  take(lease: JobLease): BufferedJob | undefined {
    for (const buffer of this.buffers) {
      const entry = buffer.take(lease);
      if (entry) return entry;
    }
    return undefined;
  }

  /** Removes and returns every waiting job. */
  takeAll(): BufferedJob[] {
    return this.buffers.flatMap((buffer) => buffer.takeAll());
  }
}
