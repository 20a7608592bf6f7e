/**
 * Group commit for the remote-worker protocol's completions: concurrent
 * `POST /v1/worker/jobs/{id}/complete` requests share one `jobCompleteMany` round trip, each
 * still fenced by its own token and owner and answered its own outcome.
 *
 * Why: a remote worker that completes each job by its own request made each completion its own
 * transaction, and on PostgreSQL each commit waits for its own WAL flush. Four remote workers
 * claiming 100 jobs at a time drained about 1,300 jobs a second, a twentieth of a Node worker's
 * default drain on the same store (docs/benchmarks.md, "Issue 17, eighteenth session").
 *
 * The policy is the submit path's (src/submit/submit-policy.ts): an idle group writes a
 * completion at once, alone, so a lone request waits for nothing; while a round trip is in
 * flight, completions gather and go together in the next (at most {@link MAX_GROUP} a trip).
 * The same lease completed twice in one group (a client's retry racing its first request) is
 * written once and both requests get its answer, as two requests one after the other would
 * (`done` is idempotent). A failed round trip fails every request of its group with the store's
 * error, as a single write failed its one request; a client's retry is safe, a completion being
 * idempotent.
 */
import type { CompleteOutcome, JobLease, Store } from '../store/store.js';

/** The most completions one round trip carries (a worker's completion batches are of this order). */
export const MAX_GROUP = 1_000;

interface Waiter {
  resolve: (outcome: CompleteOutcome) => void;
  reject: (error: unknown) => void;
}

/** Collects concurrent completions and writes them in shared round trips; see the file header. */
export class CompletionGroup {
  /** Queued completions by lease (`id:token:owner`), each with every request waiting for it. */
  private queued = new Map<string, { lease: JobLease; waiters: Waiter[] }>();
  private writing = false;

  constructor(
    private readonly store: Pick<Store, 'jobCompleteMany'>,
    /** Whether an accepted completion deletes its row (Docket's `retentionMs: 0`). */
    private readonly deleteRecord: boolean,
  ) {}

  /** Completes `lease`; resolves once the round trip that carried it has committed. */
  complete(lease: JobLease): Promise<CompleteOutcome> {
    return new Promise((resolve, reject) => {
      const key = `${lease.id}:${lease.token}:${lease.leaseOwner ?? ''}`;
      const entry = this.queued.get(key);
      if (entry) entry.waiters.push({ resolve, reject });
      else this.queued.set(key, { lease, waiters: [{ resolve, reject }] });
      if (!this.writing) void this.writeQueued();
    });
  }

  /** Writes queued completions, one round trip at a time, until none is left. */
  private async writeQueued(): Promise<void> {
    this.writing = true;
    try {
      while (this.queued.size > 0) {
        const group: { lease: JobLease; waiters: Waiter[] }[] = [];
        for (const [key, entry] of this.queued) {
          group.push(entry);
          this.queued.delete(key);
          if (group.length === MAX_GROUP) break;
        }
        try {
          const outcomes = await this.store.jobCompleteMany({
            leases: group.map((entry) => entry.lease),
            deleteRecord: this.deleteRecord,
          });
          group.forEach((entry, index) => {
            for (const waiter of entry.waiters) waiter.resolve(outcomes[index] ?? 'stale');
          });
        } catch (error) {
          for (const entry of group) for (const waiter of entry.waiters) waiter.reject(error);
        }
      }
    } finally {
      this.writing = false;
    }
  }
}
