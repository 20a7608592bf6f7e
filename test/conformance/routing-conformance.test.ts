/**
 * Routing conformance, run unchanged against every store kind: kind-aware claims (a worker never
 * gets a kind it lacks, a foreign-kind job waits visibly and runs as soon as a worker with its
 * kind claims), the live worker registry, and idempotency keys scoped per (queue, kind) with
 * conflicts refused. The contract is in src/store/store.ts (KindFilter, jobSubmit, worker*).
 *
 * Isolation as in store-conformance.test.ts: every test works in its own queue with pinned time;
 * the registry tests, which list and expire every worker, get a database of their own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyConflictError, ValidationError } from '../../src/job/errors.js';
import { seededRandom } from '../../src/retry/random.js';
import type { Store, WorkerRegistration } from '../../src/store/store.js';
import { conformanceStoreKinds, createTestDatabase, type TestDatabase } from '../support/stores.js';
import { spec, submitOne, t, useConformanceDatabase } from './conformance-helpers.js';

const LEASE_MS = 30_000;

describe.each(conformanceStoreKinds())('%s store: routing conformance', (storeKind) => {
  const { store, nextQueue } = useConformanceDatabase(storeKind, 'route');

  /** Claims everything claimable in `queue` at `now` with the given kind filter, one claim at a time. */
  async function drain(queue: string, now: Date, filter: { kinds?: string[]; excludeKinds?: string[] }) {
    const claimed = [];
    for (;;) {
      const batch = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [queue], now, ...filter });
      if (batch.length === 0) return claimed;
      claimed.push(...batch);
    }
  }

  async function dueCountsIn(queue: string, now: Date) {
    return (await store.jobDueCountsByKind({ now })).filter((count) => count.queue === queue);
  }

  describe('kind-aware claims', () => {
    it('hands out exactly the best n by (priority, run_at, id) over random backlogs of every shape, claim after claim', async () => {
      // Shapes on both sides of each store's paths (decision 0026): one (kind, priority), fewer
      // than the claim's limit (merged), as many or more (PostgreSQL: ranked and bounded); some
      // rows not yet due, some kinds not claimed. Seeded: DOCKET_SEED replays a run.
      const seed = Number(process.env.DOCKET_SEED ?? Date.now() % 100_000);
      const random = seededRandom(seed);
      const pick = (n: number) => Math.floor(random() * n);
      for (let backlog = 0; backlog < 6; backlog += 1) {
        const q = nextQueue();
        const kinds = 1 + pick(backlog < 3 ? 4 : 40);
        const priorities = 1 + pick(4);
        const rows = 50 + pick(300);
        await store.jobSubmit({
          now: t(0),
          jobs: Array.from({ length: rows }, () =>
            spec({
              kind: `k${pick(kinds)}`,
              queue: q,
              priority: pick(priorities),
              // Mostly due by t(1), a tenth later; ties of run_at are common (then ordered by id).
              runAt: new Date(1000 + (random() < 0.1 ? 1 + pick(1000) : -pick(200))),
            }),
          ),
        });
        const claimedKinds = Array.from({ length: kinds }, (_, k) => `k${k}`).filter(() => random() < 0.8);
        const pending = await store.jobList({ queue: q, states: ['pending'], limit: 1000 });
        const due = pending
          .filter((job) => job.runAt.getTime() <= 1000 && claimedKinds.includes(job.kind))
          .sort(
            (a, b) =>
              a.priority - b.priority || a.runAt.getTime() - b.runAt.getTime() || Number(BigInt(a.id) - BigInt(b.id)),
          );
        for (let round = 0, taken = 0; round < 40; round += 1) {
          const limit = 1 + pick(random() < 0.5 ? 8 : 120);
          const jobs = await store.jobClaim({
            owner: 'w',
            limit,
            leaseMs: LEASE_MS,
            queues: [q],
            now: t(1),
            kinds: claimedKinds,
          });
          const expected = due.slice(taken, taken + limit).map((job) => job.id);
          expect(
            jobs.map((job) => job.id),
            `seed ${seed}, backlog ${backlog}, round ${round}, limit ${limit}`,
          ).toEqual(expected);
          taken += jobs.length;
          if (jobs.length === 0) break;
        }
      }
    });

    it('never hands out a kind outside `kinds`, and leaves the others pending', async () => {
      const q = nextQueue();
      await store.jobSubmit({
        now: t(0),
        jobs: ['a', 'b', 'c', 'a', 'b', 'c'].map((kind) => spec({ kind, queue: q, runAt: t(1) })),
      });
      const claimed = await drain(q, t(10), { kinds: ['a', 'c'] });
      expect(claimed.map((job) => job.kind).sort()).toEqual(['a', 'a', 'c', 'c']);
      const pending = await store.jobList({ queue: q, states: ['pending'] });
      expect(pending.map((job) => [job.kind, job.attempts])).toEqual([
        ['b', 0],
        ['b', 0],
      ]);
    });

    it('never hands out a kind in `excludeKinds`, alone or after `kinds`', async () => {
      const q = nextQueue();
      await store.jobSubmit({
        now: t(0),
        jobs: ['a', 'b', 'c'].map((kind) => spec({ kind, queue: q, runAt: t(1) })),
      });
      const excludingB = await store.jobClaim({
        owner: 'w',
        limit: 10,
        leaseMs: LEASE_MS,
        queues: [q],
        now: t(10),
        excludeKinds: ['b'],
      });
      expect(excludingB.map((job) => job.kind)).toEqual(['a', 'c']);

      const r = nextQueue();
      await store.jobSubmit({
        now: t(0),
        jobs: ['a', 'b', 'c'].map((kind) => spec({ kind, queue: r, runAt: t(1) })),
      });
      const both = await store.jobClaim({
        owner: 'w',
        limit: 10,
        leaseMs: LEASE_MS,
        queues: [r],
        now: t(10),
        kinds: ['a', 'b'],
        excludeKinds: ['b'],
      });
      expect(both.map((job) => job.kind)).toEqual(['a']);
    });

    it('claims nothing and writes nothing with kinds: []', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'a', queue: q, runAt: t(1) }, t(0));
      const claimed = await store.jobClaim({
        owner: 'w',
        limit: 10,
        leaseMs: LEASE_MS,
        queues: [q],
        now: t(10),
        kinds: [],
      });
      expect(claimed).toEqual([]);
      expect(await store.jobNextRunAt({ queues: [q], now: t(10), kinds: [] })).toBeNull();
      expect(await store.jobGet({ id })).toMatchObject({ state: 'pending', attempts: 0, token: 0 });
    });

    it('keeps a foreign-kind job pending and counts it as due by queue and kind', async () => {
      const q = nextQueue();
      await store.jobSubmit({
        now: t(0),
        jobs: [
          spec({ kind: 'report.build', queue: q, runAt: t(1) }),
          spec({ kind: 'report.build', queue: q, runAt: t(2), priority: 3 }),
          spec({ kind: 'report.build', queue: q, runAt: t(500) }),
          spec({ kind: 'email.send', queue: q, runAt: t(1) }),
        ],
      });
      const claimed = await drain(q, t(10), { kinds: ['email.send'] });
      expect(claimed.map((job) => job.kind)).toEqual(['email.send']);
      const waiting = await store.jobList({ queue: q, kind: 'report.build' });
      expect(waiting.map((job) => [job.state, job.attempts])).toEqual([
        ['pending', 0],
        ['pending', 0],
        ['pending', 0],
      ]);
      // Two due (of two priorities); the future one is not due; the claimed email is running.
      expect(await dueCountsIn(q, t(10))).toEqual([{ queue: q, kind: 'report.build', count: 2 }]);
      // Later the third is due too, and the email's lease (30 s from t(10)) has lapsed: due again.
      expect(await dueCountsIn(q, t(600))).toEqual([
        { queue: q, kind: 'email.send', count: 1 },
        { queue: q, kind: 'report.build', count: 3 },
      ]);
    });

    it('counts lapsed running jobs as due, and leaves paused queues out of the due counts', async () => {
      const q = nextQueue();
      await submitOne(store, { kind: 'a', queue: q, runAt: t(1) }, t(0));
      await submitOne(store, { kind: 'b', queue: q, runAt: t(1) }, t(0));
      await store.jobClaim({ owner: 'w', limit: 1, leaseMs: 5_000, queues: [q], now: t(10), kinds: ['a'] });
      expect(await dueCountsIn(q, t(11))).toEqual([{ queue: q, kind: 'b', count: 1 }]);
      // The lease of `a` lapsed at t(15): available again, so due again.
      expect(await dueCountsIn(q, t(20))).toEqual([
        { queue: q, kind: 'a', count: 1 },
        { queue: q, kind: 'b', count: 1 },
      ]);
      await store.queuePause({ name: q, now: t(20) });
      expect(await dueCountsIn(q, t(20))).toEqual([]);
      await store.queueResume({ name: q, now: t(21) });
      expect(await dueCountsIn(q, t(21))).toHaveLength(2);
    });

    it('orders due counts by queue, then kind', async () => {
      const q = nextQueue();
      await store.jobSubmit({
        now: t(0),
        jobs: [
          spec({ kind: 'zeta', queue: `${q}_b`, runAt: t(1) }),
          spec({ kind: 'beta', queue: `${q}_a`, runAt: t(1) }),
          spec({ kind: 'alpha', queue: `${q}_b`, runAt: t(1) }),
          spec({ kind: 'alpha', queue: `${q}_b`, runAt: t(1), priority: 9 }),
        ],
      });
      const counts = (await store.jobDueCountsByKind({ now: t(5) })).filter((count) => count.queue.startsWith(`${q}_`));
      expect(counts).toEqual([
        { queue: `${q}_a`, kind: 'beta', count: 1 },
        { queue: `${q}_b`, kind: 'alpha', count: 2 },
        { queue: `${q}_b`, kind: 'zeta', count: 1 },
      ]);
    });

    it('leaves foreign kinds out of next-run-at', async () => {
      const q = nextQueue();
      await store.jobSubmit({
        now: t(0),
        jobs: [spec({ kind: 'foreign', queue: q, runAt: t(5) }), spec({ kind: 'mine', queue: q, runAt: t(50) })],
      });
      expect(await store.jobNextRunAt({ queues: [q], now: t(1) })).toEqual(t(5));
      expect(await store.jobNextRunAt({ queues: [q], now: t(1), kinds: ['mine'] })).toEqual(t(50));
      expect(await store.jobNextRunAt({ queues: [q], now: t(1), excludeKinds: ['mine'] })).toEqual(t(5));
      expect(await store.jobNextRunAt({ queues: [q], now: t(1), kinds: ['other'] })).toBeNull();
      // A lapsing lease of a foreign kind does not wake this worker either.
      const r = nextQueue();
      await submitOne(store, { kind: 'foreign', queue: r, runAt: t(1) }, t(0));
      await store.jobClaim({ owner: 'w', limit: 1, leaseMs: 5_000, queues: [r], now: t(2) });
      expect(await store.jobNextRunAt({ queues: [r], now: t(3) })).toEqual(t(7));
      expect(await store.jobNextRunAt({ queues: [r], now: t(3), kinds: ['mine'] })).toBeNull();
    });

    it('hands a waiting job to the first claim that names its kind, at once', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'new.kind', queue: q, runAt: t(1) }, t(0));
      expect(await drain(q, t(10), { kinds: ['old.kind'] })).toEqual([]);
      const [claimed] = await store.jobClaim({
        owner: 'new-worker',
        limit: 1,
        leaseMs: LEASE_MS,
        queues: [q],
        now: t(10),
        kinds: ['old.kind', 'new.kind'],
      });
      expect(claimed).toMatchObject({ id, kind: 'new.kind', attempts: 1, leaseOwner: 'new-worker' });
    });

    it('keeps claim order (priority, run_at, id) across kinds', async () => {
      const q = nextQueue();
      const results = await store.jobSubmit({
        now: t(0),
        jobs: [
          spec({ kind: 'b', queue: q, runAt: t(3), priority: 1 }),
          spec({ kind: 'a', queue: q, runAt: t(4), priority: 0 }),
          spec({ kind: 'c', queue: q, runAt: t(1), priority: 2 }),
          spec({ kind: 'a', queue: q, runAt: t(2), priority: 1 }),
          spec({ kind: 'b', queue: q, runAt: t(2), priority: 1 }),
          spec({ kind: 'x', queue: q, runAt: t(0), priority: -5 }),
        ],
      });
      const ids = results.map((result) => result.id);
      const claimed = await store.jobClaim({
        owner: 'w',
        limit: 4,
        leaseMs: LEASE_MS,
        queues: [q],
        now: t(10),
        kinds: ['a', 'b', 'c'],
      });
      // x (foreign) would rank first; then a@0, then priority 1 by run_at then id, and c is cut by the limit.
      expect(claimed.map((job) => job.id)).toEqual([ids[1], ids[3], ids[4], ids[0]]);
      const rest = await store.jobClaim({ owner: 'w', limit: 4, leaseMs: LEASE_MS, queues: [q], now: t(10) });
      expect(rest.map((job) => job.id)).toEqual([ids[5], ids[2]]);
    });

    it('re-claims a lapsed lease only for a claim whose kinds include it', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'a', queue: q, runAt: t(1) }, t(0));
      await store.jobClaim({ owner: 'w1', limit: 1, leaseMs: 5_000, queues: [q], now: t(2), kinds: ['a'] });
      // Lapsed at t(7).
      expect(await drain(q, t(20), { kinds: ['b'] })).toEqual([]);
      expect(await drain(q, t(20), { excludeKinds: ['a'] })).toEqual([]);
      expect(await store.jobGet({ id })).toMatchObject({ state: 'running', attempts: 1, leaseOwner: 'w1' });
      const [again] = await store.jobClaim({
        owner: 'w2',
        limit: 1,
        leaseMs: 5_000,
        queues: [q],
        now: t(20),
        kinds: ['a'],
      });
      expect(again).toMatchObject({ id, attempts: 2, leaseOwner: 'w2' });
      expect(again!.errors.map((error) => error.kind)).toEqual(['lease_expired']);
    });

    it('parks an exhausted lapsed job whatever the claim’s kinds (parking hands nothing out)', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'a', queue: q, runAt: t(1), maxAttempts: 1 }, t(0));
      await store.jobClaim({ owner: 'w1', limit: 1, leaseMs: 5_000, queues: [q], now: t(2), kinds: ['a'] });
      const claimed = await store.jobClaim({
        owner: 'w2',
        limit: 1,
        leaseMs: 5_000,
        queues: [q],
        now: t(20),
        kinds: ['b'],
      });
      expect(claimed).toEqual([]);
      expect(await store.jobGet({ id })).toMatchObject({ state: 'dead', attempts: 1 });
    });
  });

  describe('idempotency keys, scoped per queue and kind', () => {
    it('creates a new job for the same key in another kind or another queue', async () => {
      const q = nextQueue();
      const key = `${q}-order-42`;
      const email = await submitOne(store, { kind: 'email.send', queue: q, idempotencyKey: key, runAt: t(1) }, t(0));
      const [invoice] = await store.jobSubmit({
        now: t(0),
        jobs: [spec({ kind: 'invoice.build', queue: q, idempotencyKey: key, runAt: t(1) })],
      });
      const [billing] = await store.jobSubmit({
        now: t(0),
        jobs: [spec({ kind: 'email.send', queue: `${q}_billing`, idempotencyKey: key, runAt: t(1) })],
      });
      expect(invoice).toMatchObject({ created: true });
      expect(billing).toMatchObject({ created: true });
      expect(new Set([email, invoice!.id, billing!.id]).size).toBe(3);
      const jobs = [...(await store.jobList({ queue: q })), ...(await store.jobList({ queue: `${q}_billing` }))];
      expect(jobs.map((job) => [job.queue, job.kind, job.idempotencyKey])).toEqual([
        [q, 'email.send', key],
        [q, 'invoice.build', key],
        [`${q}_billing`, 'email.send', key],
      ]);
    });

    it('answers a repeat with an equal payload (key order aside) with the live job', async () => {
      const q = nextQueue();
      const key = `${q}-k`;
      const id = await submitOne(
        store,
        { kind: 'k', queue: q, idempotencyKey: key, payload: { a: 1, b: [1, { c: 'x', d: null }] }, runAt: t(5) },
        t(0),
      );
      const [again] = await store.jobSubmit({
        now: t(1),
        jobs: [spec({ kind: 'k', queue: q, idempotencyKey: key, payload: { b: [1, { d: null, c: 'x' }], a: 1 } })],
      });
      expect(again).toEqual({ id, created: false, runAt: t(5) });
      expect(await store.jobList({ queue: q })).toHaveLength(1);
    });

    it('refuses a repeat with a different payload with IdempotencyConflictError, writing nothing', async () => {
      const q = nextQueue();
      const key = `${q}-k`;
      const id = await submitOne(store, { kind: 'k', queue: q, idempotencyKey: key, payload: { amount: 10 } }, t(0));
      const error = await store
        .jobSubmit({ now: t(1), jobs: [spec({ kind: 'k', queue: q, idempotencyKey: key, payload: { amount: 11 } })] })
        .then(
          () => null,
          (caught: unknown) => caught,
        );
      expect(error).toBeInstanceOf(IdempotencyConflictError);
      expect(error).toMatchObject({ field: 'idempotencyKey', existingId: id, code: 'idempotency_conflict' });
      const jobs = await store.jobList({ queue: q });
      expect(jobs.map((job) => [job.id, job.payload])).toEqual([[id, { amount: 10 }]]);
      // Array order is part of the value.
      const r = nextQueue();
      await submitOne(store, { kind: 'k', queue: r, idempotencyKey: key, payload: [1, 2] }, t(0));
      await expect(
        store.jobSubmit({ now: t(1), jobs: [spec({ kind: 'k', queue: r, idempotencyKey: key, payload: [2, 1] })] }),
      ).rejects.toBeInstanceOf(IdempotencyConflictError);
    });

    it('also refuses a conflicting repeat of a running job', async () => {
      const q = nextQueue();
      const key = `${q}-k`;
      const id = await submitOne(store, { kind: 'k', queue: q, idempotencyKey: key, payload: 1, runAt: t(1) }, t(0));
      await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(2) });
      await expect(
        store.jobSubmit({ now: t(3), jobs: [spec({ kind: 'k', queue: q, idempotencyKey: key, payload: 2 })] }),
      ).rejects.toMatchObject({ field: 'idempotencyKey', existingId: id });
      const [same] = await store.jobSubmit({
        now: t(3),
        jobs: [spec({ kind: 'k', queue: q, idempotencyKey: key, payload: 1 })],
      });
      expect(same).toMatchObject({ id, created: false });
    });

    it('writes nothing of a batch in which one key conflicts, and names its position', async () => {
      const q = nextQueue();
      const key = `${q}-k`;
      const id = await submitOne(store, { kind: 'k', queue: q, idempotencyKey: key, payload: 'old' }, t(0));
      await expect(
        store.jobSubmit({
          now: t(1),
          jobs: [
            spec({ kind: 'k', queue: q, payload: 'fresh-1' }),
            spec({ kind: 'k', queue: q, idempotencyKey: `${q}-other`, payload: 'fresh-2' }),
            spec({ kind: 'k', queue: q, idempotencyKey: key, payload: 'new' }),
            spec({ kind: 'k', queue: q, payload: 'fresh-3' }),
          ],
        }),
      ).rejects.toMatchObject({ name: 'IdempotencyConflictError', field: 'jobs[2].idempotencyKey', existingId: id });
      const jobs = await store.jobList({ queue: q });
      expect(jobs.map((job) => job.payload)).toEqual(['old']);
      // The batch's other key was not taken by the rolled-back batch.
      const [other] = await store.jobSubmit({
        now: t(2),
        jobs: [spec({ kind: 'k', queue: q, idempotencyKey: `${q}-other`, payload: 'later' })],
      });
      expect(other).toMatchObject({ created: true });
    });

    it('maps a key repeated in one batch to one job, and refuses a repeat with another payload', async () => {
      const q = nextQueue();
      const key = `${q}-k`;
      const results = await store.jobSubmit({
        now: t(0),
        jobs: [
          spec({ kind: 'k', queue: q, idempotencyKey: key, payload: { x: 1, y: 2 }, runAt: t(5) }),
          spec({ kind: 'k', queue: q, idempotencyKey: key, payload: { y: 2, x: 1 }, runAt: t(9) }),
          // Same key, other kind: its own job.
          spec({ kind: 'other', queue: q, idempotencyKey: key, payload: 'z' }),
        ],
      });
      expect(results.map((result) => result.created)).toEqual([true, false, true]);
      expect(results[1]).toEqual({ id: results[0]!.id, created: false, runAt: t(5) });
      expect(await store.jobList({ queue: q })).toHaveLength(2);

      const r = nextQueue();
      await expect(
        store.jobSubmit({
          now: t(0),
          jobs: [
            spec({ kind: 'k', queue: r, idempotencyKey: key, payload: 1 }),
            spec({ kind: 'k', queue: r, payload: 'unkeyed' }),
            spec({ kind: 'k', queue: r, idempotencyKey: key, payload: 2 }),
          ],
        }),
      ).rejects.toMatchObject({ name: 'IdempotencyConflictError', field: 'jobs[2].idempotencyKey', existingId: '' });
      expect(await store.jobList({ queue: r })).toEqual([]);
    });

    it('frees a key once its job is done or cancelled, for any payload', async () => {
      const q = nextQueue();
      const key = `${q}-k`;
      const first = await submitOne(store, { kind: 'k', queue: q, idempotencyKey: key, payload: 1, runAt: t(1) }, t(0));
      const [claimed] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(2) });
      expect(await store.jobComplete({ id: first, token: claimed!.token, now: t(3) })).toBe('done');
      const second = await submitOne(store, { kind: 'k', queue: q, idempotencyKey: key, payload: 2 }, t(4));
      expect(second).not.toBe(first);
      expect(await store.jobCancel({ id: second, now: t(5) })).toBe('cancelled');
      const third = await submitOne(store, { kind: 'k', queue: q, idempotencyKey: key, payload: 3 }, t(6));
      expect(new Set([first, second, third]).size).toBe(3);
    });
  });

  describe('worker registry', () => {
    let registryDb: TestDatabase;
    let registry: Store;

    beforeAll(async () => {
      registryDb = await createTestDatabase(storeKind);
      registry = await registryDb.open();
    });

    afterAll(async () => {
      await registry?.close();
      await registryDb?.drop();
    });

    const local: WorkerRegistration = {
      id: 'w-local',
      host: 'host-a',
      pid: 4242,
      version: '1.2.3',
      queues: ['default', 'billing'],
      kinds: ['email.send', 'invoice.build'],
      excludeKinds: [],
      concurrency: 8,
      origin: 'local',
    };
    const remote: WorkerRegistration = {
      id: 'w-remote',
      host: '',
      pid: null,
      version: '',
      queues: null,
      kinds: null,
      excludeKinds: ['docket.webhook'],
      concurrency: 1,
      origin: 'remote',
    };

    it('registers, refreshes (keeping startedAt), lists by id, expires and deregisters, by the pinned clock', async () => {
      const registered = await registry.workerRegister({ worker: local, ttlMs: 30_000, now: t(100) });
      expect(registered).toEqual({ ...local, startedAt: t(100), lastSeenAt: t(100), expiresAt: t(130) });
      await registry.workerRegister({ worker: remote, ttlMs: 10_000, now: t(105) });
      expect((await registry.workerList({ now: t(110) })).map((worker) => worker.id)).toEqual(['w-local', 'w-remote']);

      // A heartbeat while live keeps startedAt and moves lastSeenAt and expiresAt; fields may change.
      const refreshed = await registry.workerRegister({
        worker: { ...local, concurrency: 4, kinds: ['email.send'] },
        ttlMs: 30_000,
        now: t(120),
      });
      expect(refreshed).toMatchObject({ startedAt: t(100), lastSeenAt: t(120), expiresAt: t(150), concurrency: 4 });
      expect(refreshed.kinds).toEqual(['email.send']);

      // w-remote expired at t(115): not listed, and its row is gone.
      const listed = await registry.workerList({ now: t(125) });
      expect(listed.map((worker) => worker.id)).toEqual(['w-local']);
      expect(listed[0]).toEqual(refreshed);
      expect(await registry.workerDeregister({ id: 'w-remote' })).toBe(false);

      // Coming back after expiry counts as a new start.
      const back = await registry.workerRegister({ worker: local, ttlMs: 30_000, now: t(200) });
      expect(back).toMatchObject({ startedAt: t(200), lastSeenAt: t(200), expiresAt: t(230) });

      expect(await registry.workerDeregister({ id: 'w-local' })).toBe(true);
      expect(await registry.workerDeregister({ id: 'w-local' })).toBe(false);
      expect(await registry.workerList({ now: t(201) })).toEqual([]);
    });

    it('round-trips every field: null queues and kinds, excludeKinds, null pid, origin', async () => {
      await registry.workerRegister({ worker: remote, ttlMs: 60_000, now: t(1000) });
      await registry.workerRegister({
        worker: { ...local, id: 'w-empty', queues: [], kinds: [] },
        ttlMs: 60_000,
        now: t(1000),
      });
      const listed = await registry.workerList({ now: t(1001) });
      expect(listed).toEqual([
        { ...local, id: 'w-empty', queues: [], kinds: [], startedAt: t(1000), lastSeenAt: t(1000), expiresAt: t(1060) },
        { ...remote, startedAt: t(1000), lastSeenAt: t(1000), expiresAt: t(1060) },
      ]);
      await registry.workerDeregister({ id: 'w-remote' });
      await registry.workerDeregister({ id: 'w-empty' });
    });

    it('uses the database clock when no instant is pinned', async () => {
      const before = Date.now();
      const record = await registry.workerRegister({ worker: { ...local, id: 'w-clock' }, ttlMs: 5_000 });
      const after = Date.now();
      // Between the process clock's readings around the call, with 2 s for clock skew: a stall of a
      // loaded machine during the call widens the window rather than failing the test.
      expect(record.lastSeenAt.getTime()).toBeGreaterThan(before - 2_000);
      expect(record.lastSeenAt.getTime()).toBeLessThan(after + 2_000);
      expect(record.expiresAt.getTime() - record.lastSeenAt.getTime()).toBe(5_000);
      expect((await registry.workerList()).map((worker) => worker.id)).toContain('w-clock');
      await registry.workerDeregister({ id: 'w-clock' });
    });

    it('refuses a bad registration with a ValidationError naming the field, writing nothing', async () => {
      const cases: [Partial<Record<keyof WorkerRegistration, unknown>>, number, string][] = [
        [{ id: '' }, 1000, 'worker.id'],
        [{ kinds: ['ok', 7] }, 1000, 'worker.kinds[1]'],
        [{ queues: ['bad queue!'] }, 1000, 'worker.queues[0]'],
        [{ excludeKinds: null }, 1000, 'worker.excludeKinds'],
        [{ concurrency: -1 }, 1000, 'worker.concurrency'],
        [{ origin: 'elsewhere' }, 1000, 'worker.origin'],
        [{ pid: 1.5 }, 1000, 'worker.pid'],
        [{}, 0, 'ttlMs'],
      ];
      for (const [override, ttlMs, field] of cases) {
        const worker = { ...local, id: 'w-bad', ...override } as WorkerRegistration;
        const error = await registry.workerRegister({ worker, ttlMs, now: t(5000) }).then(
          () => null,
          (caught: unknown) => caught,
        );
        expect(error, field).toBeInstanceOf(ValidationError);
        expect((error as ValidationError).field).toBe(field);
      }
      expect(await registry.workerList({ now: t(5000) })).toEqual([]);
    });
  });
});
