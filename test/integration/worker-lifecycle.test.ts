/**
 * Long-lived-process hygiene: start/stop loops leave no handles, timers or unhandled rejections
 * behind; and on PostgreSQL, a killed LISTEN connection degrades dispatch to polling, not to silence.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import { Docket, DocketEvents, type JobContext, seededRandom, silentLogger, Worker } from '../../src/index.js';
import { createTestDatabase, POSTGRES_URL, storeKinds, type TestDatabase } from '../support/stores.js';
import { type Deferred, deferred, within } from './support/deferred.js';

/** Active handles and requests by type, e.g. { Timeout: 2, TCPWRAP: 1 }. */
function activeResources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) counts[type] = (counts[type] ?? 0) + 1;
  return counts;
}

/** One deferred per job id, resolved by the handler when that job starts; awaited by the test. */
function startSignals(): (id: string) => Deferred<void> {
  const started = new Map<string, Deferred<void>>();
  return (id) => {
    let signal = started.get(id);
    if (!signal) {
      signal = deferred<void>();
      started.set(id, signal);
    }
    return signal;
  };
}

/**
 * Moves a worker's manual clock on, flush interval by flush interval, until it has completed `count`
 * jobs: completions wait for the completer's flush timer, which runs on that clock too (a stop
 * would otherwise wait for a timer nobody fires).
 */
async function completeAll(clock: ManualClock, worker: Worker, count: number): Promise<void> {
  await expect
    .poll(
      () => {
        clock.advance(worker.options.completionFlushMs);
        return worker.stats.completed;
      },
      { timeout: 10_000, interval: 10 },
    )
    .toBe(count);
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
      await expect.poll(() => activeResources().TCPSocketWrap ?? 0, { timeout: 10_000, interval: 20 }).toBe(0);
      const before = activeResources();

      const docket = await Docket.open({ url: db.url });
      let ran = 0;
      docket.handle('cycle', async () => {
        ran += 1;
      });
      for (let cycle = 0; cycle < 50; cycle += 1) {
        // A lease no stall of a loaded CI machine (1-2 s) outlasts: with 600 ms a stall could lapse
        // one and the job run twice (at-least-once, as designed), and \`ran\` below is exact.
        const worker = docket.worker({ leaseMs: 10_000, heartbeatIntervalMs: 200, pollIntervalMs: 50 });
        await worker.start();
        if (cycle % 10 === 0) {
          // Every tenth cycle does real work, so stop also has leases, heartbeats and completions to settle.
          const done = deferred<void>();
          const onCompleted = () => done.resolve();
          docket.events.on('completed', onCompleted);
          await docket.submit({ kind: 'cycle' });
          await within(done.promise, 10_000, `cycle ${cycle} job`);
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
      await expect.poll(activeResources, { timeout: 10_000, interval: 50 }).toEqual(before);
      expect(rejections).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
    }
  });

  // SQLite wakes only in-process subscribers: another process's submit is found by polling alone.
  if (kind === 'sqlite') {
    it('finds a job no wake-up announced at its next poll, not before (worker time pinned by a ManualClock)', async () => {
      const clock = new ManualClock(Date.now());
      const host = await Docket.open({ url: db.url });
      // A second store on the same file stands in for another process. Its submits do wake this
      // one (the store watches the file for new job ids), but its releases and retries keep their
      // ids and are found by the poll: the job here becomes due by such a release. It is
      // submitted and claimed before the worker starts, so only that release can make it due.
      const elsewhere = await Docket.open({ url: db.url });
      const { id } = await elsewhere.submit({ kind: 'polled' });
      const [held] = await elsewhere.store.jobClaim({
        owner: 'elsewhere',
        limit: 1,
        leaseMs: 600_000,
        kinds: ['polled'],
      });
      expect(held?.id).toBe(id);
      const startedIds: string[] = [];
      const startOf = startSignals();
      const pollIntervalMs = 1000;
      const worker = new Worker(
        {
          store: host.store,
          handlers: new Map([
            [
              'polled',
              async (_payload: never, ctx: JobContext) => {
                startedIds.push(ctx.jobId);
                startOf(ctx.jobId).resolve();
              },
            ],
          ]),
          events: new DocketEvents(silentLogger),
          logger: silentLogger,
          random: seededRandom(5),
          clock,
        },
        { pollIntervalMs },
      );
      try {
        await worker.start();
        // A local submit wakes the worker: the claim loop is idle after it. The worker's clock
        // stands still while real time passes, so the submit's run time (the database's now when
        // its flush ran) can lie a few ms past the worker's estimate of that now, made at start;
        // the hint then arms the wake timer instead of claiming at once. Worker time is stepped
        // 5 ms at a time until the job starts, at most 200 ms (far from the first poll).
        const local = await host.submit({ kind: 'polled' });
        const localStarted = startOf(local.id).promise.then(() => true);
        const notYet = () => new Promise<false>((resolve) => setTimeout(resolve, 10, false));
        let stepMs = 0;
        while (stepMs < 200 && !(await Promise.race([localStarted, notYet()]))) {
          clock.advance(5);
          stepMs += 5;
        }
        await within(startOf(local.id).promise, 10_000, 'the locally submitted job');

        const released = await elsewhere.store.jobRelease({ id, token: held!.token, leaseOwner: 'elsewhere' });
        expect(released).toBe('released');
        // Polls are jittered to [0.9, 1.1] x the interval: at 0.85 x none has fired.
        clock.advance(pollIntervalMs * 0.85 - stepMs);
        for (let turn = 0; turn < 5; turn += 1) await new Promise((resolve) => setImmediate(resolve));
        expect(startedIds).toEqual([local.id]);
        expect((await elsewhere.getJob(id))?.state).toBe('pending');
        clock.advance(pollIntervalMs * 0.3);
        await within(startOf(id).promise, 10_000, 'the job found by the poll');
        expect(startedIds).toEqual([local.id, id]);
        await completeAll(clock, worker, 2);
      } finally {
        await worker.stop();
        await host.close();
        await elsewhere.close();
      }
    });
  }

  // Only PostgreSQL has a LISTEN connection to lose; SQLite's wake-ups are in-process.
  if (kind !== 'postgres') return;
  it('keeps starting due jobs within the polling interval while its LISTEN connection is being killed', async () => {
    // The worker runs on a ManualClock: its polls fire only when the test moves time on, so
    // "within one polling interval" is checked exactly, with no wall-clock bound to flake.
    const clock = new ManualClock(Date.now());
    const host = await Docket.open({ url: db.url });
    const submitter = await Docket.open({ url: db.url });
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    const events = new DocketEvents(silentLogger);
    const errors: string[] = [];
    events.on('error', (event) => errors.push(event.operation));
    const startOf = startSignals();
    const pollIntervalMs = 300;
    const worker = new Worker(
      {
        store: host.store,
        handlers: new Map([['due', async (_payload: never, ctx: JobContext) => startOf(ctx.jobId).resolve()]]),
        events,
        logger: silentLogger,
        random: seededRandom(11),
        clock,
      },
      { pollIntervalMs },
    );
    try {
      await worker.start();
      const killListener = async () => {
        const { rows } = await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE query ILIKE 'LISTEN %' AND query LIKE $1 AND pid <> pg_backend_pid()`,
          [`%${db.schema}%`],
        );
        for (const { pid } of rows) await admin.query('SELECT pg_terminate_backend($1)', [pid]);
        return rows.length;
      };
      expect(await killListener()).toBe(1);

      // Keep killing the listener (its reconnects too) while jobs arrive, so notifications are
      // lost; each job must still start once the worker clock has moved one polling interval
      // (plus its ±10 % jitter).
      for (let i = 0; i < 6; i += 1) {
        await killListener();
        const { id } = await submitter.submit({ kind: 'due' });
        clock.advance(Math.ceil(pollIntervalMs * 1.1));
        await within(startOf(id).promise, 10_000, `job ${i} after one polling interval`);
      }
      // And once the listener is back, wake-ups work again.
      await expect.poll(killListener, { timeout: 5000, interval: 100 }).toBe(1);
      await completeAll(clock, worker, 6);
      expect(errors.filter((operation) => operation !== 'subscribe')).toEqual([]);
    } finally {
      await worker.stop();
      await admin.end();
      await host.close();
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
      await expect.poll(() => completed.size, { timeout: 15_000, interval: 5 }).toBeGreaterThan(30);
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
