/**
 * Job ids of a sharded store (pure). An id stays what it is everywhere else in Docket: a decimal
 * integer of at most {@link MAX_JOB_ID}; the shard is the id's leading digits. Shard number `n`
 * draws ids from its own sequence in [n·SPAN + 1, (n+1)·SPAN − 1], so
 *
 *   shard(id) = floor(id / SPAN),  SPAN = 10^14
 *
 * names the shard of any id with no lookup, ids stay ascending within a shard (its sequence
 * counts up) and an id is unique across shards (the ranges are disjoint). Across shards ids order
 * shard-major: every id of shard 0 sorts before every id of shard 1, which is what makes keyset
 * paging over merged shards exact. Shard 0's range starts at 1, so an existing single store can
 * become shard 0 without renumbering anything. docs/sharding.md describes the format.
 */
import { MAX_JOB_ID, parseJobId } from '../../job/list-params.js';

/** Ids per shard: shard n owns [n·SPAN + 1, (n+1)·SPAN − 1]. A hundred million million ids each. */
export const SHARD_ID_SPAN = 100_000_000_000_000;

/** Shard numbers run from 0 to this (the last whose whole range is a safe integer): 90 shards. */
export const MAX_SHARD_NUMBER = Math.floor((MAX_JOB_ID + 1) / SHARD_ID_SPAN) - 1;

/** The shard number a job id names, or null when the text is not a job id. */
export function shardNumberOfId(id: unknown): number | null {
  const value = parseJobId(id);
  return value === null ? null : Math.floor(value / SHARD_ID_SPAN);
}

/** The ids shard `n`'s sequence may hand out, inclusive. */
export function shardIdRange(shardNumber: number): { first: number; last: number } {
  if (!Number.isInteger(shardNumber) || shardNumber < 0 || shardNumber > MAX_SHARD_NUMBER) {
    throw new RangeError(`shard number must be an integer from 0 to ${MAX_SHARD_NUMBER}, got ${shardNumber}`);
  }
  const base = shardNumber * SHARD_ID_SPAN;
  return { first: Math.max(1, base), last: base + SHARD_ID_SPAN - 1 };
}
