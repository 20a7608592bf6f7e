/**
 * Transactional enqueue and transactional completion on PostgreSQL, against a real server: a job
 * submitted in the caller's transaction exists exactly when their business write commits (and
 * wakes workers only then), and a handler's own writes commit together with its fenced
 * completion, so a stale attempt's writes roll back and the job is done once, by its new owner.
 * SQLite refuses both with a clear ConfigurationError.
 *
 * Business rows live in a table of the test schema; each test uses its own job kinds and rows.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  ConfigurationError,
  Docket,
  type JobContext,
  StaleLeaseError,
  seededRandom,
  type WakeUp,
  type WorkerOptions,
} from '../../src/index.js';
import { createTestDatabase, POSTGRES_URL, type TestDatabase } from '../support/stores.js';
import { deferred, within } from './support/deferred.js';
import { withStallProofLease } from './support/stall-proof-lease.js';

const SEED = Number(process.env.DOCKET_SEED ?? Date.now() % 100_000);
const FAST_RETRY = { baseDelayMs: 10, factor: 2, maxDelayMs: 100, jitterRatio: 0 };
// Leases long enough that a loaded CI machine does not let a healthy job's lease lapse mid-test.
const QUICK: WorkerOptions = { leaseMs: 2000, heartbeatIntervalMs: 600, pollIntervalMs: 100, shutdownGraceMs: 500 };
/** QUICK for the tests that count runs but are not about leases. */
const LONG_LEASE = withStallProofLease(QUICK);

describe('transactional enqueue and completion on PostgreSQL', () => {
  let db: TestDatabase;
  let pool: pg.Pool;
  let orders: string;
  const dockets: Docket[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    console.log(`transactional: seed ${SEED} (replay with DOCKET_SEED=${SEED})`);
    pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 6 });
    // Opening once runs the migrations, which create the schema the business table lives in.
    const first = await open();
    await first.close();
    orders = `${db.schema}.orders`;
    await pool.query(`CREATE TABLE ${orders} (id text PRIMARY KEY, note text NOT NULL, job_id bigint)`);
  });

  afterEach(async () => {
    await Promise.all(dockets.splice(0).map((docket) => docket.close()));
  });

  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  async function open(options: { retentionMs?: number } = {}): Promise<Docket> {
    const docket = await Docket.open({ url: db.url, random: seededRandom(SEED + dockets.length), ...options });
    dockets.push(docket);
    return docket;
  }

  /** Runs `fn` inside BEGIN … COMMIT on one pooled client, rolling back if it throws. */
  async function inTransaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  }

  async function orderRows(prefix: string): Promise<{ id: string; note: string; job_id: string | null }[]> {
    const result = await pool.query(`SELECT id, note, job_id FROM ${orders} WHERE id LIKE $1 ORDER BY id`, [
      `${prefix}%`,
    ]);
    return result.rows;
  }

  /** Collects wake-ups by run time, and resolves a waiter when a given run time arrives. */
  async function watchWakeUps(docket: Docket) {
    const seen: number[] = [];
    const waiters = new Map<number, () => void>();
    const unsubscribe = await docket.store.subscribe((wakeUp: WakeUp) => {
      const ms = wakeUp.runAt?.getTime();
      if (ms === undefined) return;
      seen.push(ms);
      waiters.get(ms)?.();
    });
    return {
      seen,
      unsubscribe,
      /** Resolves when a wake-up for `runAt` arrives (or already has). */
      arrival(runAt: Date): Promise<void> {
        if (seen.includes(runAt.getTime())) return Promise.resolve();
        return new Promise((resolve) => waiters.set(runAt.getTime(), resolve));
      },
    };
  }

  describe('transactional enqueue', () => {
    it('creates the job and wakes workers only when the business write commits', async () => {
      const docket = await open();
      const wakeUps = await watchWakeUps(docket);
      const now = await docket.store.now();
      const inTx = new Date(now.getTime() + 2000);
      const fence = new Date(now.getTime() + 2500);
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query(`INSERT INTO ${orders} (id, note) VALUES ('enq-commit-1', 'placed')`);
        const submitted = await docket.submit(
          { kind: 'tx.enqueue', queue: 'enqueued', payload: { order: 'enq-commit-1' }, runAt: inTx },
          { transaction: client },
        );
        expect(submitted.created).toBe(true);
        // Not visible outside the transaction until it commits.
        expect(await docket.getJob(submitted.id)).toBeNull();
        // Notifications arrive in commit order: once a later-committed submit's wake-up is here,
        // an uncommitted one cannot have been sent.
        await docket.submit({ kind: 'tx.fence', queue: 'fences', runAt: fence });
        await within(wakeUps.arrival(fence), 10_000, 'the fence wake-up');
        expect(wakeUps.seen).not.toContain(inTx.getTime());

        await client.query('COMMIT');
        await within(wakeUps.arrival(inTx), 10_000, 'the wake-up of the committed submit');
        expect(await docket.getJob(submitted.id)).toMatchObject({ kind: 'tx.enqueue', state: 'pending' });
        expect(await orderRows('enq-commit-1')).toHaveLength(1);
      } finally {
        client.release();
        await wakeUps.unsubscribe();
      }
    });

    it('leaves no job and sends no wake-up when the business transaction rolls back', async () => {
      const docket = await open();
      const wakeUps = await watchWakeUps(docket);
      const now = await docket.store.now();
      const runAts = [now.getTime() + 1100, now.getTime() + 1200].map((ms) => new Date(ms));
      const fence = new Date(now.getTime() + 1300);
      const client = await pool.connect();
      let ids: string[];
      try {
        await client.query('BEGIN');
        await client.query(`INSERT INTO ${orders} (id, note) VALUES ('enq-rollback-1', 'placed')`);
        const results = await docket.submitMany(
          runAts.map((runAt) => ({ kind: 'tx.rolledback', queue: 'enqueued', runAt })),
          { transaction: client },
        );
        ids = results.map((result) => result.id);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      await docket.submit({ kind: 'tx.fence', queue: 'fences', runAt: fence });
      await within(wakeUps.arrival(fence), 10_000, 'the fence wake-up');
      await wakeUps.unsubscribe();
      for (const runAt of runAts) expect(wakeUps.seen).not.toContain(runAt.getTime());
      for (const id of ids) expect(await docket.getJob(id)).toBeNull();
      expect(await docket.listJobs({ kind: 'tx.rolledback' })).toEqual([]);
      expect(await orderRows('enq-rollback-1')).toEqual([]);
    });

    it('runs a job submitted in a committed transaction on a running worker', async () => {
      const docket = await open();
      const ran = deferred<{ order: string }>();
      docket.handle<{ order: string }>('tx.run', async (payload) => ran.resolve(payload));
      await docket.worker({ ...QUICK, pollIntervalMs: 60_000, queues: ['run'] }).start();
      const id = await inTransaction(async (client) => {
        await client.query(`INSERT INTO ${orders} (id, note) VALUES ('enq-run-1', 'placed')`);
        const input = { kind: 'tx.run', queue: 'run', payload: { order: 'enq-run-1' } };
        return (await docket.submit(input, { transaction: client })).id;
      });
      // The poll interval is a minute: only the NOTIFY delivered at commit can start it this fast.
      expect(await within(ran.promise, 10_000, 'the handler of the committed job')).toEqual({ order: 'enq-run-1' });
      await expect.poll(async () => (await docket.getJob(id))?.state, { timeout: 10_000 }).toBe('done');
    });

    it('refuses a pool, a client outside BEGIN and a non-client, writing nothing', async () => {
      const docket = await open();
      await expect(docket.submit({ kind: 'tx.bad' }, { transaction: pool })).rejects.toThrow(ConfigurationError);
      await expect(docket.submit({ kind: 'tx.bad' }, { transaction: pool })).rejects.toThrow(/pg\.Pool/);
      const client = await pool.connect();
      try {
        await expect(docket.submit({ kind: 'tx.bad' }, { transaction: client })).rejects.toThrow(/run BEGIN first/);
        await client.query('BEGIN');
        await client.query('SELECT 1/0').catch(() => {});
        // Docket's own check sees the failed block once the server's ready message has arrived;
        // before that PostgreSQL refuses the statement itself. Either way nothing is written.
        await expect(docket.submit({ kind: 'tx.bad' }, { transaction: client })).rejects.toThrow(
          /already failed|current transaction is aborted/,
        );
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      await expect(docket.submit({ kind: 'tx.bad' }, { transaction: { not: 'a client' } })).rejects.toThrow(
        ConfigurationError,
      );
      await expect(docket.submit({ kind: 'tx.bad' }, { trasnaction: pool } as never)).rejects.toThrow(
        /options\.trasnaction/,
      );
      expect(await docket.listJobs({ kind: 'tx.bad' })).toEqual([]);
    });
  });

  describe('transactional completion', () => {
    it('commits the business row and the completion together, and the worker completes nothing again', async () => {
      const docket = await open();
      docket.handle<{ order: string }>('tx.complete', async (payload, ctx) => {
        await inTransaction(async (client) => {
          await client.query(`INSERT INTO ${orders} (id, note, job_id) VALUES ($1, 'shipped', $2)`, [
            payload.order,
            ctx.jobId,
          ]);
          await ctx.completeInTransaction(client);
        });
      });
      const completed = deferred<string>();
      const stale: string[] = [];
      docket.events.on('completed', (event) => completed.resolve(event.job.id));
      docket.events.on('stale', (event) => stale.push(`${event.operation}:${event.job.id}`));
      const worker = docket.worker({ ...LONG_LEASE, queues: ['complete'] });
      await worker.start();
      const { id } = await docket.submit({ kind: 'tx.complete', queue: 'complete', payload: { order: 'done-1' } });

      expect(await within(completed.promise, 10_000, 'the completed event')).toBe(id);
      expect(await docket.getJob(id)).toMatchObject({ state: 'done', attempts: 1, token: 1 });
      expect(await orderRows('done-1')).toEqual([{ id: 'done-1', note: 'shipped', job_id: id }]);
      await worker.stop();
      expect(worker.stats).toMatchObject({ completed: 1, stale: 0, failed: 0, leaseLost: 0 });
      expect(stale).toEqual([]);
    });

    it('with retentionMs 0 deletes the job in the business transaction, and nothing when it rolls back', async () => {
      const docket = await open({ retentionMs: 0 });
      let attempts = 0;
      docket.handle<{ order: string }>('tx.lean', async (payload, ctx) => {
        attempts += 1;
        await inTransaction(async (client) => {
          await client.query(`INSERT INTO ${orders} (id, note, job_id) VALUES ($1, 'lean', $2)`, [
            `${payload.order}-${ctx.attempt}`,
            ctx.jobId,
          ]);
          await ctx.completeInTransaction(client);
          // The first attempt's transaction rolls back after completing: the job must survive it.
          if (ctx.attempt === 1) throw new Error('the business write failed after the completion');
        });
      });
      const completed = deferred<string>();
      docket.events.on('completed', (event) => completed.resolve(event.job.id));
      const worker = docket.worker({ ...LONG_LEASE, queues: ['lean'] });
      await worker.start();
      const { id } = await docket.submit({
        kind: 'tx.lean',
        queue: 'lean',
        payload: { order: 'lean-order' },
        retry: FAST_RETRY,
      });
      expect(await within(completed.promise, 10_000, 'the second attempt’s completion')).toBe(id);
      await worker.stop();
      expect(attempts).toBe(2);
      expect(await docket.getJob(id)).toBeNull();
      expect(await orderRows('lean-order')).toEqual([{ id: 'lean-order-2', note: 'lean', job_id: id }]);
      expect(worker.stats).toMatchObject({ completed: 1, stale: 0, failed: 1, leaseLost: 0 });
    });

    it('rolls the stale attempt’s business write back, and the new owner completes the job once', async () => {
      const docket = await open();
      const started = deferred<JobContext>();
      const go = deferred();
      const refused = deferred<unknown>();
      docket.handle('tx.takeover', async (_payload, ctx) => {
        started.resolve(ctx);
        await go.promise;
        try {
          await inTransaction(async (client) => {
            await client.query(`INSERT INTO ${orders} (id, note, job_id) VALUES ('takeover-old', 'old', $1)`, [
              ctx.jobId,
            ]);
            await ctx.completeInTransaction(client);
          });
        } catch (error) {
          refused.resolve(error);
          throw error;
        }
      });
      // Long lease and slow heartbeat: the old worker cannot notice the takeover before it writes.
      const worker = docket.worker({
        leaseMs: 30_000,
        heartbeatIntervalMs: 10_000,
        pollIntervalMs: 100,
        queues: ['takeover'],
      });
      await worker.start();
      const { id } = await docket.submit({ kind: 'tx.takeover', queue: 'takeover' });
      const ctx = await within(started.promise, 10_000, 'the old attempt');

      // Another worker takes the job over: at a pinned instant past the old lease, it has lapsed.
      const dbNow = await docket.store.now();
      const [taken] = await docket.store.jobClaim({
        owner: 'new-owner',
        limit: 1,
        leaseMs: 30_000,
        queues: ['takeover'],
        now: new Date(dbNow.getTime() + 31_000),
      });
      expect(taken).toMatchObject({ id, token: ctx.token + 1 });

      go.resolve();
      const error = await within(refused.promise, 10_000, 'the old attempt’s refusal');
      expect(error).toBeInstanceOf(StaleLeaseError);
      expect(error).toMatchObject({ jobId: id, token: ctx.token, code: 'stale_lease' });
      expect(await orderRows('takeover-')).toEqual([]);
      expect(await docket.getJob(id)).toMatchObject({ state: 'running', token: taken!.token, leaseOwner: 'new-owner' });

      // The new owner does its write and completes in one transaction, through the store contract.
      const outcome = await inTransaction(async (client) => {
        await client.query(`INSERT INTO ${orders} (id, note, job_id) VALUES ('takeover-new', 'new', $1)`, [id]);
        return docket.store.jobComplete({ id, token: taken!.token, transaction: client });
      });
      expect(outcome).toBe('done');
      expect(await orderRows('takeover-')).toEqual([{ id: 'takeover-new', note: 'new', job_id: id }]);
      expect(await docket.getJob(id)).toMatchObject({ state: 'done', token: taken!.token });
      await worker.stop();
      expect(worker.stats.completed).toBe(0);
    });

    it('retries the job when the transaction that completed it rolls back (at-least-once kept)', async () => {
      const docket = await open();
      const attempts: number[] = [];
      docket.handle('tx.rollback', async (_payload, ctx) => {
        attempts.push(ctx.attempt);
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          await client.query(`INSERT INTO ${orders} (id, note, job_id) VALUES ($1, 'attempt', $2)`, [
            `rollback-${ctx.attempt}`,
            ctx.jobId,
          ]);
          await ctx.completeInTransaction(client);
          if (ctx.attempt === 1) {
            // As if COMMIT failed: the completion and the business row go together.
            await client.query('ROLLBACK');
            throw new Error('simulated commit failure');
          }
          await client.query('COMMIT');
        } finally {
          client.release();
        }
      });
      const completed = deferred<string>();
      docket.events.on('completed', (event) => completed.resolve(event.job.id));
      const failed: string[] = [];
      docket.events.on('failed', (event) => failed.push(event.error.message));
      const worker = docket.worker({ ...LONG_LEASE, queues: ['rollback'] });
      await worker.start();
      const { id } = await docket.submit({ kind: 'tx.rollback', queue: 'rollback', retry: FAST_RETRY });

      expect(await within(completed.promise, 10_000, 'the second attempt’s completion')).toBe(id);
      expect(attempts).toEqual([1, 2]);
      expect(failed).toEqual(['simulated commit failure']);
      expect(await docket.getJob(id)).toMatchObject({ state: 'done', attempts: 2 });
      expect(await orderRows('rollback-')).toEqual([{ id: 'rollback-2', note: 'attempt', job_id: id }]);
    });

    it('keeps the job locked, not lost, while the completing transaction stays open past the lease', async () => {
      const docket = await open();
      const completedInTx = deferred();
      const commit = deferred();
      docket.handle('tx.slow-commit', async (_payload, ctx) => {
        await inTransaction(async (client) => {
          await client.query(`INSERT INTO ${orders} (id, note, job_id) VALUES ('slow-1', 'slow', $1)`, [ctx.jobId]);
          await ctx.completeInTransaction(client);
          completedInTx.resolve();
          await commit.promise;
        });
      });
      const neighbour = deferred();
      const neighbourDone = deferred();
      docket.handle('tx.neighbour', async () => {
        neighbour.resolve();
        await neighbourDone.promise;
      });
      const lost: string[] = [];
      docket.events.on('leaseLost', (event) => lost.push(`${event.job.kind}:${event.reason}`));
      const completed = new Map<string, number>();
      docket.events.on('completed', (event) => completed.set(event.job.kind, (completed.get(event.job.kind) ?? 0) + 1));
      const worker = docket.worker({ ...QUICK, concurrency: 2, queues: ['slow', 'neighbour'] });
      await worker.start();
      const slow = await docket.submit({ kind: 'tx.slow-commit', queue: 'slow' });
      const { id: neighbourId } = await docket.submit({ kind: 'tx.neighbour', queue: 'neighbour' });
      await within(Promise.all([completedInTx.promise, neighbour.promise]), 10_000, 'both handlers running');

      // At an instant past the slow job's lease, a claimer still skips it: its row is locked.
      const dbNow = await docket.store.now();
      const other = await docket.store.jobClaim({
        owner: 'other',
        limit: 10,
        leaseMs: 30_000,
        queues: ['slow'],
        now: new Date(dbNow.getTime() + 5_000),
      });
      expect(other).toEqual([]);
      // The worker's heartbeat batch is not held up by that lock: the neighbour's lease is renewed
      // four times (600 ms apart: past the slow job's 2 s lease) while the completing
      // transaction stays open.
      const neighbourLeaseMs = async () => (await docket.getJob(neighbourId))?.leaseUntil?.getTime() ?? 0;
      for (let beat = 0; beat < 4; beat++) {
        const before = await neighbourLeaseMs();
        await expect.poll(neighbourLeaseMs, { timeout: 10_000 }).toBeGreaterThan(before);
      }
      expect(lost).toEqual([]);

      commit.resolve();
      neighbourDone.resolve();
      await expect.poll(() => completed.get('tx.slow-commit') ?? 0, { timeout: 10_000 }).toBe(1);
      expect(await docket.getJob(slow.id)).toMatchObject({ state: 'done', attempts: 1 });
      expect(lost.filter((entry) => entry.startsWith('tx.slow-commit'))).toEqual([]);
      expect(await orderRows('slow-')).toHaveLength(1);
    });

    it('answers stale inside a transaction for a job already done, so its writes roll back', async () => {
      const docket = await open();
      const { id } = await docket.submit({ kind: 'tx.store-level', queue: 'store-level' });
      const [claimed] = await docket.store.jobClaim({ owner: 'w', limit: 1, leaseMs: 30_000, queues: ['store-level'] });
      expect(claimed?.id).toBe(id);
      const lease = { id, token: claimed!.token };
      // Twice in one transaction: the second finds the job done by the first and is refused.
      const both = await inTransaction(async (client) => [
        await docket.store.jobComplete({ ...lease, transaction: client }),
        await docket.store.jobComplete({ ...lease, transaction: client }),
      ]);
      expect(both).toEqual(['done', 'stale']);
      // A later transaction must not commit its writes with a completion that is not its own…
      expect(await inTransaction((client) => docket.store.jobComplete({ ...lease, transaction: client }))).toBe(
        'stale',
      );
      // …while the plain retry of a lost reply is idempotent.
      expect(await docket.store.jobComplete(lease)).toBe('done');
      await expect(docket.store.jobComplete({ ...lease, transaction: pool })).rejects.toThrow(ConfigurationError);
    });
  });
});

describe('transactions on SQLite', () => {
  let db: TestDatabase;
  let docket: Docket;

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    docket = await Docket.open({ url: db.url, random: seededRandom(SEED) });
  });

  afterAll(async () => {
    await docket?.close();
    await db?.drop();
  });

  it('reports no caller transactions and refuses a transactional submit, writing nothing', async () => {
    expect(docket.store.capabilities.callerTransactions).toBe(false);
    const fakeClient = { query: async () => ({ rows: [] }) };
    await expect(docket.submit({ kind: 'sqlite.tx' }, { transaction: fakeClient })).rejects.toThrow(ConfigurationError);
    await expect(docket.submitMany([{ kind: 'sqlite.tx' }], { transaction: fakeClient })).rejects.toThrow(
      /callerTransactions/,
    );
    await expect(
      docket.store.jobSubmit({ jobs: [], transaction: fakeClient }),
      'the store itself refuses too',
    ).rejects.toThrow(/SqliteStore\.jobSubmit: this store cannot join a caller's transaction/);
    await expect(docket.store.jobComplete({ id: '1', token: 1, transaction: fakeClient })).rejects.toThrow(
      ConfigurationError,
    );
    expect(await docket.listJobs({ kind: 'sqlite.tx' })).toEqual([]);
  });

  it('refuses ctx.completeInTransaction with a ConfigurationError and leaves the job to its retry', async () => {
    const refused = deferred<unknown>();
    docket.handle('sqlite.complete', async (_payload, ctx) => {
      try {
        await ctx.completeInTransaction({ query: async () => ({ rows: [] }) });
      } catch (error) {
        refused.resolve(error);
        throw error;
      }
    });
    const worker = docket.worker(QUICK);
    await worker.start();
    const { id } = await docket.submit({ kind: 'sqlite.complete', maxAttempts: 1 });
    const error = await within(refused.promise, 5000, 'the refusal');
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/callerTransactions/);
    await expect.poll(async () => (await docket.getJob(id))?.state, { timeout: 5000 }).toBe('dead');
    await worker.stop();
  });
});
