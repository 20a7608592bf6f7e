/**
 * The sharded store against real PostgreSQL clusters (test/support/shard-clusters.ts): routing
 * by id and by key, idempotency across shards and across processes, cross-shard paging, a shard
 * stopped mid-run (the others keep claiming and completing, keyless submits still succeed, its
 * own jobs run once it is back, nothing is lost), and a fourth shard added under load.
 *
 * The shard that is stopped and the one that is added are the spare cluster on 5474, which only
 * this file uses; the three shared clusters (5471-5473) are never stopped here, so the sharded
 * conformance suite can run beside this file.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import { normalizeSubmit } from '../../src/job/job-spec.js';
import { openStore } from '../../src/store/open-store.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SHARD_ID_SPAN, shardNumberOfId } from '../../src/store/sharded/shard-ids.js';
import { shardForKey } from '../../src/store/sharded/shard-routing.js';
import {
  CROSS_SHARD_BATCH_APPLICATION,
  IDENTITY_REFRESH_MS,
  type ShardedStore,
} from '../../src/store/sharded/sharded-store.js';
import { describeRun, runDocketInProcess } from '../cli/run-docket.js';
import {
  acquireShardClusters,
  dropShardSchema,
  SHARD_CLUSTER_PORTS,
  SPARE_SHARD_PORT,
  shardClusterUrl,
  shardSchemaUrl,
  startCluster,
  stopCluster,
} from '../support/shard-clusters.js';
import { assertPostgresReachable } from '../support/stores.js';

const QUICK = { pollIntervalMs: 200, leaseMs: 10_000 } as const;

function freshSchema(): string {
  return `sh_${randomBytes(5).toString('hex')}`;
}

/**
 * Picks idempotency keys (`prefix0`, `prefix1`, …) whose scope (queue `default`, `kind`) hashes to
 * a given shard among `numbers`, a fresh key at every call.
 */
function keysOnShards(kind: string, prefix: string, numbers: readonly number[]): (shard: number) => string {
  const used = new Set<string>();
  return (shard) => {
    for (let i = 0; ; i += 1) {
      const key = `${prefix}${i}`;
      if (used.has(key) || shardForKey(JSON.stringify(['default', kind, key]), numbers) !== shard) continue;
      used.add(key);
      return key;
    }
  };
}

/** Opens one shard's own schema directly, as an operator's psql would see it. */
function openShard(port: number, schema: string): Promise<PostgresStore> {
  return PostgresStore.open(shardClusterUrl(port), { schema });
}

describe('sharded store', () => {
  const schemas: { port: number; schema: string }[] = [];
  const sharedShards = (schema: string) => {
    for (const port of SHARD_CLUSTER_PORTS) schemas.push({ port, schema });
    return SHARD_CLUSTER_PORTS.map((port) => shardSchemaUrl(port, schema));
  };

  beforeAll(async () => {
    await assertPostgresReachable();
    await acquireShardClusters();
    await startCluster(SPARE_SHARD_PORT);
  }, 120_000);

  afterAll(async () => {
    await Promise.all(schemas.map(({ port, schema }) => dropShardSchema(port, schema)));
    stopCluster(SPARE_SHARD_PORT, 'immediate');
  });

  it('refuses bad shard lists before connecting, with the reason', async () => {
    const url = shardSchemaUrl(5471, 'x');
    await expect(Docket.open({ url, shards: [url] })).rejects.toThrow(/either a store url or shards, not both/);
    await expect(Docket.open({ shards: [] })).rejects.toThrow(/non-empty list/);
    await expect(Docket.open({ shards: [url, 'sqlite:x.db'] })).rejects.toThrow(/shards\[1\] is a SQLite URL/);
    await expect(Docket.open({ shards: [url, url.replace('127.0.0.1', 'localhost')] })).rejects.toThrow(
      /shards\[1\] repeats shards\[0\]/,
    );
    await expect(Docket.open({ shards: ['mysql://h/db'] })).rejects.toThrow(/shards\[0\] must be a postgres:\/\/ URL/);
  });

  it('routes by id: keyless jobs spread over every shard, and each id lives on the shard it names', async () => {
    const schema = freshSchema();
    const docket = await Docket.open({ shards: sharedShards(schema) });
    const direct = await Promise.all(SHARD_CLUSTER_PORTS.map((port) => openShard(port, schema)));
    try {
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, i) => docket.submit({ kind: 'route', payload: { i } })),
      );
      const byShard = new Map<number, number>();
      for (const { id } of results) byShard.set(shardNumberOfId(id)!, (byShard.get(shardNumberOfId(id)!) ?? 0) + 1);
      // Round-robin: every shard got a third.
      expect([...byShard.entries()].sort()).toEqual([
        [0, 10],
        [1, 10],
        [2, 10],
      ]);
      for (const { id } of results) {
        const number = shardNumberOfId(id)!;
        // The shard numbered n holds exactly its ids (n·SPAN …), and no other shard has them.
        expect(Math.floor(Number(id) / SHARD_ID_SPAN)).toBe(number);
        for (const [index, store] of direct.entries()) {
          expect((await store.jobGet({ id }))?.id ?? null).toBe(index === number ? id : null);
        }
        expect(await docket.cancelJob(id)).toBe('cancelled');
      }
    } finally {
      await Promise.all(direct.map((store) => store.close()));
      await docket.close();
    }
  });

  it('keeps an idempotency key unique across shards and processes: it lives on the shard its hash selects', async () => {
    const schema = freshSchema();
    const shards = sharedShards(schema);
    // Two processes' stores: neither knows what the other submitted.
    const [one, two] = await Promise.all([openStore(undefined, { shards }), openStore(undefined, { shards })]);
    const first = await Docket.open({ store: one });
    const second = await Docket.open({ store: two });
    try {
      const keys = Array.from({ length: 12 }, (_, i) => `order-${i}`);
      const a = await Promise.all(
        keys.map((key) => first.submit({ kind: 'pay', payload: { key }, idempotencyKey: key })),
      );
      const b = await Promise.all(
        keys.map((key) => second.submit({ kind: 'pay', payload: { key }, idempotencyKey: key })),
      );
      expect(b.map((result) => result.id)).toEqual(a.map((result) => result.id));
      expect(a.every((result) => result.created)).toBe(true);
      expect(b.every((result) => !result.created)).toBe(true);
      const numbers = (one as unknown as ShardedStore).describeShards().map((shard) => shard.number);
      for (const [index, key] of keys.entries()) {
        const scope = JSON.stringify(['default', 'pay', key]);
        expect(shardNumberOfId(a[index]!.id)).toBe(shardForKey(scope, numbers));
      }
      // The keys spread: more than one shard holds some.
      expect(new Set(a.map((result) => shardNumberOfId(result.id))).size).toBeGreaterThan(1);
      // A different payload under a live key is refused, wherever the key lives.
      await expect(second.submit({ kind: 'pay', payload: { other: true }, idempotencyKey: keys[3]! })).rejects.toThrow(
        /holds key/,
      );
      expect((await first.listJobs({ limit: 1000 })).length).toBe(keys.length);
    } finally {
      await first.close();
      await second.close();
      await one.close();
      await two.close();
    }
  });

  it('writes nothing of a keyed batch over several shards when one key conflicts, however late the other parts start', async () => {
    const schema = freshSchema();
    const store = (await openStore(undefined, { shards: sharedShards(schema) })) as unknown as ShardedStore;
    try {
      const numbers = store.describeShards().map((shard) => shard.number);
      const shardOf = (key: string) => shardForKey(JSON.stringify(['default', 'k', key]), numbers);
      const taken = 'taken-0';
      const late = Array.from({ length: 50 }, (_, i) => `late-${i}`).find((key) => shardOf(key) !== shardOf(taken))!;
      const spec = (key: string, payload: string) =>
        normalizeSubmit({ kind: 'k', payload, idempotencyKey: key }, () => 0);
      await store.jobSubmit({ jobs: [spec(taken, 'old')] });
      // The late key's part sends its statement only once the conflicting part has been refused
      // and the rejection has run its course (a macrotask later).
      const takenShard = store.shards.find((shard) => shard.number === shardOf(taken))!.store;
      const lateShard = store.shards.find((shard) => shard.number === shardOf(late))!.store;
      const submitTaken = takenShard.jobSubmit.bind(takenShard);
      const submitLate = lateShard.jobSubmit.bind(lateShard);
      let refused!: () => void;
      const conflictRefused = new Promise<void>((resolve) => {
        refused = resolve;
      });
      takenShard.jobSubmit = async (params) => {
        try {
          return await submitTaken(params);
        } catch (error) {
          refused();
          throw error;
        }
      };
      lateShard.jobSubmit = async (params) => {
        await conflictRefused;
        await new Promise((resolve) => setImmediate(resolve));
        return submitLate(params);
      };
      await expect(store.jobSubmit({ jobs: [spec(late, 'fresh'), spec(taken, 'new')] })).rejects.toMatchObject({
        name: 'IdempotencyConflictError',
        field: 'jobs[1].idempotencyKey',
      });
      takenShard.jobSubmit = submitTaken;
      lateShard.jobSubmit = submitLate;
      // Nothing of the refused batch was written: the late key is free for another payload.
      const [again] = await store.jobSubmit({ jobs: [spec(late, 'other')] });
      expect(again).toMatchObject({ created: true });
    } finally {
      await store.close();
    }
  });

  it('pages across shards by id with no duplicates or gaps', async () => {
    const schema = freshSchema();
    const docket = await Docket.open({ shards: sharedShards(schema) });
    try {
      const submitted = await docket.submitMany(
        Array.from({ length: 25 }, (_, i) => ({ kind: 'page', queue: 'paging', payload: { i } })),
      );
      expect(new Set(submitted.map((result) => shardNumberOfId(result.id))).size).toBe(3);
      const seen: string[] = [];
      let afterId: string | undefined;
      for (;;) {
        const page = await docket.listJobs({ queue: 'paging', limit: 7, ...(afterId ? { afterId } : {}) });
        if (page.length === 0) break;
        seen.push(...page.map((job) => job.id));
        afterId = page.at(-1)!.id;
      }
      const expected = submitted.map((result) => result.id).sort((x, y) => Number(x) - Number(y));
      expect(seen).toEqual(expected);
      const stats = await docket.queueStats();
      expect(stats.find((queue) => queue.queue === 'paging')).toMatchObject({ available: 25 });
    } finally {
      await docket.close();
    }
  });

  it('keeps claiming, completing and taking keyless submits while a shard is down; runs its jobs once it is back; loses none', async () => {
    const schema = freshSchema();
    const ports = [SHARD_CLUSTER_PORTS[0]!, SHARD_CLUSTER_PORTS[1]!, SPARE_SHARD_PORT];
    for (const port of ports) schemas.push({ port, schema });
    const docket = await Docket.open({
      shards: ports.map((port) => shardSchemaUrl(port, schema)),
      connectTimeoutMs: 1000,
      statementTimeoutMs: 2000,
    });
    const done = new Map<string, number>();
    docket.handle('work', async (_payload, ctx) => {
      done.set(ctx.jobId, (done.get(ctx.jobId) ?? 0) + 1);
    });
    const worker = docket.worker({ ...QUICK, concurrency: 8 });
    try {
      // Due in 1.5 s, so part of the down shard's jobs are still waiting when it stops.
      const before = await docket.submitMany(
        Array.from({ length: 30 }, (_, i) => ({ kind: 'work', payload: { i }, delayMs: i < 15 ? 0 : 1500 })),
      );
      const onSpare = before.filter((result) => shardNumberOfId(result.id) === 2).map((result) => result.id);
      expect(onSpare.length).toBe(10);
      stopCluster(SPARE_SHARD_PORT, 'fast');
      await worker.start();
      // Keyless submits while the shard is down: every one succeeds, on the shards that are up.
      const during: string[] = [];
      for (let i = 0; i < 20; i += 1) during.push((await docket.submit({ kind: 'work', payload: { during: i } })).id);
      expect(during.every((id) => shardNumberOfId(id) !== 2)).toBe(true);
      // The other shards' jobs all complete while it is still down.
      const upIds = [...before.map((result) => result.id).filter((id) => !onSpare.includes(id)), ...during];
      await expect.poll(() => upIds.filter((id) => done.has(id)).length, { timeout: 20_000 }).toBe(upIds.length);
      expect(onSpare.filter((id) => done.has(id))).toEqual([]);
      await startCluster(SPARE_SHARD_PORT);
      await expect.poll(() => onSpare.filter((id) => done.has(id)).length, { timeout: 30_000 }).toBe(onSpare.length);
      // None lost, none twice, and every job is done in its store.
      const all = [...before.map((result) => result.id), ...during];
      expect(all.filter((id) => done.get(id) !== 1)).toEqual([]);
      // Completions are written just after the handlers return (batched): poll for them.
      await expect
        .poll(
          async () =>
            (await Promise.all(all.map(async (id) => (await docket.getJob(id))?.state))).every(
              (state) => state === 'done',
            ),
          { timeout: 10_000 },
        )
        .toBe(true);
    } finally {
      await worker.stop();
      await docket.close();
    }
  }, 90_000);

  it("keeps the other shards' leases alive while one shard is down: their long handlers finish, none aborted", async () => {
    await startCluster(SPARE_SHARD_PORT);
    const schema = freshSchema();
    const ports = [SHARD_CLUSTER_PORTS[0]!, SHARD_CLUSTER_PORTS[1]!, SPARE_SHARD_PORT];
    for (const port of ports) schemas.push({ port, schema });
    const docket = await Docket.open({
      shards: ports.map((port) => shardSchemaUrl(port, schema)),
      connectTimeoutMs: 1000,
      connectAttemptTimeoutMs: 1000,
      statementTimeoutMs: 2000,
    });
    const started = new Set<string>();
    const finished = new Map<string, number>();
    const aborted: string[] = [];
    docket.handle('long', async (_payload, ctx) => {
      started.add(ctx.jobId);
      // Longer than the lease: only heartbeats keep it.
      await new Promise((resolve) => setTimeout(resolve, 4500));
      if (ctx.signal.aborted) aborted.push(ctx.jobId);
      else finished.set(ctx.jobId, (finished.get(ctx.jobId) ?? 0) + 1);
    });
    // One batch of heartbeats carries leases of every shard. A lease of six heartbeats, so a loaded
    // machine's 1-2 s stall does not lapse a healthy shard's lease; still shorter than the handler.
    const worker = docket.worker({ pollIntervalMs: 200, leaseMs: 3000, heartbeatIntervalMs: 500, concurrency: 6 });
    try {
      const jobs = await docket.submitMany(Array.from({ length: 6 }, (_, i) => ({ kind: 'long', payload: { i } })));
      await worker.start();
      await expect.poll(() => started.size, { timeout: 10_000 }).toBe(6);
      stopCluster(SPARE_SHARD_PORT, 'fast');
      const healthy = jobs.map((job) => job.id).filter((id) => shardNumberOfId(id) !== 2);
      await expect.poll(() => healthy.filter((id) => finished.has(id)).length, { timeout: 15_000 }).toBe(4);
      expect(aborted.filter((id) => healthy.includes(id))).toEqual([]);
      // The completions are written after the handlers return (batched), while the shard is still down.
      for (const id of healthy) {
        await expect.poll(async () => (await docket.getJob(id))?.state, { timeout: 10_000 }).toBe('done');
      }
    } finally {
      await worker.stop();
      await docket.close();
      await startCluster(SPARE_SHARD_PORT);
    }
  }, 60_000);

  it('opens while a shard is down, from the shard directory: the others work at once, keys wait for their shard, its jobs run once it is back', async () => {
    await startCluster(SPARE_SHARD_PORT);
    const schema = freshSchema();
    const ports = [SHARD_CLUSTER_PORTS[0]!, SHARD_CLUSTER_PORTS[1]!, SPARE_SHARD_PORT];
    for (const port of ports) schemas.push({ port, schema });
    const urls = ports.map((port) => shardSchemaUrl(port, schema));
    const options = { shards: urls, connectTimeoutMs: 8000, connectAttemptTimeoutMs: 1000, statementTimeoutMs: 2000 };
    // An earlier process opened the list: every shard's directory records every shard's number.
    const earlier = await Docket.open(options);
    const before = await earlier.submitMany(Array.from({ length: 30 }, (_, i) => ({ kind: 'work', payload: { i } })));
    await earlier.close();
    const onSpare = before.filter((result) => shardNumberOfId(result.id) === 2).map((result) => result.id);
    expect(onSpare.length).toBe(10);
    stopCluster(SPARE_SHARD_PORT, 'fast');
    const openedAt = Date.now();
    const docket = await Docket.open(options);
    // Within the grace, not the 8 s connect timeout: the directory told it shard 2's number.
    expect(Date.now() - openedAt).toBeLessThan(6000);
    const done = new Map<string, number>();
    docket.handle('work', async (_payload, ctx) => {
      done.set(ctx.jobId, (done.get(ctx.jobId) ?? 0) + 1);
    });
    const worker = docket.worker({ ...QUICK, concurrency: 8 });
    try {
      const store = docket.store as ShardedStore;
      expect(store.describeShards().map((shard) => [shard.number, shard.down])).toEqual([
        [0, false],
        [1, false],
        [2, true],
      ]);
      await worker.start();
      const during: string[] = [];
      for (let i = 0; i < 12; i += 1) during.push((await docket.submit({ kind: 'work', payload: { during: i } })).id);
      expect(during.every((id) => shardNumberOfId(id) !== 2)).toBe(true);
      // A key is routed over all three numbers: one of shard 2 waits for it (never lands elsewhere).
      const keyOf = keysOnShards('work', 'k', [0, 1, 2]);
      const keyed = await docket.submit({ kind: 'work', payload: {}, idempotencyKey: keyOf(0) });
      expect(shardNumberOfId(keyed.id)).toBe(0);
      // Shard 2's key: the submit keeps retrying (its retry window) until the shard is back.
      let waitingSettled = false;
      const waiting = docket.submit({ kind: 'work', payload: {}, idempotencyKey: keyOf(2) }).finally(() => {
        waitingSettled = true;
      });
      const upIds = [...before.map((result) => result.id).filter((id) => !onSpare.includes(id)), ...during, keyed.id];
      await expect.poll(() => upIds.filter((id) => done.has(id)).length, { timeout: 10_000 }).toBe(upIds.length);
      expect(onSpare.filter((id) => done.has(id))).toEqual([]);
      expect(waitingSettled).toBe(false);
      await startCluster(SPARE_SHARD_PORT);
      await expect.poll(() => onSpare.filter((id) => done.has(id)).length, { timeout: 15_000 }).toBe(onSpare.length);
      const later = await waiting;
      expect(shardNumberOfId(later.id)).toBe(2);
      await expect.poll(() => done.has(later.id), { timeout: 10_000 }).toBe(true);
      const all = [...before.map((result) => result.id), ...during, keyed.id, later.id];
      expect(all.filter((id) => done.get(id) !== 1)).toEqual([]);
    } finally {
      await worker.stop();
      await docket.close();
      await startCluster(SPARE_SHARD_PORT);
    }
  }, 90_000);

  it('closes its connections to the healthy shards when a keyed batch over several shards meets one that is down, at every attempt', async () => {
    await startCluster(SPARE_SHARD_PORT);
    const schema = freshSchema();
    const ports = [SHARD_CLUSTER_PORTS[0]!, SHARD_CLUSTER_PORTS[1]!, SPARE_SHARD_PORT];
    for (const port of ports) schemas.push({ port, schema });
    const store = (await openStore(undefined, {
      shards: ports.map((port) => shardSchemaUrl(port, schema)),
      connectAttemptTimeoutMs: 1000,
      statementTimeoutMs: 2000,
    })) as unknown as ShardedStore;
    const keyOf = keysOnShards(
      'batch',
      'b',
      store.describeShards().map((shard) => shard.number),
    );
    // A batch with one key on shard 0 and one on shard 2 (the spare): one atomic write over both.
    const batch = () =>
      [keyOf(0), keyOf(2)].map((key) => normalizeSubmit({ kind: 'batch', payload: key, idempotencyKey: key }, () => 0));
    // The batch's sessions on shard 0, found by the application_name the store gives them.
    const batchSessions = async () => {
      const admin = new pg.Client({ connectionString: shardClusterUrl(SHARD_CLUSTER_PORTS[0]!) });
      admin.on('error', () => {});
      await admin.connect();
      try {
        const { rows } = await admin.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
          [CROSS_SHARD_BATCH_APPLICATION],
        );
        return rows[0]!.n;
      } finally {
        await admin.end();
      }
    };
    try {
      const first = await store.jobSubmit({ jobs: batch() });
      expect(first.map((result) => shardNumberOfId(result.id))).toEqual([0, 2]);
      await expect.poll(batchSessions, { timeout: 15_000 }).toBe(0);
      // Shard 2 stops: each attempt fails on its connect, and its connection to shard 0 is closed
      // (a caller retrying through an outage left one open session per healthy shard per attempt).
      stopCluster(SPARE_SHARD_PORT, 'fast');
      for (let attempt = 0; attempt < 5; attempt += 1) {
        await expect(store.jobSubmit({ jobs: batch() })).rejects.toSatisfy((error) => store.isConnectionLoss(error));
      }
      await expect.poll(batchSessions, { timeout: 15_000 }).toBe(0);
      await startCluster(SPARE_SHARD_PORT);
      const later = await store.jobSubmit({ jobs: batch() });
      expect(later.map((result) => shardNumberOfId(result.id))).toEqual([0, 2]);
      const written = await Promise.all([...first, ...later].map((result) => store.jobGet({ id: result.id })));
      expect(written.map((job) => job?.state)).toEqual(['pending', 'pending', 'pending', 'pending']);
      await expect.poll(batchSessions, { timeout: 15_000 }).toBe(0);
    } finally {
      await store.close();
      await startCluster(SPARE_SHARD_PORT);
    }
  }, 60_000);

  it("keeps refreshing the other shards' draining flags while one shard's identity read hangs: the store's statement timeout ends it", async () => {
    const schema = freshSchema();
    const urls = sharedShards(schema);
    const options = { shards: urls, statementTimeoutMs: 1000 };
    const docket = await Docket.open(options);
    const other = await Docket.open(options);
    const locker = new pg.Client({ connectionString: shardClusterUrl(SHARD_CLUSTER_PORTS[0]!) });
    locker.on('error', () => {});
    await locker.connect();
    try {
      const store = docket.store as ShardedStore;
      expect(store.describeShards().map((shard) => [shard.number, shard.draining])).toEqual([
        [0, false],
        [1, false],
        [2, false],
      ]);
      // Shard 0's identity row cannot be read while this transaction holds its table: the refresh
      // reads it first, and before the store's timeouts applied to it, waited there for good.
      await locker.query('BEGIN');
      await locker.query(`LOCK TABLE ${schema}.shard_identity IN ACCESS EXCLUSIVE MODE`);
      // Another process drains shard 1.
      await (other.store as ShardedStore).setDraining(urls[1]!, true);
      // Each submit starts the refresh beside itself once it is due (every IDENTITY_REFRESH_MS); it
      // reads shard 0 first, and only the statement timeout lets it go on to shard 1.
      await expect
        .poll(
          async () => {
            await docket.submit({ kind: 'refresh', payload: {} });
            return store.describeShards().find((shard) => shard.number === 1)?.draining;
          },
          { timeout: IDENTITY_REFRESH_MS + 6000, interval: 250 },
        )
        .toBe(true);
      const after = await Promise.all(
        Array.from({ length: 9 }, (_, i) => docket.submit({ kind: 'refresh', payload: { i } })),
      );
      expect(after.filter((result) => shardNumberOfId(result.id) === 1)).toEqual([]);
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      await locker.end();
      await other.close();
      await docket.close();
    }
  }, 60_000);

  it('closes at once while a deferred shard is still away: its open attempt stops waiting out the connect timeout', async () => {
    await startCluster(SPARE_SHARD_PORT);
    const schema = freshSchema();
    const ports = [SHARD_CLUSTER_PORTS[0]!, SHARD_CLUSTER_PORTS[1]!, SPARE_SHARD_PORT];
    for (const port of ports) schemas.push({ port, schema });
    const options = { shards: ports.map((port) => shardSchemaUrl(port, schema)), connectTimeoutMs: 60_000 };
    await (await Docket.open(options)).close();
    stopCluster(SPARE_SHARD_PORT, 'fast');
    try {
      const docket = await Docket.open(options);
      expect((docket.store as ShardedStore).describeShards().filter((shard) => shard.down)).toHaveLength(1);
      const closing = Date.now();
      await docket.close();
      expect(Date.now() - closing).toBeLessThan(5000);
    } finally {
      await startCluster(SPARE_SHARD_PORT);
    }
  }, 60_000);

  it('refuses to open while a shard no directory knows is down, and refuses a shard that comes back as another', async () => {
    await startCluster(SPARE_SHARD_PORT);
    const ports = [SHARD_CLUSTER_PORTS[0]!, SHARD_CLUSTER_PORTS[1]!, SPARE_SHARD_PORT];
    const options = (schema: string) => ({
      shards: ports.map((port) => shardSchemaUrl(port, schema)),
      connectTimeoutMs: 1000,
      connectAttemptTimeoutMs: 1000,
      statementTimeoutMs: 2000,
    });
    // Never opened together: nobody can say which number the missing shard has.
    const unknown = freshSchema();
    for (const port of ports) schemas.push({ port, schema: unknown });
    stopCluster(SPARE_SHARD_PORT, 'fast');
    await expect(Docket.open(options(unknown))).rejects.toThrow(/ECONNREFUSED|connect/i);
    await startCluster(SPARE_SHARD_PORT);
    // Opened together once; then shard 2's schema is dropped and re-created as a fresh one.
    const schema = freshSchema();
    for (const port of ports) schemas.push({ port, schema });
    const earlier = await Docket.open(options(schema));
    const spareJob = (await earlier.submitMany(Array.from({ length: 3 }, () => ({ kind: 'work', payload: {} })))).find(
      (result) => shardNumberOfId(result.id) === 2,
    )!;
    await earlier.close();
    await dropShardSchema(SPARE_SHARD_PORT, schema);
    stopCluster(SPARE_SHARD_PORT, 'fast');
    const docket = await Docket.open(options(schema));
    try {
      await startCluster(SPARE_SHARD_PORT);
      await expect
        .poll(
          async () => {
            try {
              await docket.getJob(spareJob.id);
              return 'answered';
            } catch (error) {
              return (error as Error).message;
            }
          },
          { timeout: 15_000, interval: 500 },
        )
        .toMatch(/answered as an unnumbered schema, but the shard directory records shard number 2/);
    } finally {
      await docket.close();
    }
  }, 90_000);

  it('adds a fourth shard under load: new jobs spread over four, existing ids keep their shard, none lost', async () => {
    await startCluster(SPARE_SHARD_PORT);
    const schema = freshSchema();
    const three = sharedShards(schema);
    schemas.push({ port: SPARE_SHARD_PORT, schema });
    const four = [...three, shardSchemaUrl(SPARE_SHARD_PORT, schema)];
    const done = new Map<string, number>();
    const handler = async (_payload: unknown, ctx: { jobId: string }) => {
      done.set(ctx.jobId, (done.get(ctx.jobId) ?? 0) + 1);
    };
    const old = await Docket.open({ shards: three });
    old.handle('load', handler);
    const oldWorker = old.worker({ ...QUICK, concurrency: 4 });
    await oldWorker.start();
    const submitted: string[] = [];
    let stopLoad = false;
    const load = (async () => {
      for (let i = 0; !stopLoad; i += 1) {
        submitted.push((await old.submit({ kind: 'load', payload: { i } })).id);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    let grown: Docket | undefined;
    let grownWorker: ReturnType<Docket['worker']> | undefined;
    try {
      await new Promise((resolve) => setTimeout(resolve, 500));
      // The new process lists four shards while the old one keeps submitting to three.
      grown = await Docket.open({ shards: four });
      grown.handle('load', handler);
      grownWorker = grown.worker({ ...QUICK, concurrency: 4 });
      await grownWorker.start();
      const added = await Promise.all(
        Array.from({ length: 40 }, (_, i) => grown!.submit({ kind: 'load', payload: { added: i } })),
      );
      const perShard = new Map<number, number>();
      for (const { id } of added) perShard.set(shardNumberOfId(id)!, (perShard.get(shardNumberOfId(id)!) ?? 0) + 1);
      expect([...perShard.keys()].sort()).toEqual([0, 1, 2, 3]);
      stopLoad = true;
      await load;
      // Ids written before the fourth shard existed still route (no lookup) from the grown store.
      expect(submitted.every((id) => shardNumberOfId(id)! < 3)).toBe(true);
      const all = [...submitted, ...added.map((result) => result.id)];
      await expect.poll(() => all.filter((id) => done.has(id)).length, { timeout: 30_000 }).toBe(all.length);
      expect(all.filter((id) => done.get(id) !== 1)).toEqual([]);
      for (const id of submitted.slice(0, 10)) {
        await expect.poll(async () => (await grown!.getJob(id))?.state, { timeout: 10_000 }).toBe('done');
      }
    } finally {
      stopLoad = true;
      await load.catch(() => undefined);
      await grownWorker?.stop();
      await oldWorker.stop();
      await grown?.close();
      await old.close();
    }
  }, 90_000);

  it('drains a shard from the CLI: no new work goes to it, its schedules move, --wait reports when it is empty', async () => {
    const schema = freshSchema();
    const shards = sharedShards(schema);
    const flag = ['--shards', shards.join(',')];
    const docket = await Docket.open({ shards });
    docket.handle('drain', async () => {});
    try {
      const before = await docket.submitMany(Array.from({ length: 9 }, (_, i) => ({ kind: 'drain', payload: { i } })));
      const onLast = before.filter((result) => shardNumberOfId(result.id) === 2);
      expect(onLast.length).toBe(3);
      // Schedules whose ids hash to the shard being drained.
      const numbers = [0, 1, 2];
      const scheduleIds = Array.from({ length: 40 }, (_, i) => `nightly-${i}`).filter(
        (id) => shardForKey(`schedule:${id}`, numbers) === 2,
      );
      for (const id of scheduleIds.slice(0, 2)) {
        await docket.schedule({ id, cron: '0 3 * * *', job: { kind: 'drain' } });
      }
      const migrated = await runDocketInProcess(['migrate', ...flag]);
      expect(migrated.code, describeRun(migrated)).toBe(0);
      expect(migrated.stdout).toMatch(/^3 shards up to date/);
      const listed = await runDocketInProcess(['shards', 'list', '--json', ...flag]);
      expect(listed.code, describeRun(listed)).toBe(0);
      expect((JSON.parse(listed.stdout) as { number: number; live: number }[]).map((row) => row.live)).toEqual([
        3,
        3,
        3 + 2,
      ]);
      const worker = docket.worker({ ...QUICK, concurrency: 4 });
      await worker.start();
      try {
        const drained = await runDocketInProcess([
          'shards',
          'drain',
          shards[2]!,
          '--wait',
          '--poll-ms',
          '200',
          ...flag,
        ]);
        expect(drained.code, describeRun(drained)).toBe(0);
        expect(drained.stdout).toMatch(/shard 2 is draining: no new jobs go to it; 2 schedule\(s\) moved/);
        expect(drained.stdout).toMatch(/shard 2 is empty: remove it from the shard list of every process/);
      } finally {
        await worker.stop();
      }
      // A process that opened before the drain learns of it within the identity refresh. The
      // refresh runs beside the call that found it due (never on a submit's path), so poll with
      // submits rather than sleeping a guess at how long a loaded machine takes to read three shards.
      const store = docket.store as ShardedStore;
      await expect
        .poll(
          async () => {
            await docket.submit({ kind: 'drain', payload: 'until-refreshed' });
            return store.describeShards().find((shard) => shard.number === 2)?.draining;
          },
          { timeout: IDENTITY_REFRESH_MS + 10_000, interval: 250 },
        )
        .toBe(true);
      const after = await Promise.all(
        Array.from({ length: 12 }, (_, i) => docket.submit({ kind: 'drain', payload: { after: i } })),
      );
      expect(after.filter((result) => shardNumberOfId(result.id) === 2)).toEqual([]);
      for (const id of scheduleIds.slice(0, 2))
        expect(await docket.getSchedule(id)).toMatchObject({ id, paused: false });
      const resumed = await runDocketInProcess(['shards', 'resume', shards[2]!, ...flag]);
      expect(resumed.stdout).toMatch(/shard 2 takes new jobs again/);
      const refused = await runDocketInProcess(['shards', 'list', '--db', shards[0]!, ...flag]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/--db and --shards both name the store/);
    } finally {
      await docket.close();
    }
  }, 60_000);
});
