/**
 * Batches a worker's lease writes (its completions, its failed attempts): many share one round
 * trip, each still fenced by its own token, so a stale one is refused alone while the rest are
 * accepted.
 *
 * A write waits at most `flushMs` for company, or goes at once when `batchSize` are pending.
 * One round trip is in flight at a time: while it runs, finished jobs gather into the next batch,
 * so a drain writes a few large batches instead of twice as many small ones committing side by
 * side. Against two in flight, on a 60,000-job drain, that cut the database's CPU per job by
 * 4-8 µs and raised throughput 4-8 % in every round (docs/benchmarks.md, issue 17). A slot never
 * waits for it: it is freed when the handler settles.
 * A failed round trip (the database restarting) is retried with backoff for as long as the lease
 * is still held; a write whose lease is lost meanwhile is withdrawn, not written, since its
 * job may already belong to another worker.
 */
import type { Clock, ClockTimer } from '../clock/clock.js';
import { sleep, systemClock } from '../clock/clock.js';
import { PartialBatchError } from '../job/errors.js';
import type { JobLease } from '../store/store.js';

/** What became of one write: the store's answer, or `abandoned` when it was never written. */
export type BatchedWriteResult<O> = O | 'abandoned';

/** Told what became of a write; the same function serves every job (no closure per job). */
export type BatchedWriteCallback<T, O> = (target: T, result: BatchedWriteResult<O>) => void;

/** One queued write: the lease it is fenced by and what else the store needs to write it. */
export interface PendingWrite<R> {
  lease: JobLease;
  request: R;
  target: unknown;
  onWritten: BatchedWriteCallback<unknown, unknown>;
  /** When its first round trip failed (the clock's monotonic ms), or -1 while none has. */
  failingSince: number;
}

/** Settings and callbacks for a {@link LeaseWriteBatcher}. */
export interface LeaseWriteBatcherOptions {
  batchSize: number;
  flushMs: number;
  /** Whether the lease is still ours; a write whose lease is gone is abandoned. */
  isHeld(lease: JobLease): boolean;
  onError(error: unknown): void;
  /** A round trip ended (written or failed): fewer writes may wait now. */
  onRoundTripEnded?: (() => void) | undefined;
  /**
   * A write whose round trips have failed for this long is abandoned (its lease then lapses and
   * its job runs again), as a single fenced write gives up (fenced-write.ts): a write the database
   * refuses for a reason that does not pass must not hold its job, nor keep it running under a
   * renewed lease, for ever. A lost connection costs the lease sooner than this (leaseMs).
   * Omitted: never.
   */
  giveUpAfterMs?: number | undefined;
  /** Told of each write given up after {@link giveUpAfterMs}, before it is abandoned. */
  onGiveUp?: ((lease: JobLease) => void) | undefined;
  /** Uniform [0, 1) for retry jitter. */
  random: () => number;
  /** Paces the flush and retry timers; the real clock when omitted. */
  clock?: Clock | undefined;
}

/** Writes one batch; answers in input order (a missing answer counts as `unanswered`). */
export type WriteBatch<R, O> = (batch: readonly PendingWrite<R>[]) => Promise<O[]>;

/** Retry delays after a failed round trip grow from 50 ms to 2 s. */
const RETRY_BASE_MS = 50;
const RETRY_MAX_MS = 2000;

/** Collects lease writes and writes them in batches. */
export class LeaseWriteBatcher<R, O> {
  private pending: PendingWrite<R>[] = [];
  private timer: ClockTimer | undefined;
  /** The round trip in flight, if any (one at a time). */
  private writing: Promise<void> | undefined;
  /** Writes in the round trip in flight. */
  private writingCount = 0;
  private failures = 0;
  private retryTimer: ClockTimer | undefined;
  private readonly clock: Clock;

  /**
   * `writeBatch` sends one batch to the store; `unanswered` is the result of a write the store's
   * answer leaves out (the stale answer).
   */
  constructor(
    private readonly writeBatch: WriteBatch<R, O>,
    private readonly unanswered: O,
    private readonly options: LeaseWriteBatcherOptions,
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /**
   * Queues a write; `onWritten(target, result)` is told the store's verdict once its batch is
   * written (or `abandoned`). A callback rather than a promise: a drain completes every job, and
   * a promise with its resolver per job was garbage the worker paid for in collections.
   */
  add<T>(lease: JobLease, request: R, target: T, onWritten: BatchedWriteCallback<T, O>): void {
    this.pending.push({
      lease,
      request,
      target,
      onWritten: onWritten as BatchedWriteCallback<unknown, unknown>,
      failingSince: -1,
    });
    this.scheduleFlush();
  }

  /** Whether a write under `lease` waits here to be sent (queued, or back in the queue to be retried). */
  queued(lease: JobLease): boolean {
    return this.pendingIndexOf(lease) >= 0;
  }

  /** Withdraws a queued write whose lease was lost; it resolves `abandoned`. */
  withdraw(lease: JobLease): void {
    const index = this.pendingIndexOf(lease);
    if (index >= 0) {
      const [item] = this.pending.splice(index, 1);
      if (item) this.settle(item, 'abandoned');
    }
  }

  /** Where the queued write under `lease` (its job and token) sits, or -1. */
  private pendingIndexOf(lease: JobLease): number {
    return this.pending.findIndex((p) => p.lease.id === lease.id && p.lease.token === lease.token);
  }

  /** Writes not yet answered by the store: queued, or in the round trip in flight. */
  get unwritten(): number {
    return this.pending.length + this.writingCount;
  }

  /** Writes everything pending now and waits until no round trip is in flight. */
  async drain(): Promise<void> {
    while (this.pending.length > 0 || this.writing || this.retryTimer) {
      // Flush at once rather than after flushMs; a pending retry keeps its backoff so an outage is not hammered.
      if (!this.retryTimer) this.flush();
      if (this.writing) await this.writing;
      else await sleep(this.clock, RETRY_BASE_MS);
    }
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Abandons everything still pending (after a stop deadline); nothing more is written. */
  abandonAll(): void {
    for (const item of this.pending.splice(0)) this.settle(item, 'abandoned');
    this.clock.clearTimeout(this.timer);
    this.clock.clearTimeout(this.retryTimer);
    this.timer = undefined;
    this.retryTimer = undefined;
  }

  /**
   * Tells one write's callback its result. A callback that throws (a bug in the caller) is
   * reported and must not keep the rest of its batch from being told.
   */
  private settle(item: PendingWrite<R>, result: BatchedWriteResult<O>): void {
    try {
      item.onWritten(item.target, result);
    } catch (error) {
      this.options.onError(error);
    }
  }

  private scheduleFlush(): void {
    if (this.retryTimer) return;
    if (this.pending.length >= this.options.batchSize) {
      this.flush();
      return;
    }
    if (!this.timer) {
      this.timer = this.clock.setTimeout(() => {
        this.timer = undefined;
        this.flush();
      }, this.options.flushMs);
    }
  }

  private flush(): void {
    while (this.pending.length > 0 && !this.writing && !this.retryTimer) {
      const batch = this.pending.splice(0, this.options.batchSize).filter((item) => {
        if (this.options.isHeld(item.lease)) return true;
        this.settle(item, 'abandoned');
        return false;
      });
      if (batch.length === 0) continue;
      this.writingCount = batch.length;
      this.writing = this.write(batch).finally(() => {
        this.writing = undefined;
        this.writingCount = 0;
        if (this.pending.length > 0) this.scheduleFlush();
        this.options.onRoundTripEnded?.();
      });
    }
    if (this.pending.length === 0 && this.timer) {
      this.clock.clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private async write(batch: PendingWrite<R>[]): Promise<void> {
    let outcomes: O[];
    try {
      outcomes = await this.writeBatch(batch);
    } catch (error) {
      this.options.onError(error);
      this.failures += 1;
      let unanswered = batch;
      if (error instanceof PartialBatchError) {
        // Part of the batch was answered (a sharded store with one shard down): those are settled.
        const results = error.results as (O | undefined)[];
        unanswered = batch.filter((item, index) => {
          const outcome = results[index];
          if (outcome === undefined) return true;
          this.settle(item, outcome);
          return false;
        });
      }
      // Back to the front of the queue, to be retried while their leases are still held, unless
      // they have failed for longer than the give-up window.
      const now = this.clock.monotonic();
      const giveUpAfterMs = this.options.giveUpAfterMs ?? Number.POSITIVE_INFINITY;
      unanswered = unanswered.filter((item) => {
        if (item.failingSince < 0) item.failingSince = now;
        if (now - item.failingSince < giveUpAfterMs) return true;
        this.options.onGiveUp?.(item.lease);
        this.settle(item, 'abandoned');
        return false;
      });
      this.pending.unshift(...unanswered);
      const delay = Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (this.failures - 1));
      if (!this.retryTimer) {
        this.retryTimer = this.clock.setTimeout(
          () => {
            this.retryTimer = undefined;
            this.flush();
          },
          Math.round(delay * (1 + this.options.random())),
        );
      }
      return;
    }
    this.failures = 0;
    batch.forEach((item, index) => {
      this.settle(item, outcomes[index] ?? this.unanswered);
    });
  }
}
