/**
 * Claims across shards on real clusters: a slow shard (its jobs table locked by another session,
 * so its claim statement waits) does not delay what the other shards answer beyond the straggler
 * bound; its late answer is neither lost nor leaked (handed to the next claim with a wake-up, or
 * released on close); and a shard with a single due job is claimed in the same claim as a busy
 * shard's backlog (no starvation).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobSpec } from '../../src/job/job-spec.js';
import { normalizeSubmit } from '../../src/job/job-spec.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { shardNumberOfId } from '../../src/store/sharded/shard-ids.js';
import { CLAIM_STRAGGLER_MS, ShardedStore } from '../../src/store/sharded/sharded-store.js';
import {
  acquireShardClusters,
  dropShardSchema,
  SHARD_CLUSTER_PORTS,
  shardClusterUrl,
  shardSchemaUrl,
} from '../support/shard-clusters.js';
import { assertPostgresReachable } from '../support/stores.js';

const LEASE_MS = 30_000;

function spec(kind: string, queue: string): JobSpec {
  return normalizeSubmit({ kind, queue }, () => 0);
}

describe('sharded claims', () => {
  const schema = `sc_${randomBytes(5).toString('hex')}`;
  let store: ShardedStore;
  let direct: PostgresStore[];

  beforeAll(async () => {
    await assertPostgresReachable();
    await acquireShardClusters();
    store = await ShardedStore.open(SHARD_CLUSTER_PORTS.map((port) => shardSchemaUrl(port, schema)));
    direct = await Promise.all(
      SHARD_CLUSTER_PORTS.map((port) => PostgresStore.open(shardClusterUrl(port), { schema })),
    );
  }, 120_000);

  afterAll(async () => {
    await store?.close();
    await Promise.all((direct ?? []).map((each) => each.close()));
    await Promise.all(SHARD_CLUSTER_PORTS.map((port) => dropShardSchema(port, schema)));
  });

  /** Holds an ACCESS EXCLUSIVE lock on one shard's jobs table until the returned function runs. */
  async function lockShard(index: number): Promise<() => Promise<void>> {
    const client = new pg.Client({ connectionString: shardClusterUrl(SHARD_CLUSTER_PORTS[index]!) });
    await client.connect();
    await client.query('BEGIN');
    await client.query(`LOCK TABLE ${schema}.jobs IN ACCESS EXCLUSIVE MODE`);
    return async () => {
      await client.query('ROLLBACK');
      await client.end();
    };
  }

  it('answers with the healthy shards within the straggler bound, and hands the slow shard its jobs next', async () => {
    const queue = 'slow';
    for (const shard of direct) await shard.jobSubmit({ jobs: [1, 2, 3].map(() => spec('k', queue)) });
    const wakeUps: number[] = [];
    const unsubscribe = await store.subscribe(() => wakeUps.push(Date.now()));
    const unlock = await lockShard(2);
    let unlocked = false;
    try {
      const startedAt = Date.now();
      const first = await store.jobClaim({ owner: 'w/1', limit: 9, leaseMs: LEASE_MS, queues: [queue] });
      const tookMs = Date.now() - startedAt;
      // Shards 0 and 1 answered; shard 2 was waited for only CLAIM_STRAGGLER_MS after them.
      expect(first.map((job) => shardNumberOfId(job.id)).sort()).toEqual([0, 0, 0, 1, 1, 1]);
      expect(tookMs).toBeLessThan(CLAIM_STRAGGLER_MS + 1500);
      const wakeUpsBefore = wakeUps.length;
      await unlock();
      unlocked = true;
      // Its late answer arrives: the jobs are kept leased and the listeners are woken.
      await expect.poll(() => wakeUps.length, { timeout: 5000 }).toBeGreaterThan(wakeUpsBefore);
      const second = await store.jobClaim({ owner: 'w/2', limit: 9, leaseMs: LEASE_MS, queues: [queue] });
      expect(second.map((job) => shardNumberOfId(job.id))).toEqual([2, 2, 2]);
      // Each job was claimed exactly once (one token), and every claimed job can be completed.
      const all = [...first, ...second];
      expect(new Set(all.map((job) => job.id)).size).toBe(9);
      expect(all.every((job) => job.token === 1)).toBe(true);
      const outcomes = await store.jobCompleteMany({
        leases: all.map((job) => ({ id: job.id, token: job.token, leaseOwner: job.leaseOwner })),
      });
      expect(outcomes).toEqual(all.map(() => 'done'));
    } finally {
      if (!unlocked) await unlock();
      await unsubscribe();
    }
  }, 30_000);

  it('releases a late answer nobody claims when the store closes: no lease leaks', async () => {
    const queue = 'leak';
    const [late] = await direct[1]!.jobSubmit({ jobs: [spec('k', queue)] });
    const other = await ShardedStore.open(SHARD_CLUSTER_PORTS.map((port) => shardSchemaUrl(port, schema)));
    const unlock = await lockShard(1);
    try {
      expect(await other.jobClaim({ owner: 'w/3', limit: 1, leaseMs: LEASE_MS, queues: [queue] })).toEqual([]);
    } finally {
      await unlock();
    }
    // The late claim commits on shard 1 and its job waits, leased, in the surplus.
    await expect
      .poll(async () => (await direct[1]!.jobGet({ id: late!.id }))?.state, { timeout: 5000 })
      .toBe('running');
    await other.close();
    expect(await direct[1]!.jobGet({ id: late!.id })).toMatchObject({
      state: 'pending',
      attempts: 0,
      leaseUntil: null,
    });
  }, 30_000);

  it('claims a shard holding one due job in the same claim as a busy shard', async () => {
    const queue = 'fair';
    await direct[0]!.jobSubmit({ jobs: Array.from({ length: 200 }, () => spec('k', queue)) });
    const [lonely] = await direct[2]!.jobSubmit({ jobs: [spec('k', queue)] });
    const claimed = await store.jobClaim({ owner: 'w/4', limit: 10, leaseMs: LEASE_MS, queues: [queue] });
    expect(claimed).toHaveLength(10);
    expect(claimed.map((job) => job.id)).toContain(lonely!.id);
    // The busy shard filled the rest in the same claim.
    expect(claimed.filter((job) => shardNumberOfId(job.id) === 0)).toHaveLength(9);
  }, 30_000);
});
