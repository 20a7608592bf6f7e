/**
 * Where a sharded store sends what (pure; docs/sharding.md, "Routing").
 *
 * - A job id names its shard (shard-ids.ts).
 * - A key (an idempotency key's scope, a schedule id) goes to the shard its rendezvous hash
 *   selects: for each shard accepting new work, score = FNV-1a-32 of `<shard number>:<key>`
 *   (UTF-8), mixed by a 32-bit finaliser; the highest score wins (ties: lower shard number).
 *   Stable: the answer depends only on the key and the set of shard numbers, never on list order
 *   or process; adding a shard moves only the keys the new shard now wins (about 1/(N+1)).
 * - A job with neither goes to the next healthy shard in round-robin order ({@link RoundRobin}).
 */

/** FNV-1a over the UTF-8 bytes of `text`, 32-bit, then the murmur3 finaliser so nearby keys spread. */
export function stableHash32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b) >>> 0;
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35) >>> 0;
  hash ^= hash >>> 16;
  return hash >>> 0;
}

/** The shard number (of `shardNumbers`, non-empty) that rendezvous hashing gives `key`. */
export function shardForKey(key: string, shardNumbers: readonly number[]): number {
  let best: number | undefined;
  let bestScore = -1;
  for (const shard of shardNumbers) {
    const score = stableHash32(`${shard}:${key}`);
    if (score > bestScore || (score === bestScore && best !== undefined && shard < best)) {
      best = shard;
      bestScore = score;
    }
  }
  if (best === undefined) throw new Error('docket: no shard accepts new work');
  return best;
}

/** Round-robin over the shards a keyless submit may use: each call starts one shard further on. */
export class RoundRobin {
  private next = 0;

  /** `candidates` in the order to try them: the next one first, the rest after it in turn. */
  order<T>(candidates: readonly T[]): T[] {
    if (candidates.length === 0) return [];
    const start = this.next % candidates.length;
    this.next = (this.next + 1) % 1_000_000_007;
    return [...candidates.slice(start), ...candidates.slice(0, start)];
  }
}

/**
 * How a claim's `limit` is split over the shards asked: evenly, the remainder to the first ones
 * in the rotating order, and at least one each, so a shard holding a single due job is asked on
 * every claim (no starvation behind a busy shard). The sum can exceed `limit` by up to the shard
 * count; the sharded store keeps the extra jobs leased for the next claim (or releases them).
 */
export function splitClaimLimit(limit: number, shards: number): number[] {
  if (shards === 0) return [];
  const base = Math.floor(limit / shards);
  const extra = limit % shards;
  return Array.from({ length: shards }, (_, index) => Math.max(1, base + (index < extra ? 1 : 0)));
}
