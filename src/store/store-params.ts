/**
 * The store parameter rules, once for both stores: page sizes, job ids, list states (defined in
 * ../job/list-params.ts, which every face calls too), lease and claim limits, and the messages a
 * store records. Pure: the PostgreSQL and SQLite stores call these before any SQL, so the same
 * bad input gets the same ValidationError (naming the field) from either store, and nothing is
 * written.
 */
import { ValidationError } from '../job/errors.js';
import type { FailOutcome, JobLease, QueueStats } from './store.js';

// The page, id, cursor and state rules live in the job layer, where the library, the HTTP API
// and the CLI call the very same functions before a store is reached.
export {
  afterJobId,
  DEFAULT_PAGE_SIZE,
  listStates,
  MAX_PAGE_SIZE,
  pageSize,
  parseJobId,
} from '../job/list-params.js';

/** The message recorded when a claim finds a lapsed lease (the conformance suite reads it). */
export const LEASE_EXPIRED_MESSAGE = 'lease expired: the worker stopped heartbeating (crashed or stalled)';

/** A duration in whole milliseconds, at least 1 (lease lengths). */
export function positiveMs(field: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new ValidationError(field, `must be a positive integer of milliseconds, got ${String(value)}`);
  }
  return value;
}

/** A claim's `limit`: a non-negative integer (0 claims nothing and writes nothing). */
export function claimLimit(limit: number): number {
  if (!Number.isInteger(limit) || limit < 0) {
    throw new ValidationError('limit', `must be a non-negative integer, got ${String(limit)}`);
  }
  return limit;
}

/** Most job ids one {@link Store.jobReserveIds} call hands out (as many as the largest batch submit). */
export const MAX_RESERVED_IDS = 100_000;

/** A reservation's `count`: an integer from 1 to {@link MAX_RESERVED_IDS}. */
export function reserveIdCount(count: number): number {
  if (!Number.isInteger(count) || count < 1 || count > MAX_RESERVED_IDS) {
    throw new ValidationError('count', `must be an integer from 1 to ${MAX_RESERVED_IDS}, got ${String(count)}`);
  }
  return count;
}

/** A queue's counts as either store's QUEUE_STATS row carries them (bigint counts arrive as text). */
export interface QueueCountsRow {
  queue: string;
  scheduled: number | string;
  available: number | string;
  running: number | string;
  done: number | string;
  cancelled: number | string;
  dead: number | string;
}

/**
 * The {@link QueueStats} record of one queue's count row, `paused` set only when true.
 * `unhandled` is 0: Docket fills it in from the worker registry (the store cannot know who is alive).
 */
export function queueStatsOf(row: QueueCountsRow, paused: boolean): QueueStats {
  const stats: QueueStats = {
    queue: row.queue,
    scheduled: Number(row.scheduled),
    available: Number(row.available),
    running: Number(row.running),
    done: Number(row.done),
    cancelled: Number(row.cancelled),
    dead: Number(row.dead),
    unhandled: 0,
  };
  if (paused) stats.paused = true;
  return stats;
}

/**
 * A lease's fencing triple (id, token, owner) and nothing else, from a lease, a claimed job or
 * a call's parameters: for a write's parameters and for batches, which must not carry along what
 * the object also holds (a worker's held lease links to other leases; a job, its payload).
 */
export function leaseOf(lease: JobLease): JobLease {
  return { id: lease.id, token: lease.token, leaseOwner: lease.leaseOwner };
}

/** A failure that was not written (its lease is not current): one shared, frozen answer. */
export const STALE_FAILURE: FailOutcome = Object.freeze({ outcome: 'stale' });

/** The earliest run_at among a failure batch's retries (what a local wake-up names), or null when none was retried. */
export function earliestRetry(outcomes: readonly FailOutcome[]): Date | null {
  let earliest: Date | null = null;
  for (const outcome of outcomes) {
    if (outcome.outcome === 'retry' && (earliest === null || outcome.runAt < earliest)) earliest = outcome.runAt;
  }
  return earliest;
}
