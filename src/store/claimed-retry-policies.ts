/**
 * Retry policies as a claim reads them back, row after row, on both stores.
 *
 * Nearly every job of a queue carries the same policy (the default, or its kind's), so the rows
 * of one claim repeat one policy text. Parsing it once per run of equal texts, instead of once
 * per row, spares the worker's hottest loop a JSON.parse and an object per claimed job that then
 * lives as long as the job waits in the buffer (docs/benchmarks.md, issue 17). The rows of a run
 * share one policy object, so it is frozen: no job can change another's backoff through it
 * (the submit side's DEFAULT_RETRY_POLICY is frozen too).
 */
import type { RetryPolicy } from '../job/job.js';

/** Parses the retry policy texts of one claim's rows, in row order; make one per claim. */
export class ClaimedRetryPolicies {
  private lastText: string | undefined;
  private lastPolicy: RetryPolicy | undefined;

  /** The policy stored as `text` (JSON), shared with the previous row's when the texts are equal. */
  parse(text: string): RetryPolicy {
    if (text !== this.lastText || this.lastPolicy === undefined) {
      this.lastPolicy = Object.freeze(JSON.parse(text) as RetryPolicy);
      this.lastText = text;
    }
    return this.lastPolicy;
  }
}
