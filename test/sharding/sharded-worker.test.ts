/**
 * A worker on a sharded store drives each shard on its own (src/worker/: one claim loop,
 * prefetch buffer, heartbeat and completion batcher per shard), on real clusters. A shard made
 * to hang (another session holds an ACCESS EXCLUSIVE lock on its jobs table, so every statement
 * on it waits) must not hold up the other shards' claims, heartbeats or completions; a shard with
 * one due job is started while another shard's backlog is still being worked off; and claims are
 * full-size per shard, not a worker's room split over the shards.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import type { JobSpec } from '../../src/job/job-spec.js';
import { normalizeSubmit } from '../../src/job/job-spec.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { ShardedStore } from '../../src/store/sharded/sharded-store.js';
import type { JobClaimParams } from '../../src/store/store.js';
import {
  acquireShardClusters,
  dropShardSchema,
  SHARD_CLUSTER_PORTS,
  shardClusterUrl,
  shardSchemaUrl,
} from '../support/shard-clusters.js';
import { assertPostgresReachable } from '../support/stores.js';

function spec(kind: string, queue: string): JobSpec {
  return normalizeSubmit({ kind, queue }, () => 0);
}

describe('a worker on a sharded store', () => {
  const schema = `sw_${randomBytes(5).toString('hex')}`;
  let direct: PostgresStore[];
  const open: { close(): Promise<void> }[] = [];

  beforeAll(async () => {
    await assertPostgresReachable();
    await acquireShardClusters();
    // Opening the sharded store once numbers the shards (0, 1, 2 in list order).
    const first = await ShardedStore.open(SHARD_CLUSTER_PORTS.map((port) => shardSchemaUrl(port, schema)));
    await first.close();
    direct = await Promise.all(
      SHARD_CLUSTER_PORTS.map((port) => PostgresStore.open(shardClusterUrl(port), { schema })),
    );
  }, 120_000);

  afterAll(async () => {
    for (const each of open.splice(0).reverse()) await each.close().catch(() => {});
    await Promise.all((direct ?? []).map((each) => each.close()));
    await Promise.all(SHARD_CLUSTER_PORTS.map((port) => dropShardSchema(port, schema)));
  });

  async function openDocket(): Promise<{ docket: Docket; store: ShardedStore }> {
    const store = await ShardedStore.open(SHARD_CLUSTER_PORTS.map((port) => shardSchemaUrl(port, schema)));
    const docket = await Docket.open({ store });
    open.push(docket);
    return { docket, store };
  }

  /** Holds an ACCESS EXCLUSIVE lock on one shard's jobs table (every statement on it waits) until the returned function runs. */
  async function lockShard(index: number): Promise<() => Promise<void>> {
    const client = new pg.Client({ connectionString: shardClusterUrl(SHARD_CLUSTER_PORTS[index]!) });
    await client.connect();
    await client.query('BEGIN');
    await client.query(`LOCK TABLE ${schema}.jobs IN ACCESS EXCLUSIVE MODE`);
    let unlocked = false;
    return async () => {
      if (unlocked) return;
      unlocked = true;
      await client.query('ROLLBACK');
      await client.end();
    };
  }

  async function stateOf(index: number, id: string): Promise<string | undefined> {
    return (await direct[index]!.jobGet({ id }))?.state;
  }

  it('claims and completes a healthy shard while another shard hangs', async () => {
    const queue = 'hang-claims';
    const { docket } = await openDocket();
    docket.handle('k', async () => {});
    const [hung] = await direct[2]!.jobSubmit({ jobs: [spec('k', queue)] });
    const unlock = await lockShard(2);
    try {
      const worker = docket.worker({ concurrency: 4, queues: [queue], pollIntervalMs: 200 });
      await worker.start();
      const healthy = [
        ...(await direct[0]!.jobSubmit({ jobs: Array.from({ length: 20 }, () => spec('k', queue)) })),
        ...(await direct[1]!.jobSubmit({ jobs: Array.from({ length: 20 }, () => spec('k', queue)) })),
      ];
      await expect
        .poll(
          async () => {
            const states = await Promise.all(healthy.map((job) => stateOf(Number(job.id) >= 1e14 ? 1 : 0, job.id)));
            return states.filter((state) => state === 'done').length;
          },
          { timeout: 10_000 },
        )
        .toBe(40);
      await unlock();
      // The hung shard's job runs once its shard answers again.
      await expect.poll(() => stateOf(2, hung!.id), { timeout: 10_000 }).toBe('done');
      await worker.stop();
    } finally {
      await unlock();
    }
  }, 60_000);

  it("keeps confirming a healthy shard's leases while another shard's heartbeats hang", async () => {
    const queue = 'hang-heartbeats';
    const { docket } = await openDocket();
    // Heartbeats at a sixth of the lease: the healthy shard's lease survives a loaded machine's
    // 1-2 s stall (with 1.5 s and 300 ms, a 1.2 s stall aborted the healthy job too).
    const leaseMs = 3_000;
    const started = new Set<string>();
    /** Jobs whose handler was aborted at least once (a re-run after a lost lease starts the handler anew). */
    const aborted = new Set<string>();
    let finish: () => void = () => {};
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    docket.handle('slow', async (_payload, ctx) => {
      started.add(ctx.jobId);
      ctx.signal.addEventListener('abort', () => aborted.add(ctx.jobId));
      await Promise.race([finished, new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))]);
    });
    const [onHealthy] = await direct[0]!.jobSubmit({ jobs: [spec('slow', queue)] });
    const [onHung] = await direct[2]!.jobSubmit({ jobs: [spec('slow', queue)] });
    const worker = docket.worker({ concurrency: 4, queues: [queue], leaseMs, heartbeatIntervalMs: 500 });
    await worker.start();
    await expect.poll(() => started.size, { timeout: 10_000 }).toBe(2);
    const unlock = await lockShard(2);
    try {
      // Past two whole leases: the hung shard's lease cannot be confirmed and is given up; the
      // healthy shard's is renewed all along (one heartbeat batch over both would confirm neither).
      await expect.poll(() => aborted.has(onHung!.id), { timeout: 10_000 }).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 2 * leaseMs));
      expect(aborted.has(onHealthy!.id)).toBe(false);
      finish();
      await expect.poll(() => stateOf(0, onHealthy!.id), { timeout: 10_000 }).toBe('done');
    } finally {
      finish();
      await unlock();
    }
    // The hung shard's job was not lost: its lease lapses and it runs again.
    await expect.poll(() => stateOf(2, onHung!.id), { timeout: 15_000 }).toBe('done');
    await worker.stop();
  }, 60_000);

  it("flushes a healthy shard's completions while another shard's completions hang", async () => {
    const queue = 'hang-completions';
    const { docket } = await openDocket();
    let unlock: (() => Promise<void>) | undefined;
    let gateOpen: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      gateOpen = resolve;
    });
    docket.handle('k', async (_payload, ctx) => {
      // Shard 2's jobs return only once their table is locked: their completions then hang.
      if (Number(ctx.jobId) >= 2e14) await gate;
    });
    const hung = await direct[2]!.jobSubmit({ jobs: [spec('k', queue), spec('k', queue)] });
    // One completion per batch: two hung batches would fill a shared completer's two round trips in flight.
    const worker = docket.worker({ concurrency: 4, queues: [queue], completionBatchSize: 1, completionFlushMs: 0 });
    await worker.start();
    await expect.poll(() => worker.runningCount, { timeout: 10_000 }).toBe(2);
    try {
      unlock = await lockShard(2);
      gateOpen();
      await new Promise((resolve) => setTimeout(resolve, 200));
      const healthy = await direct[0]!.jobSubmit({ jobs: Array.from({ length: 10 }, () => spec('k', queue)) });
      await expect
        .poll(
          async () => (await Promise.all(healthy.map((job) => stateOf(0, job.id)))).filter((s) => s === 'done').length,
          { timeout: 10_000 },
        )
        .toBe(10);
    } finally {
      gateOpen();
      await unlock?.();
    }
    await expect
      .poll(async () => Promise.all(hung.map((job) => stateOf(2, job.id))), { timeout: 15_000 })
      .toEqual(['done', 'done']);
    await worker.stop();
  }, 60_000);

  it('starts a shard with one due job while another shard works off a backlog', async () => {
    const queue = 'fair-worker';
    const { docket } = await openDocket();
    const startedAt = new Map<string, number>();
    docket.handle('k', async (_payload, ctx) => {
      startedAt.set(ctx.jobId, Date.now());
      await new Promise((resolve) => setTimeout(resolve, 5));
    });
    const backlog = await direct[0]!.jobSubmit({ jobs: Array.from({ length: 2_000 }, () => spec('k', queue)) });
    const worker = docket.worker({ concurrency: 4, queues: [queue], prefetch: 50 });
    await worker.start();
    await expect.poll(() => startedAt.size, { timeout: 10_000 }).toBeGreaterThan(50);
    const submittedAt = Date.now();
    const [lonely] = await direct[1]!.jobSubmit({ jobs: [spec('k', queue)] });
    await expect.poll(() => startedAt.has(lonely!.id), { timeout: 10_000 }).toBe(true);
    // Started within a claim round trip or two and a handler slot, long before the backlog ends.
    expect(startedAt.get(lonely!.id)! - submittedAt).toBeLessThan(1_000);
    expect(backlog.filter((job) => startedAt.has(job.id)).length).toBeLessThan(backlog.length);
    await worker.stop();
  }, 60_000);

  it("claims a due job of a shard within its share of the slots while another shard's jobs fill them all", async () => {
    const queue = 'fair-share';
    const { docket } = await openDocket();
    const started = new Set<string>();
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    docket.handle('block', async (_payload, ctx) => {
      started.add(ctx.jobId);
      await released;
    });
    await direct[0]!.jobSubmit({ jobs: Array.from({ length: 20 }, () => spec('block', queue)) });
    await direct[1]!.jobSubmit({ jobs: [spec('block', queue)] });
    // Concurrency 6 over 3 shards: each shard may always hold 2, whatever the others hold.
    const worker = docket.worker({ concurrency: 6, prefetch: 0, queues: [queue] });
    try {
      await worker.start();
      await expect.poll(() => worker.runningCount, { timeout: 10_000 }).toBe(6);
      // Every slot is taken, shard 1 holds one job; a new one there (or a lapsed lease) is still claimed at once.
      const [late] = await direct[1]!.jobSubmit({ jobs: [spec('block', queue)] });
      await expect.poll(() => stateOf(1, late!.id), { timeout: 3_000 }).toBe('running');
      expect(started.has(late!.id)).toBe(false);
      release();
      await expect.poll(() => stateOf(1, late!.id), { timeout: 10_000 }).toBe('done');
    } finally {
      release();
      await worker.stop();
    }
  }, 60_000);

  it('claims each shard in batches of the full room, not the room split over the shards', async () => {
    const queue = 'full-batches';
    const { docket, store } = await openDocket();
    const limits: number[] = [];
    for (const part of store.partitions().parts) {
      const claim = part.jobClaim;
      part.jobClaim = (params: JobClaimParams) => {
        if (params.queues?.includes(queue)) limits.push(params.limit);
        return claim(params);
      };
    }
    docket.handle('k', async () => {});
    await Promise.all(
      direct.map((shard) => shard.jobSubmit({ jobs: Array.from({ length: 300 }, () => spec('k', queue)) })),
    );
    const worker = docket.worker({ concurrency: 10, prefetch: 90, queues: [queue] });
    await worker.start();
    await expect
      .poll(async () => (await docket.queueStats()).find((stats) => stats.queue === queue)?.done, { timeout: 20_000 })
      .toBe(900);
    await worker.stop();
    // Room for 100 (concurrency 10 + prefetch 90) on each shard: its first claim asks for half of
    // it (a claim answering a wake-up leaves half for the next one), never a third of it.
    expect(Math.max(...limits)).toBeGreaterThanOrEqual(50);
  }, 60_000);
});
