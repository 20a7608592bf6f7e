/**
 * Long-lived-process hygiene: start/stop loops leave no handles, timers or unhandled rejections
 * behind; and on PostgreSQL, a killed LISTEN connection degrades dispatch to polling, not to silence.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/index.js';
import { createTestDatabase, POSTGRES_URL, storeKinds, type TestDatabase } from '../support/stores.js';
import { deferred, within } from './support/deferred.js';

/** Active handles and requests by type, e.g. { Timeout: 2, TCPWRAP: 1 }. */
function activeResources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) counts[type] = (counts[type] ?? 0) + 1;
  return counts;
}

describe.each(storeKinds())('worker lifecycle on %s', (kind) => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase(kind);
  });

  afterAll(async () => {
    await db?.drop();
  });

  it('runs 50 start/stop cycles with no leaked handles and no unhandled rejections', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    try {
      // Warm up module loading and the driver once, so lazily created process-wide handles do not count.
      const warm = await Docket.open({ url: db.url });
      await warm.submit({ kind: 'warm' });
      await warm.close();
      // The warm-up's sockets close asynchronously after end(); the baseline has none of ours.
      await expect.poll(() => activeResources().TCPSocketWrap ?? 0, { timeout: 3000, interval: 20 }).toBe(0);
      const before = activeResources();

      const docket = await Docket.open({ url: db.url });
      let ran = 0;
      docket.handle('cycle', async () => {
        ran += 1;
      });
      for (let cycle = 0; cycle < 50; cycle += 1) {
        const worker = docket.worker({ leaseMs: 600, heartbeatIntervalMs: 200, pollIntervalMs: 50 });
        await worker.start();
        if (cycle % 10 === 0) {
          // Every tenth cycle does real work, so stop also has leases, heartbeats and completions to settle.
          const done = deferred<void>();
          const onCompleted = () => done.resolve();
          docket.events.on('completed', onCompleted);
          await docket.submit({ kind: 'cycle' });
          await within(done.promise, 5000, `cycle ${cycle} job`);
          docket.events.off('completed', onCompleted);
        }
        await worker.stop();
      }
      // And one worker restarted many times in place.
      const reused = docket.worker({ pollIntervalMs: 50 });
      for (let cycle = 0; cycle < 10; cycle += 1) {
        await reused.start();
        await reused.stop();
      }
      await docket.close();

      expect(ran).toBe(5);
      // Sockets close asynchronously after end(); give them a moment rather than a fixed sleep.
      await expect.poll(activeResources, { timeout: 3000, interval: 50 }).toEqual(before);
      expect(rejections).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
    }
  });

  // Only PostgreSQL has a LISTEN connection to lose; SQLite's wake-ups are in-process.
  if (kind !== 'postgres') return;
  it('keeps starting due jobs within the polling interval while its LISTEN connection is being killed', async () => {
    const worker = await Docket.open({ url: db.url });
    const submitter = await Docket.open({ url: db.url });
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    const errors: string[] = [];
    worker.events.on('error', (event) => errors.push(event.operation));
    try {
      const starts = new Map<string, number>();
      worker.handle('due', async (_payload, ctx) => {
        starts.set(ctx.jobId, Date.now());
      });
      const pollIntervalMs = 300;
      await worker.worker({ pollIntervalMs }).start();
      const killListener = async () => {
        const { rows } = await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE query ILIKE 'LISTEN %' AND query LIKE $1 AND pid <> pg_backend_pid()`,
          [`%${db.schema}%`],
        );
        for (const { pid } of rows) await admin.query('SELECT pg_terminate_backend($1)', [pid]);
        return rows.length;
      };
      expect(await killListener()).toBe(1);

      // Keep killing the listener (its reconnects too) while jobs arrive, so notifications are lost.
      const submittedAt = new Map<string, number>();
      for (let i = 0; i < 6; i += 1) {
        await killListener();
        const { id } = await submitter.submit({ kind: 'due' });
        submittedAt.set(id, Date.now());
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await expect.poll(() => starts.size, { timeout: 5000, interval: 20 }).toBe(6);
      for (const [id, at] of submittedAt) {
        // Poll jitter is ±10 %; allow scheduling slack on a loaded machine.
        expect(starts.get(id)! - at).toBeLessThan(pollIntervalMs * 1.1 + 300);
      }
      // And once the listener is back, wake-ups work again.
      await expect.poll(killListener, { timeout: 5000, interval: 100 }).toBe(1);
      expect(errors.filter((operation) => operation !== 'subscribe')).toEqual([]);
    } finally {
      await admin.end();
      await worker.close();
      await submitter.close();
    }
  });

  it('survives every database connection being terminated mid-run: every job still completes', async () => {
    const docket = await Docket.open({ url: db.url });
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    try {
      const runs = new Map<string, number>();
      docket.handle('work', async (_payload, ctx) => {
        runs.set(ctx.jobId, (runs.get(ctx.jobId) ?? 0) + 1);
        await new Promise((resolve) => setTimeout(resolve, 5));
      });
      const completed = new Set<string>();
      docket.events.on('completed', (event) => completed.add(event.job.id));
      const errors: string[] = [];
      docket.events.on('error', (event) => errors.push(event.operation));
      const worker = docket.worker({ concurrency: 20, leaseMs: 2000, heartbeatIntervalMs: 500, pollIntervalMs: 100 });
      await worker.start();
      const ids = (await docket.submitMany(Array.from({ length: 300 }, () => ({ kind: 'work' })))).map((r) => r.id);
      await expect.poll(() => completed.size, { timeout: 5000, interval: 5 }).toBeGreaterThan(30);
      // Every backend that has touched this test's schema: the pool's and the listener's.
      const { rows } = await admin.query<{ n: number }>(
        `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE query LIKE $1 AND pid <> pg_backend_pid()`,
        [`%${db.schema}%`],
      );
      expect(rows[0]?.n).toBeGreaterThan(0);
      await expect.poll(() => completed.size, { timeout: 20_000, interval: 50 }).toBe(ids.length);
      console.log(
        `connections terminated: ${rows[0]?.n}; errors handled: ${errors.length} (${[...new Set(errors)].join(', ')})`,
      );
      await worker.stop();
      for (const id of ids) expect((await docket.getJob(id))?.state).toBe('done');
      // A handler may run twice if a completion's round trip was cut (at-least-once), never zero times.
      expect([...runs.keys()].sort()).toEqual([...ids].sort());
      expect(rejections).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
      await admin.end();
      await docket.close();
    }
  });
});
