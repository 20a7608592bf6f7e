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
 *
 * Pure policy on an injected clock: the worker reports settled handlers and claim answers.
 */
import type { Clock } from '../clock/clock.js';

/** Largest automatic buffer: graphile-worker's published local queue size, and the tuned bench setting. */
export const AUTO_PREFETCH_MAX = 500;
/** A buffered job should start within about this long: the target buffer is the jobs finished in it. */
export const AUTO_PREFETCH_WINDOW_MS = 250;
/** The rate is that of the last full bucket of this length (of the current one until there is one). */
const RATE_BUCKET_MS = 500;
/** The current bucket's rate counts over at least this long, so its first few settles are no spike. */
const MIN_RATE_SPAN_MS = 100;

/** The automatic prefetch of one worker. */
export class AdaptivePrefetch {
  private backlogDeep = false;
  private bucketStart: number;
  private settledInBucket = 0;
  private settledInLastBucket = 0;
  private lastBucketMs = 0;

  constructor(
    private readonly clock: Clock,
    private readonly ceiling: number = AUTO_PREFETCH_MAX,
    private readonly windowMs: number = AUTO_PREFETCH_WINDOW_MS,
  ) {
    this.bucketStart = clock.monotonic();
  }

  /** A handler settled (its slot is free again). */
  settled(): void {
    this.roll();
    this.settledInBucket += 1;
  }

  /** A claim for `limit` jobs returned `claimed`: a full answer means more are due than it asked for. */
  claimAnswered(claimed: number, limit: number): void {
    this.backlogDeep = limit > 0 && claimed >= limit;
  }

  /** Settled handlers per second: over the last full bucket, or the current one until there is one. */
  ratePerSecond(): number {
    this.roll();
    if (this.lastBucketMs > 0) return (this.settledInLastBucket * 1000) / this.lastBucketMs;
    const span = Math.max(MIN_RATE_SPAN_MS, this.clock.monotonic() - this.bucketStart);
    return (this.settledInBucket * 1000) / span;
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
    this.bucketStart = now;
  }
}
