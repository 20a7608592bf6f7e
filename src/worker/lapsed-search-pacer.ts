/**
 * When a claim should also look for lapsed leases: at most once per
 * {@link LAPSED_SEARCH_INTERVAL_MS} per claimer (a Node worker's claim loop, or the HTTP service's
 * claims for its remote workers), and again at once after a searching claim failed. Pure policy
 * on the caller's monotonic clock.
 *
 * Why: finding lapsed leases reads the running jobs' index from its head, and on PostgreSQL every
 * job that finished since the last VACUUM left a dead entry there. Measured at 150,000 finished
 * jobs, 625 of a 10-job claim's 1,867 buffers went to that search, growing with every job drained,
 * in each of a busy worker's claims (issue 17's 1M-backlog cliff; decision 0011). A lease that
 * lapses is taken over at most this much later, well inside the recovery bound (lease + poll).
 */

/** The shortest time between two claims that search for lapsed leases, ms. */
export const LAPSED_SEARCH_INTERVAL_MS = 250;

/** Decides, claim by claim, whether that claim searches for lapsed leases. */
export class LapsedSearchPacer {
  /** Monotonic ms when the last searching claim was sent. */
  private searchedAtMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly intervalMs = LAPSED_SEARCH_INTERVAL_MS) {}

  /**
   * Whether a claim sent at `nowMs` searches; a true answer counts as a search from `nowMs` on.
   * Call {@link failed} with the same instant when that claim did not go through.
   */
  next(nowMs: number): boolean {
    if (nowMs - this.searchedAtMs < this.intervalMs) return false;
    this.searchedAtMs = nowMs;
    return true;
  }

  /** The searching claim sent at `sentAtMs` failed: the next claim searches again. */
  failed(sentAtMs: number): void {
    if (this.searchedAtMs === sentAtMs) this.searchedAtMs = Number.NEGATIVE_INFINITY;
  }
}
