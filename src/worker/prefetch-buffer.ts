/**
 * Prefetched jobs: leased and heartbeated, waiting for a free handler slot, kept in the order
 * claims hand jobs out (priority, then run time, then id) so a later claim that outranks what is
 * waiting starts first.
 */
import type { ClaimedJob } from '../job/job.js';
import type { JobLease } from '../store/store.js';
import type { HeldLease } from './lease-renewer.js';

/** One prefetched job and its lease as the worker's renewer holds it. */
export interface BufferedJob {
  job: ClaimedJob;
  lease: HeldLease;
}

/** The order claims hand jobs out in: priority, then run time, then id. */
export function byClaimOrder(a: ClaimedJob, b: ClaimedJob): number {
  return a.priority - b.priority || a.runAt.getTime() - b.runAt.getTime() || compareIds(a.id, b.id);
}

/** Ids are decimal integers in text (PostgreSQL bigint) or opaque strings: shorter numbers sort first. */
function compareIds(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** The worker's prefetch buffer. */
export class PrefetchBuffer {
  private entries: BufferedJob[] = [];

  /** How many jobs wait. */
  get size(): number {
    return this.entries.length;
  }

  /** Adds one claim's jobs (already in claim order), merging them ahead of any they outrank. */
  addBatch(batch: readonly BufferedJob[]): void {
    const last = this.entries[this.entries.length - 1];
    this.entries.push(...batch);
    const first = batch[0];
    if (last && first && byClaimOrder(first.job, last.job) < 0) {
      this.entries.sort((a, b) => byClaimOrder(a.job, b.job));
    }
  }

  /**
   * Removes and returns the next job in claim order, if any. It is removed before the caller starts
   * it, so a start that frees its slot at once (no handler) may take the next one safely.
   */
  next(): BufferedJob | undefined {
    return this.entries.shift();
  }

  /** Removes and returns the job held under `lease` (the renewer's own object), if it waits here. */
  take(lease: JobLease): BufferedJob | undefined {
    const index = this.entries.findIndex((entry) => entry.lease === lease);
    return index >= 0 ? this.entries.splice(index, 1)[0] : undefined;
  }

  /** Removes and returns every waiting job. */
  takeAll(): BufferedJob[] {
    return this.entries.splice(0);
  }
}
