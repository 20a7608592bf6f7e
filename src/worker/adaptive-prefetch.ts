/**
 * The default prefetch (`prefetch: 'auto'`): how many jobs a worker leases ahead of its free
 * slots, sized from what it observes instead of a number the user has to tune.
 *
 * Why: with no buffer, every freed slot costs a claim round trip, so a deep backlog drains at
 * round-trip speed (claims of `concurrency` jobs; each claim also steps over the dead index
 * entries that finished jobs leave at the head of the pending index until vacuum), while a
 * fixed large buffer holds leases on jobs another worker could run and lets a later job of
 * higher priority wait behind it. The rule here keeps the buffer's cost bounded in time:
 *
 * - Only while the backlog is deeper than a claim (the last claim came back full) is there
 *   anything to buffer; otherwise the buffer target is 0 and the worker claims for free slots only.
 * - The target is what this worker finishes in {@link AUTO_PREFETCH_WINDOW_MS}, at its observed
 *   rate of settled handlers, capped at {@link AUTO_PREFETCH_MAX}: a buffered job starts within
 *   about that window, so a higher-priority job submitted later waits at most about as long
 *   behind the buffer, and slow handlers (a rate of a few per second) get no buffer at all.
 * - The rate is the higher of the last closed bucket's and the current bucket's. The current one
 *   counts as soon as it spans twice the longest time one of its handlers held a slot (and at least
 *   {@link MIN_RATE_SPAN_MS}): a spike after a quiet spell, whose closed bucket reads near zero,
 *   gets its buffer within milliseconds instead of after a whole bucket of claims sized to free
 *   slots (10,000 jobs due at once took 0.8 s to start, most of it that ramp), while handlers
 *   that were started together and settle together (slow ones after a quiet spell) are read over
 *   at least twice their own duration, so their simultaneous settles never read as a burst.
 *
 * Pure policy on an injected clock: the worker reports settled handlers and claim answers.
 */
import type { Clock } from '../clock/clock.js';

/**
 * Largest automatic buffer: two claims of {@link AUTO_CLAIM_PREFETCH}, so that on a deep backlog
 * the next claim is on its way while the last one's jobs run (see worker-options.ts).
 */
export const AUTO_PREFETCH_MAX = 1000;
/**
 * What a claim leases beyond the free slots under the automatic prefetch (the default
 * `claimBatchSize` is concurrency plus this): graphile-worker's published local queue size, and
 * the bench's tuned setting. Half of {@link AUTO_PREFETCH_MAX}, so two claims fit in flight.
 */
export const AUTO_CLAIM_PREFETCH = 500;
/** A buffered job should start within about this long: the target buffer is the jobs finished in it. */
export const AUTO_PREFETCH_WINDOW_MS = 250;
/** Settles are counted in buckets of this length (the rate: see ratePerSecond). */
const RATE_BUCKET_MS = 500;
/**
 * The current bucket's rate counts over at least this long (and twice the handlers' slot time), so
 * its first few settles are no spike: 20 ms is under a tenth of the window.
 */
const MIN_RATE_SPAN_MS = 20;

/** The automatic prefetch of one worker. */
export class AdaptivePrefetch {
  private backlogDeep = false;
  private bucketStart: number;
  private settledInBucket = 0;
  private settledInLastBucket = 0;
  private lastBucketMs = 0;
  /** The longest any handler settled in the current bucket held its slot, ms. */
  private longestHeldInBucketMs = 0;

  constructor(
    private readonly clock: Clock,
    private readonly ceiling: number = AUTO_PREFETCH_MAX,
    private readonly windowMs: number = AUTO_PREFETCH_WINDOW_MS,
  ) {
    this.bucketStart = clock.monotonic();
  }

  /** A handler settled (its slot is free again) after holding its slot `heldMs`. */
  settled(heldMs: number): void {
    this.roll();
    this.settledInBucket += 1;
    this.longestHeldInBucketMs = Math.max(this.longestHeldInBucketMs, heldMs);
  }

  /** A claim for `limit` jobs returned `claimed`: a full answer means more are due than it asked for. */
  claimAnswered(claimed: number, limit: number): void {
    this.backlogDeep = limit > 0 && claimed >= limit;
  }

  /**
   * Settled handlers per second: the higher of the last closed bucket's rate and the current
   * bucket's, the current one read over at least twice the longest slot time of its handlers.
   */
  ratePerSecond(): number {
    this.roll();
    const closed = this.lastBucketMs > 0 ? (this.settledInLastBucket * 1000) / this.lastBucketMs : 0;
    const span = Math.max(MIN_RATE_SPAN_MS, 2 * this.longestHeldInBucketMs, this.clock.monotonic() - this.bucketStart);
    return Math.max(closed, (this.settledInBucket * 1000) / span);
  }

  /** How many jobs to hold beyond the free slots now. */
  current(): number {
    if (!this.backlogDeep) return 0;
    return Math.min(this.ceiling, Math.floor((this.ratePerSecond() * this.windowMs) / 1000));
  }

  private roll(): void {
    const now = this.clock.monotonic();
    const age = now - this.bucketStart;
    if (age < RATE_BUCKET_MS) return;
    // A bucket closes at the first event after its length, over its true age: a quiet spell makes
    // one long bucket with few settles (a low rate, no buffer) instead of being forgotten, so the
    // first settles after it, all in a brand-new bucket, never read as a burst.
    this.settledInLastBucket = this.settledInBucket;
    this.lastBucketMs = age;
    this.settledInBucket = 0;
    this.longestHeldInBucketMs = 0;
    this.bucketStart = now;
  }
}
