/**
 * Job ids reserved ahead of their submits (hi/lo style), so a submit knows its ids before it is
 * sent and can send the same statement again after a lost connection (src/submit/submit-policy.ts).
 * One reservation round trip serves many flushes: a block sized to the rate the last block was
 * used at, from {@link MIN_RESERVED_ID_BLOCK} to {@link RESERVED_ID_BLOCK} ids
 * ({@link nextReservedBlockSize}).
 *
 * Ids stay close to submit order across processes because a block is used only while it is
 * young: spare ids older than {@link RESERVED_ID_MAX_AGE_MS} are dropped (a gap, as a sequence
 * leaves after any rollback) instead of being handed to a job submitted minutes later, which would
 * then sort before jobs other processes submitted meanwhile (list pages are keyed by id).
 */
import type { Clock } from '../clock/clock.js';
import type { Store } from '../store/store.js';
import { MAX_RESERVED_IDS } from '../store/store-params.js';

/** The most ids reserved per round trip when a flush needs fewer: a busy process's block. */
export const RESERVED_ID_BLOCK = 1000;

/**
 * The fewest: a process that submits now and then. Each id is a `nextval` on the server, so a
 * block of 1,000 cost a submit after a quiet spell a few ms of its round trip (bench/quiet-submits.ts),
 * and the block aged out with one id used.
 */
export const MIN_RESERVED_ID_BLOCK = 16;

/**
 * A flush of `n` ≥ {@link RESERVED_ID_BLOCK} jobs (submitMany) reserves this many times `n`, so a
 * stream of big batches pays one reservation per few batches instead of one each.
 */
export const RESERVED_ID_BIG_BATCH_FACTOR = 4;

/** Spare reserved ids older than this are discarded rather than used, ms. */
export const RESERVED_ID_MAX_AGE_MS = 1000;

/**
 * The size of the next block for a flush of `count` < {@link RESERVED_ID_BLOCK} ids: twice what
 * was taken from the last block in its life (at most {@link RESERVED_ID_MAX_AGE_MS}), within
 * [{@link MIN_RESERVED_ID_BLOCK}, {@link RESERVED_ID_BLOCK}] and at least `count`. A steady stream
 * of r submits a second gets blocks of about 2r; a burst doubles the block at each reservation,
 * reaching the largest at the seventh; after a lull the next submit reserves the smallest.
 */
export function nextReservedBlockSize(takenFromLastBlock: number, count: number): number {
  return Math.max(count, Math.min(RESERVED_ID_BLOCK, Math.max(MIN_RESERVED_ID_BLOCK, 2 * takenFromLastBlock)));
}

/** Hands out reserved job ids, reserving a new block from the store when the spare ones run out or age. */
export class JobIdReservoir {
  private spare: string[] = [];
  private reservedAt = 0;
  /** Ids handed out from the current block so far. */
  private takenFromBlock = 0;
  private reserving: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly store: Pick<Store, 'jobReserveIds'>,
    private readonly clock: Clock,
  ) {}

  /** `count` ids no other submit will use, in ascending order. */
  take(count: number): Promise<string[]> {
    // One reservation at a time: two flushes that both found the block short would reserve twice.
    const taken = this.reserving.then(() => this.takeNow(count));
    this.reserving = taken.catch(() => undefined);
    return taken;
  }

  private async takeNow(count: number): Promise<string[]> {
    if (this.clock.monotonic() - this.reservedAt > RESERVED_ID_MAX_AGE_MS) this.spare = [];
    if (this.spare.length >= count) {
      this.takenFromBlock += count;
      return this.spare.splice(0, count);
    }
    // A short block is dropped, not topped up, so one flush's ids come from one reservation.
    const size =
      count < RESERVED_ID_BLOCK
        ? nextReservedBlockSize(this.takenFromBlock, count)
        : Math.max(count, Math.min(MAX_RESERVED_IDS, count * RESERVED_ID_BIG_BATCH_FACTOR));
    const block = await this.reserve(size);
    this.reservedAt = this.clock.monotonic();
    this.takenFromBlock = count;
    this.spare = block.slice(count);
    return block.slice(0, count);
  }

  /** Exactly `count` fresh ids, in reservations of at most MAX_RESERVED_IDS. */
  private async reserve(count: number): Promise<string[]> {
    const ids: string[] = [];
    while (ids.length < count) {
      const block = await this.store.jobReserveIds({ count: Math.min(MAX_RESERVED_IDS, count - ids.length) });
      for (const id of block) ids.push(id);
    }
    return ids;
  }
}
