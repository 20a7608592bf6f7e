/**
 * Kind-aware routing and the live worker registry, in one process against both stores (issue 10):
 * a worker claims only kinds it has handlers for; a job nobody handles waits, pending and counted
 * as unhandled, and runs at once when a worker with its handler starts; the registry lists each
 * running worker and forgets it on stop or expiry.
 *
 * The tests share one database, so each uses kinds and queues of its own.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ConfigurationError,
  Docket,
  type Store,
  ValidationError,
  WEBHOOK_KIND,
  type WorkerOptions,
} from '../../src/index.js';
import { storeKinds } from '../support/stores.js';
import { deferred, within } from './support/deferred.js';
import { recordFailureWrites } from './support/failure-writes.js';
import { withStallProofLease } from './support/stall-proof-lease.js';
import { eventually, useInProcessDockets } from './support/suite-fixtures.js';

const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};
const QUICK: WorkerOptions = { leaseMs: 600, heartbeatIntervalMs: 200, pollIntervalMs: 100, shutdownGraceMs: 500 };
/** QUICK for the tests that count runs but are not about leases. */
const LONG_LEASE = withStallProofLease(QUICK);

describe.each(storeKinds())('routing and the worker registry on %s', (kind) => {
  const dockets = useInProcessDockets(kind, 'routing');
  const { open } = dockets;

  /** Resolves with the id of the next completed job of `kinds`, and the worker that completed it. */
  function nextCompleted(docket: Docket, jobId: string): Promise<{ workerId: string; attempts: number }> {
    const done = deferred<{ workerId: string; attempts: number }>();
    docket.events.on('completed', (event) => {
      if (event.job.id === jobId) done.resolve({ workerId: event.workerId, attempts: event.job.attempts });
    });
    return done.promise;
  }

  it('issue 10, library: a kind no worker handles stays pending and counted as unhandled, then runs at once on a worker with its handler', async () => {
    const old = await open();
    old.handle('r10.old', async () => {});
    const parked: string[] = [];
    old.events.on('parked', (event) => parked.push(event.job.id));
    await old.worker({ ...LONG_LEASE, id: 'r10-old' }).start();

    // Submitted first, so a worker that claimed every kind would take it before the control job.
    const { id: newJob } = await old.submit({ kind: 'r10.new', queue: 'r10', maxAttempts: 2 });
    for (let i = 0; i < 3; i += 1) {
      const { id: control } = await old.submit({ kind: 'r10.old', queue: 'r10' });
      const ran = nextCompleted(old, control);
      expect((await within(ran, 10_000, 'control job')).workerId).toBe('r10-old');
    }

    const waiting = await old.getJob(newJob);
    expect(waiting?.state).toBe('pending');
    expect(waiting?.attempts).toBe(0);
    expect(waiting?.errors).toEqual([]);
    // Due now, not put off by the old worker: the new one can take it at its start-up claim.
    expect(waiting!.runAt.getTime()).toBeLessThanOrEqual((await old.store.now()).getTime());
    expect(await old.unhandledJobs()).toContainEqual({ queue: 'r10', kind: 'r10.new', count: 1 });
    const stats = (await old.queueStats()).find((entry) => entry.queue === 'r10');
    expect(stats?.available).toBe(1);
    expect(stats?.unhandled).toBe(1);

    // The new version of the code: a separate Docket, as another process would be.
    const next = await open();
    next.handle('r10.new', async () => {});
    next.handle('r10.old', async () => {});
    const ran = nextCompleted(next, newJob);
    const startedAt = Date.now();
    await next.worker({ ...LONG_LEASE, id: 'r10-new' }).start();
    expect(await within(ran, 10_000, 'the waiting job on the new worker')).toEqual({
      workerId: 'r10-new',
      attempts: 1,
    });
    // At once: the start-up claim takes it, no poll interval or backoff in between. The bound leaves
    // room for a loaded machine's stalls (1-2 s); that the job was due at once is checked above.
    expect(Date.now() - startedAt).toBeLessThan(5_000);

    expect(parked).toEqual([]);
    expect(await next.listDeadLetters({ kind: 'r10.new' })).toEqual([]);
    expect((await next.getJob(newJob))?.state).toBe('done');
    expect((await next.unhandledJobs()).filter((entry) => entry.queue === 'r10')).toEqual([]);
    expect((await next.queueStats()).find((entry) => entry.queue === 'r10')?.unhandled).toBe(0);
  });

  it('claims only the kinds in an explicit kinds subset; the rest is unhandled, by the registry', async () => {
    const docket = await open();
    docket.handle('sub.a', async () => {});
    docket.handle('sub.b', async () => {});
    const worker = docket.worker({ ...QUICK, id: 'sub-worker', kinds: ['sub.a'], queues: ['sub'] });
    await worker.start();
    expect(worker.kinds).toEqual(['sub.a']);

    const { id: b } = await docket.submit({ kind: 'sub.b', queue: 'sub' });
    const { id: a } = await docket.submit({ kind: 'sub.a', queue: 'sub' });
    await within(nextCompleted(docket, a), 10_000, 'sub.a job');
    expect((await docket.getJob(b))?.state).toBe('pending');
    const record = (await docket.listWorkers()).find((w) => w.id === 'sub-worker');
    expect(record?.kinds).toEqual(['sub.a']);
    expect(record?.queues).toEqual(['sub']);
    expect(await docket.unhandledJobs()).toContainEqual({ queue: 'sub', kind: 'sub.b', count: 1 });
    expect(docket.handledKinds()).toEqual(['sub.a', 'sub.b']);
  });

  it('refuses to start a worker with no handlers, or with a kind that has no handler, registering nothing', async () => {
    const docket = await open();
    const bare = docket.worker({ ...QUICK, id: 'no-handlers' });
    await expect(bare.start()).rejects.toThrow(ConfigurationError);
    await expect(bare.start()).rejects.toThrow(/worker no-handlers has no handlers.*catchAll: true/);
    expect(bare.isRunning).toBe(false);

    docket.handle('has.handler', async () => {});
    const wrong = docket.worker({ ...QUICK, id: 'wrong-kinds', kinds: ['has.handler', 'no.such.kind'] });
    await expect(wrong.start()).rejects.toThrow(/kinds names "no\.such\.kind" with no registered handler/);
    expect(() => docket.worker({ catchAll: true, kinds: ['has.handler'] })).toThrow(
      /catchAll and kinds cannot be combined/,
    );
    const ids = (await docket.listWorkers()).map((w) => w.id);
    expect(ids).not.toContain('no-handlers');
    expect(ids).not.toContain('wrong-kinds');
  });

  it('a running worker picks up a handler registered after it started', async () => {
    const docket = await open();
    docket.handle('late.first', async () => {});
    const worker = docket.worker({ ...QUICK, id: 'late-worker', queues: ['late'] });
    await worker.start();
    const { id } = await docket.submit({ kind: 'late.second', queue: 'late' });
    const ran = nextCompleted(docket, id);
    docket.handle('late.second', async () => {});
    expect((await within(ran, 10_000, 'job of the late kind')).workerId).toBe('late-worker');
    expect(worker.kinds).toEqual(['late.first', 'late.second']);
    await eventually(
      () => docket.listWorkers(),
      (workers) => workers.find((w) => w.id === 'late-worker')?.kinds?.includes('late.second') === true,
      10_000,
      'the registry showing the new kind',
    );
  });

  it('a catch-all worker claims every kind and is registered with kinds null', async () => {
    const docket = await open();
    docket.handle('catch.known', async () => {});
    const worker = docket.worker({ ...QUICK, id: 'catch-all', catchAll: true, queues: ['catch'] });
    await worker.start();
    expect(worker.kinds).toBeNull();
    const record = (await docket.listWorkers()).find((w) => w.id === 'catch-all');
    expect(record?.kinds).toBeNull();
    const { id } = await docket.submit({ kind: 'catch.known', queue: 'catch' });
    await within(nextCompleted(docket, id), 10_000, 'catch-all job');
  });

  it('lists a running worker with its identity and ttl, refreshes it, and removes it on stop', async () => {
    const docket = await open();
    docket.handle('reg.kind', async () => {});
    const worker = docket.worker({ ...QUICK, id: 'reg-worker', concurrency: 3, queues: ['reg'], registryTtlMs: 600 });
    await worker.start();
    const [record] = (await docket.listWorkers()).filter((w) => w.id === 'reg-worker');
    expect(record).toMatchObject({
      id: 'reg-worker',
      pid: process.pid,
      version: packageJson.version,
      queues: ['reg'],
      kinds: ['reg.kind'],
      excludeKinds: [],
      concurrency: 3,
      origin: 'local',
    });
    expect(record?.host).not.toBe('');
    expect(record!.expiresAt.getTime() - record!.lastSeenAt.getTime()).toBe(600);
    expect(record!.startedAt.getTime()).toBeLessThanOrEqual(record!.lastSeenAt.getTime());

    // Refreshed every ttl/6 (100 ms): seen again past the first record's expiry, same startedAt.
    const refreshed = await eventually(
      () => docket.listWorkers(),
      (workers) => {
        const now = workers.find((w) => w.id === 'reg-worker');
        return now !== undefined && now.lastSeenAt.getTime() > record!.expiresAt.getTime();
      },
      10_000,
      'a refresh past the first expiry',
    );
    expect(refreshed.find((w) => w.id === 'reg-worker')?.startedAt).toEqual(record!.startedAt);

    await worker.stop();
    expect((await docket.listWorkers()).map((w) => w.id)).not.toContain('reg-worker');
  });

  it('with unhandledAfterMs, parks a job nobody served for that long, with the reason; a served kind waits', async () => {
    const docket = dockets.closeAfterTest(await Docket.open({ url: dockets.db.url, unhandledAfterMs: 300 }));
    docket.handle('uh.known', async () => {});
    // A remote worker that serves uh.remote on this queue but never claims: its job must wait.
    await docket.registerRemoteWorker({ id: 'uh-remote', kinds: ['uh.remote'], queues: ['uh'] }, 60_000);
    const parked = deferred<{ id: string; state: string; message: string }>();
    const parkedIds: string[] = [];
    docket.events.on('parked', (event) => {
      parkedIds.push(event.job.id);
      parked.resolve({ id: event.job.id, state: event.job.state, message: event.error.message });
    });
    const { id: served } = await docket.submit({ kind: 'uh.remote', queue: 'uh' });
    const { id: orphan } = await docket.submit({ kind: 'uh.nobody', queue: 'uh' });
    const submittedAt = Date.now();
    await docket.worker({ ...QUICK, queues: ['uh'] }).start();

    const event = await within(parked.promise, 10_000, 'the unhandled job parked');
    expect(event.id).toBe(orphan);
    expect(event.state).toBe('dead');
    expect(event.message).toMatch(
      /unhandled: no live worker had a handler for kind "uh\.nobody" on queue "uh" for more than 300 ms/,
    );
    expect(Date.now() - submittedAt).toBeGreaterThanOrEqual(300);
    const [dead] = await docket.listDeadLetters({ kind: 'uh.nobody' });
    expect(dead?.errors.at(-1)?.message).toBe(event.message);
    expect((await docket.getJob(served))?.state).toBe('pending');
    expect((await docket.getJob(served))?.attempts).toBe(0);
    // The worker sweeps only its own queues: jobs left pending on others by earlier tests stay.
    expect(parkedIds).toEqual([orphan]);
  });

  it('with unhandledAfterMs, parks a backlog nobody serves in batches of one round trip each, every job once', async () => {
    const docket = dockets.closeAfterTest(await Docket.open({ url: dockets.db.url, unhandledAfterMs: 200 }));
    docket.handle('uhb.known', async () => {});
    const writes = recordFailureWrites(docket.store);
    const parkedIds = new Set<string>();
    docket.events.on('parked', (event) => parkedIds.add(event.job.id));
    const total = 250;
    const submitted = await docket.submitMany(
      Array.from({ length: total }, (_, n) => ({ kind: 'uhb.nobody', queue: 'uhb', payload: { n } })),
    );
    const worker = docket.worker({ ...QUICK, queues: ['uhb'] });
    await worker.start();
    await expect.poll(() => parkedIds.size, { timeout: 20_000, interval: 50 }).toBe(total);
    await worker.stop();

    expect([...parkedIds].sort()).toEqual(submitted.map((job) => job.id).sort());
    expect(writes.singles()).toBe(0);
    // At most 100 a sweep (PARK_BATCH), each sweep's jobs of a kind in one round trip.
    expect(writes.batchSizes.reduce((sum, size) => sum + size, 0)).toBe(total);
    expect(Math.max(...writes.batchSizes)).toBeLessThanOrEqual(100);
    expect(writes.batchSizes.length).toBeLessThanOrEqual(Math.ceil(total / 100) + 2);
    expect(await docket.listDeadLetters({ kind: 'uhb.nobody', limit: 1000 })).toHaveLength(total);
  });

  it('keeps working when the registry cannot be written: the failure is an error event, never a crash', async () => {
    const real = await dockets.db.open();
    // Fault injection around the real store: every registry write fails.
    const faulty = new Proxy(real, {
      get(target, property, receiver) {
        if (property === 'workerRegister') return () => Promise.reject(new Error('registry table is locked'));
        const value = Reflect.get(target, property, receiver) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as Store;
    const docket = dockets.closeAfterTest(await Docket.open({ store: faulty }));
    const operations: string[] = [];
    docket.events.on('error', (event) => operations.push(event.operation));
    docket.handle('reg.fails', async () => {});
    const worker = docket.worker({ ...QUICK, queues: ['reg-fails'], registryTtlMs: 600 });
    await worker.start();
    expect(worker.isRunning).toBe(true);
    expect(operations).toContain('register');
    const { id } = await docket.submit({ kind: 'reg.fails', queue: 'reg-fails' });
    await within(nextCompleted(docket, id), 10_000, 'a job despite the registry failing');
    // Refreshes keep trying (every ttl/6) and keep being reported.
    await eventually(
      async () => operations.filter((op) => op === 'register').length,
      (count) => count >= 3,
      10_000,
      'repeated registry attempts',
    );
    await docket.close();
    await real.close();
  });

  it('registers remote workers: their kinds count as handled, built-in kinds never, and they expire', async () => {
    const docket = await open();
    await docket.submit({ kind: 'remote.kind', queue: 'remote-q' });
    expect(await docket.unhandledJobs()).toContainEqual({ queue: 'remote-q', kind: 'remote.kind', count: 1 });

    const record = await docket.registerRemoteWorker(
      { id: 'remote-1', kinds: ['remote.kind'], queues: ['remote-q'], version: 'client/1.2', concurrency: 4 },
      400,
    );
    expect(record).toMatchObject({
      id: 'remote-1',
      origin: 'remote',
      kinds: ['remote.kind'],
      excludeKinds: [WEBHOOK_KIND],
      pid: null,
      version: 'client/1.2',
      concurrency: 4,
    });
    expect((await docket.listWorkers()).map((w) => w.id)).toContain('remote-1');
    expect((await docket.unhandledJobs()).filter((entry) => entry.queue === 'remote-q')).toEqual([]);

    await expect(docket.registerRemoteWorker({ id: '' })).rejects.toThrow(ValidationError);
    await expect(docket.registerRemoteWorker({ id: 'r' }, 1)).rejects.toThrow(/ttlMs/);

    // Not refreshed: gone after its ttl, by the database clock, and the kind is unhandled again.
    await eventually(
      () => docket.listWorkers(),
      (workers) => !workers.some((w) => w.id === 'remote-1'),
      10_000,
      'the remote worker expiring',
    );
    expect(await docket.unhandledJobs()).toContainEqual({ queue: 'remote-q', kind: 'remote.kind', count: 1 });
  });
});
