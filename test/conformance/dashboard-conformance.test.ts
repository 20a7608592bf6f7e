/**
 * Dashboard conformance, run unchanged against every store kind: filtered job lists (id and
 * run-at ranges, payload equality, both orders, keyset pages), bounded per-queue counts (exact
 * below the bound, flagged estimates above it), the activity window (completions, parkings and
 * start lateness per bucket), and bulk actions applied by filter in batches (count, idempotent
 * repeat, index-walked batches). The contract is in src/store/store.ts.
 *
 * Isolation as in store-conformance.test.ts: each test in its own queue with pinned time; the
 * counts and activity tests, which read every queue, use a database of their own.
 */
import { describe, expect, it } from 'vitest';
import { LATENESS_BUCKET_COUNT, latenessBucketOf } from '../../src/job/activity.js';
import type { Job } from '../../src/job/job.js';
import { parsePayloadFilter } from '../../src/job/job-filter.js';
import type { Store } from '../../src/store/store.js';
import { conformanceStoreKinds } from '../support/stores.js';
import { PARK, spec, t, thrown, useConformanceDatabase } from './conformance-helpers.js';

const LEASE_MS = 30_000;

/** The ValidationError a call rejects with, as { field, message }. */
async function refusal(promise: Promise<unknown>): Promise<{ name: string; field: string }> {
  try {
    await promise;
  } catch (error) {
    const { name, field } = error as { name: string; field: string };
    return { name, field };
  }
  throw new Error('expected a refusal');
}

const ids = (jobs: readonly Job[]) => jobs.map((job) => Number(job.id));

describe.each(conformanceStoreKinds())('%s store: dashboard conformance', (storeKind) => {
  const { store, nextQueue, withFreshStore } = useConformanceDatabase(storeKind, 'dash');

  async function submitMany(queue: string, payloads: unknown[], runAt = t(1)): Promise<string[]> {
    const results = await store.jobSubmit({
      now: t(0),
      jobs: payloads.map((payload, i) =>
        spec({
          kind: i % 2 === 0 ? 'even' : 'odd',
          queue,
          payload: payload as never,
          runAt: new Date(runAt.getTime() + i * 1000),
        }),
      ),
    });
    return results.map((result) => result.id);
  }

  /** Claims and parks every due job of `queue`, one claim at a time. */
  async function parkAll(s: Store, queue: string, now: Date): Promise<void> {
    for (;;) {
      const [job] = await s.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [queue], now });
      if (!job) return;
      await s.jobFail({
        id: job.id,
        token: job.token,
        leaseOwner: job.leaseOwner,
        error: thrown('x'),
        decision: PARK,
        now,
      });
    }
  }

  describe('jobList filters', () => {
    it('filters by id range, run-at range and kind, together, in either order with keyset pages', async () => {
      const q = nextQueue();
      const made = (await submitMany(q, [1, 2, 3, 4, 5, 6, 7, 8])).map(Number);
      const idFrom = String(made[1]);
      const idTo = String(made[6]);
      const within = await store.jobList({ queue: q, idFrom, idTo });
      expect(ids(within)).toEqual(made.slice(1, 7));
      const byRunAt = await store.jobList({ queue: q, runAtFrom: t(3), runAtTo: t(6) });
      expect(ids(byRunAt)).toEqual(made.slice(2, 5));
      const evens = await store.jobList({ queue: q, kind: 'even', idFrom, idTo });
      expect(ids(evens)).toEqual([made[2], made[4], made[6]]);

      const desc = await store.jobList({ queue: q, order: 'desc', limit: 3 });
      expect(ids(desc)).toEqual([made[7], made[6], made[5]]);
      const next = await store.jobList({ queue: q, order: 'desc', limit: 3, afterId: desc.at(-1)!.id });
      expect(ids(next)).toEqual([made[4], made[3], made[2]]);
      const asc = await store.jobList({ queue: q, limit: 3, afterId: String(made[5]) });
      expect(ids(asc)).toEqual([made[6], made[7]]);
    });

    it('matches a payload path by JSON equality: numbers by value, never across types', async () => {
      const q = nextQueue();
      const made = await submitMany(q, [
        { customerId: 42 },
        { customerId: 42.0, extra: true },
        { customerId: '42' },
        { customer: { id: 7, tag: 'vip' } },
        { flag: true },
        { flag: 1 },
        { gone: null },
        'not an object',
      ]);
      const find = async (text: string) => ids(await store.jobList({ queue: q, payload: parsePayloadFilter(text) }));
      expect(await find('payload.customerId = 42')).toEqual([Number(made[0]), Number(made[1])]);
      expect(await find('payload.customerId = "42"')).toEqual([Number(made[2])]);
      expect(await find('payload.customer.tag = "vip"')).toEqual([Number(made[3])]);
      expect(await find('payload.customer.id = 7')).toEqual([Number(made[3])]);
      expect(await find('payload.flag = true')).toEqual([Number(made[4])]);
      expect(await find('payload.flag = 1')).toEqual([Number(made[5])]);
      expect(await find('payload.gone = null')).toEqual([Number(made[6])]);
      expect(await find('payload["customerId"] = 43')).toEqual([]);
    });

    it('treats a value that looks like SQL as plain data', async () => {
      const q = nextQueue();
      const made = await submitMany(q, [{ name: "x' OR '1'='1" }, { name: 'y' }]);
      const found = await store.jobList({ queue: q, payload: parsePayloadFilter(`payload.name = "x' OR '1'='1"`) });
      expect(ids(found)).toEqual([Number(made[0])]);
      expect(await store.jobList({ queue: q, payload: { path: ["a') OR 1=1 --"], value: 1 } })).toEqual([]);
    });

    it('lists dead letters with the same filters, and refuses inverted ranges and bad payload filters', async () => {
      const q = nextQueue();
      const made = await submitMany(q, [{ n: 1 }, { n: 2 }, { n: 3 }]);
      await parkAll(store, q, t(100));
      const dead = await store.deadLetterList({ queue: q, payload: parsePayloadFilter('payload.n = 2') });
      expect(ids(dead)).toEqual([Number(made[1])]);
      expect(ids(await store.deadLetterList({ queue: q, order: 'desc', limit: 2 }))).toEqual([
        Number(made[2]),
        Number(made[1]),
      ]);
      expect(ids(await store.jobList({ queue: q, states: ['dead'], idFrom: made[1] }))).toEqual([
        Number(made[1]),
        Number(made[2]),
      ]);
      expect(await refusal(store.jobList({ queue: q, idFrom: '9', idTo: '3' }))).toEqual({
        name: 'ValidationError',
        field: 'idTo',
      });
      expect(await refusal(store.jobList({ queue: q, payload: { path: [], value: 1 } }))).toMatchObject({
        field: 'payload.path',
      });
      expect(
        await refusal(store.jobList({ queue: q, payload: { path: ['a'], value: { no: 'objects' } as never } })),
      ).toMatchObject({ field: 'payload.value' });
    });
  });

  describe('queueCounts', () => {
    it('counts by queue and state exactly below the bound and flags estimates above it', async () => {
      await withFreshStore(async (fresh) => {
        await fresh.jobSubmit({
          now: t(0),
          jobs: [
            ...Array.from({ length: 30 }, () => spec({ kind: 'k', queue: 'big', runAt: t(1) })),
            ...Array.from({ length: 4 }, () => spec({ kind: 'k', queue: 'small', runAt: t(500) })),
            spec({ kind: 'k2', queue: 'small', runAt: t(1) }),
          ],
        });
        await fresh.jobClaim({ owner: 'w', limit: 2, leaseMs: LEASE_MS, queues: ['small'], now: t(10) });
        await parkAll(fresh, 'gone', t(10));
        await fresh.queuePause({ name: 'idle', now: t(10) });

        const exact = await fresh.queueCounts({ now: t(20) });
        expect(exact.map((row) => row.queue)).toEqual(['big', 'idle', 'small']);
        expect(exact.find((row) => row.queue === 'big')).toMatchObject({
          available: 30,
          scheduled: 0,
          running: 0,
          estimated: [],
        });
        expect(exact.find((row) => row.queue === 'idle')).toMatchObject({ paused: true, available: 0, estimated: [] });
        // One of the small queue's jobs was due and got claimed; the four future ones wait.
        expect(exact.find((row) => row.queue === 'small')).toMatchObject({ scheduled: 4, running: 1, available: 0 });

        const bounded = await fresh.queueCounts({ now: t(20), exactUpTo: 10 });
        const big = bounded.find((row) => row.queue === 'big');
        expect(big?.estimated).toEqual(expect.arrayContaining(['available']));
        // An estimate, but a sane one: of the right order, never a silent cut at the bound.
        expect(big?.available).toBeGreaterThan(10);
        expect(big?.available).toBeLessThan(300);
        expect(bounded.find((row) => row.queue === 'small')?.estimated).toEqual([]);
      });
    });
  });

  it('bounds due counts by kind when asked: at most exactUpTo per range, exact without it', async () => {
    const q = nextQueue();
    await store.jobSubmit({
      now: t(0),
      jobs: Array.from({ length: 10 }, () => spec({ kind: 'due.k', queue: q, runAt: t(1) })),
    });
    const exact = (await store.jobDueCountsByKind({ now: t(5) })).filter((row) => row.queue === q);
    expect(exact).toEqual([{ queue: q, kind: 'due.k', count: 10 }]);
    const bounded = (await store.jobDueCountsByKind({ now: t(5), exactUpTo: 3 })).filter((row) => row.queue === q);
    expect(bounded).toEqual([{ queue: q, kind: 'due.k', count: 3 }]);
  });

  describe('jobActivity', () => {
    it('counts completions, parkings and start lateness per bucket, every bucket present', async () => {
      await withFreshStore(async (fresh) => {
        await fresh.jobSubmit({
          now: t(0),
          jobs: [spec({ kind: 'k', queue: 'a', runAt: t(60) }), spec({ kind: 'k', queue: 'a', runAt: t(61) })],
        });
        // Claimed 2.5 s after its run time, completed in the second minute.
        const [first] = await fresh.jobClaim({
          owner: 'w',
          limit: 1,
          leaseMs: LEASE_MS,
          queues: ['a'],
          now: new Date(62_500),
        });
        await fresh.jobCompleteMany({ leases: [first!], now: t(70) });
        const [second] = await fresh.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: ['a'], now: t(130) });
        await fresh.jobFail({
          id: second!.id,
          token: second!.token,
          leaseOwner: second!.leaseOwner,
          error: thrown('x'),
          decision: PARK,
          now: t(131),
        });
        const buckets = await fresh.jobActivity({ from: t(0), to: t(180), bucketMs: 60_000 });
        expect(buckets.map((b) => [b.at.getTime(), b.completed, b.failed])).toEqual([
          [0, 0, 0],
          [60_000, 1, 0],
          [120_000, 0, 1],
        ]);
        const histogram = new Array<number>(LATENESS_BUCKET_COUNT).fill(0);
        histogram[latenessBucketOf(2500)] = 1;
        expect(buckets[1]?.latenessHistogram).toEqual(histogram);
        expect(await refusal(fresh.jobActivity({ from: t(0), to: t(10_000_000), bucketMs: 1000 }))).toMatchObject({
          field: 'to',
        });
      });
    });
  });

  describe('bulk actions by filter', () => {
    it('retries every matching dead letter in batches, and a repeat changes nothing', async () => {
      const q = nextQueue();
      const made = await submitMany(q, [{ c: 1 }, { c: 2 }, { c: 1 }, { c: 1 }, { c: 2 }]);
      await parkAll(store, q, t(100));
      const filter = { queue: q, payload: parsePayloadFilter('payload.c = 1') };
      expect(await store.jobCountMatching({ action: 'retry', filter })).toEqual({ count: 3, estimated: false });
      const first = await store.jobBulkApply({ action: 'retry', filter, limit: 2, now: t(200) });
      expect(first).toEqual({ scanned: 2, affected: 2, lastId: made[2] });
      const second = await store.jobBulkApply({
        action: 'retry',
        filter,
        limit: 2,
        afterId: first.lastId!,
        now: t(200),
      });
      expect(second).toEqual({ scanned: 1, affected: 1, lastId: made[3] });
      expect(ids(await store.jobList({ queue: q, states: ['pending'] }))).toEqual(
        [made[0], made[2], made[3]].map(Number),
      );
      expect(ids(await store.deadLetterList({ queue: q }))).toEqual([made[1], made[4]].map(Number));
      const retried = await store.jobGet({ id: made[0]! });
      expect(retried).toMatchObject({ state: 'pending', attempts: 0, runAt: t(200) });
      expect(await store.jobBulkApply({ action: 'retry', filter, limit: 2, now: t(201) })).toEqual({
        scanned: 0,
        affected: 0,
        lastId: null,
      });
    });

    it('cancels, reschedules and purges by filter, only in the states each acts on', async () => {
      const q = nextQueue();
      const made = await submitMany(q, [{}, {}, {}, {}]);
      await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(1) });
      const moved = await store.jobBulkApply({
        action: 'reschedule',
        filter: { queue: q },
        limit: 100,
        runAt: t(5000),
        now: t(2),
      });
      // The running job is not pending, so reschedule does not read it.
      expect(moved).toMatchObject({ scanned: 3, affected: 3 });
      expect((await store.jobGet({ id: made[1]! }))?.runAt).toEqual(t(5000));
      const cancelled = await store.jobBulkApply({
        action: 'cancel',
        filter: { queue: q, kind: 'even' },
        limit: 100,
        now: t(3),
      });
      expect(cancelled).toMatchObject({ scanned: 2, affected: 2 });
      expect((await store.jobGet({ id: made[0]! }))?.state).toBe('cancelled');
      expect(await store.jobCountMatching({ action: 'cancel', filter: { queue: q } })).toEqual({
        count: 2,
        estimated: false,
      });
      expect(
        await refusal(store.jobBulkApply({ action: 'retry', filter: { queue: q, states: ['pending'] }, limit: 10 })),
      ).toMatchObject({ field: 'filter.state' });
      expect(
        await refusal(store.jobBulkApply({ action: 'reschedule', filter: { queue: q }, limit: 10 })),
      ).toMatchObject({
        field: 'runAt',
      });
      expect(await refusal(store.jobBulkApply({ action: 'cancel', filter: { queue: q }, limit: 0 }))).toMatchObject({
        field: 'limit',
      });

      const p = nextQueue();
      await submitMany(p, [{}, {}, {}]);
      await parkAll(store, p, t(100));
      expect(await store.jobBulkApply({ action: 'purge', filter: { queue: p }, limit: 2 })).toMatchObject({
        scanned: 2,
        affected: 2,
      });
      expect(await store.deadLetterList({ queue: p })).toHaveLength(1);
    });

    it('pages and cancels pending and running jobs together in id order, each once, in small batches', async () => {
      // Even-numbered jobs due first and claimed (running), odd ones pending: the two states'
      // ids interleave, and PostgreSQL reads them through two indexes and merges them (decision 0018).
      const q = nextQueue();
      const results = await store.jobSubmit({
        now: t(0),
        jobs: Array.from({ length: 10 }, (_, i) =>
          spec({ kind: 'k', queue: q, runAt: i % 2 === 0 ? t(1) : t(100_000) }),
        ),
      });
      const made = results.map((result) => Number(result.id));
      const running = await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: t(2) });
      expect(running.map((job) => Number(job.id)).sort((a, b) => a - b)).toEqual(made.filter((_, i) => i % 2 === 0));

      for (const order of ['asc', 'desc'] as const) {
        const seen: number[] = [];
        let afterId: string | undefined;
        for (;;) {
          const page = await store.jobList({ queue: q, states: ['pending', 'running'], limit: 3, order, afterId });
          if (page.length === 0) break;
          seen.push(...ids(page));
          afterId = page.at(-1)!.id;
        }
        expect(seen, order).toEqual(order === 'asc' ? made : [...made].reverse());
      }
      expect(ids(await store.jobList({ queue: q, states: ['running'], order: 'desc', limit: 2 }))).toEqual([
        made[8],
        made[6],
      ]);

      const batches: { scanned: number; affected: number; lastId: string | null }[] = [];
      let afterId: string | undefined;
      for (;;) {
        const batch = await store.jobBulkApply({
          action: 'cancel',
          filter: { queue: q },
          limit: 3,
          afterId,
          now: t(3),
        });
        batches.push(batch);
        if (batch.scanned < 3) break;
        afterId = batch.lastId!;
      }
      expect(batches).toEqual([
        { scanned: 3, affected: 3, lastId: String(made[2]) },
        { scanned: 3, affected: 3, lastId: String(made[5]) },
        { scanned: 3, affected: 3, lastId: String(made[8]) },
        { scanned: 1, affected: 1, lastId: String(made[9]) },
      ]);
      const after = await store.jobList({ queue: q, limit: 100 });
      expect(after.map((job) => job.state)).toEqual(Array(10).fill('cancelled'));
    });

    it('retries dead letters that share an idempotency key, the first keeping the key', async () => {
      const q = nextQueue();
      const [a] = await store.jobSubmit({
        now: t(0),
        jobs: [spec({ kind: 'k', queue: q, idempotencyKey: 'same', runAt: t(1) })],
      });
      await parkAll(store, q, t(2));
      const [b] = await store.jobSubmit({
        now: t(3),
        jobs: [spec({ kind: 'k', queue: q, idempotencyKey: 'same', runAt: t(4) })],
      });
      await parkAll(store, q, t(5));
      const result = await store.jobBulkApply({ action: 'retry', filter: { queue: q }, limit: 10, now: t(6) });
      expect(result).toMatchObject({ scanned: 2, affected: 2 });
      expect((await store.jobGet({ id: a!.id }))?.idempotencyKey).toBe('same');
      expect((await store.jobGet({ id: b!.id }))?.idempotencyKey).toBeNull();
    });
  });

  it('records when each claim started, on the job and on each attempt error', async () => {
    const q = nextQueue();
    const [id] = await submitMany(q, [{}]);
    const [claim] = await store.jobClaim({ owner: 'w-1', limit: 1, leaseMs: 1000, queues: [q], now: t(10) });
    expect((await store.jobGet({ id: id! }))?.startedAt).toEqual(t(10));
    // The lease lapses; the next claim records the lapsed attempt with its claim's start and owner.
    await store.jobClaim({ owner: 'w-2', limit: 1, leaseMs: 1000, queues: [q], now: t(20) });
    const job = await store.jobGet({ id: id! });
    expect(job?.startedAt).toEqual(t(20));
    expect(job?.errors[0]).toMatchObject({
      attempt: 1,
      kind: 'lease_expired',
      startedAt: t(10),
      owner: claim!.leaseOwner,
    });
  });
});
