/**
 * The Store conformance suite: one behavioural suite, run unchanged against every store kind, that
 * checks each method and invariant in the header of src/store/store.ts.
 *
 * Isolation: each kind gets one database (a PostgreSQL schema or a SQLite file) and every test
 * works in its own queue, so tests never see each other's jobs. The few operations that act on the
 * whole database (purge by time, prune, claims without a queue filter, "nothing left") get a fresh
 * database of their own. Time is pinned (`t(100)` is 100 s after the epoch) wherever the outcome
 * depends on it, so every lease and due time is exact; the database clock is used only where the
 * test is about the database clock.
 */
import { describe, expect, it } from 'vitest';
import type { Job } from '../../src/job/job.js';
import { DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_POLICY } from '../../src/job/job-spec.js';
import type { Store, WakeUp } from '../../src/store/store.js';
import { conformanceStoreKinds } from '../support/stores.js';
import {
  PARK,
  retryIn,
  spec,
  submitOne,
  t,
  thrown,
  useConformanceDatabase,
  withTimeout,
} from './conformance-helpers.js';

const LEASE_MS = 30_000;
const UNKNOWN_ID = '987654321';

describe.each(conformanceStoreKinds())('%s store conformance', (kind) => {
  const { store, nextQueue, withFreshStore, openAnother } = useConformanceDatabase(kind, 'conf');

  async function mustGet(id: string): Promise<Job> {
    const job = await store.jobGet({ id });
    if (!job) throw new Error(`jobGet(${id}) returned null for a job that should exist`);
    return job;
  }

  /** Claims exactly one job from `queue` at `now`, failing with the store's answer otherwise. */
  async function claimOne(queue: string, now: Date, owner = 'worker-1', leaseMs = LEASE_MS) {
    const claimed = await store.jobClaim({ owner, limit: 1, leaseMs, queues: [queue], now });
    expect(claimed, `claim in ${queue} at ${now.toISOString()}`).toHaveLength(1);
    return claimed[0]!;
  }

  it('reports its capabilities as booleans', () => {
    expect(typeof store.capabilities.listenNotify).toBe('boolean');
    expect(typeof store.capabilities.skipLocked).toBe('boolean');
    expect(typeof store.capabilities.callerTransactions).toBe('boolean');
  });

  it('reads a database clock close to the process clock', async () => {
    const before = Date.now();
    const now = await store.now();
    const after = Date.now();
    expect(now).toBeInstanceOf(Date);
    expect(now.getTime()).toBeGreaterThan(before - 2000);
    expect(now.getTime()).toBeLessThan(after + 2000);
  });

  describe('jobSubmit', () => {
    it('writes a batch and answers in input order with string ids', async () => {
      const q = nextQueue();
      const results = await store.jobSubmit({
        now: t(0),
        jobs: [
          spec({ kind: 'conf.a', queue: q, payload: { n: 1 }, runAt: t(10) }),
          spec({ kind: 'conf.b', queue: q, payload: [1, 'two', null], runAt: t(30), priority: 3, maxAttempts: 7 }),
          spec({ kind: 'conf.c', queue: q, runAt: t(20), retry: { baseDelayMs: 500 }, timeoutMs: 9000 }),
        ],
      });
      expect(results).toHaveLength(3);
      expect(results.map((r) => r.created)).toEqual([true, true, true]);
      expect(results.map((r) => typeof r.id)).toEqual(['string', 'string', 'string']);
      expect(new Set(results.map((r) => r.id)).size).toBe(3);
      expect(results.map((r) => r.runAt)).toEqual([t(10), t(30), t(20)]);

      const [a, b, c] = await Promise.all(results.map((r) => mustGet(r.id)));
      expect(a).toMatchObject({
        id: results[0]!.id,
        kind: 'conf.a',
        queue: q,
        payload: { n: 1 },
        priority: 0,
        state: 'pending',
        runAt: t(10),
        leaseUntil: null,
        leaseOwner: null,
        token: 0,
        attempts: 0,
        maxAttempts: 5,
        retryPolicy: DEFAULT_RETRY_POLICY,
        errors: [],
        idempotencyKey: null,
        timeoutMs: null,
        scheduleId: null,
        scheduleSlot: null,
        finishedAt: null,
      });
      expect(a!.createdAt).toBeInstanceOf(Date);
      expect(b).toMatchObject({ kind: 'conf.b', payload: [1, 'two', null], priority: 3, maxAttempts: 7, runAt: t(30) });
      expect(c).toMatchObject({
        kind: 'conf.c',
        payload: null,
        timeoutMs: 9000,
        retryPolicy: { ...DEFAULT_RETRY_POLICY, baseDelayMs: 500 },
      });
    });

    it('stores each job its own retry policy when a batch mixes them, with and without reserved ids and keys', async () => {
      // The submit statements bind every column as one array per batch (PostgreSQL, with one
      // serialisation per run of shared policy objects): interleaved, repeated and
      // equal-but-separate policy objects must still land on their own jobs, on every path.
      const slow = { baseDelayMs: 5000, factor: 3 };
      const fast = { baseDelayMs: 10 };
      const specs = (q: string, keyed: boolean) =>
        [{ retry: slow }, {}, { retry: fast }, { retry: { ...slow } }, {}, { retry: fast }].map((extra, n) =>
          spec({
            kind: 'conf.policy',
            queue: q,
            payload: { n },
            ...extra,
            ...(keyed ? { idempotencyKey: `k${n}` } : {}),
          }),
        );
      const expected = [
        { ...DEFAULT_RETRY_POLICY, ...slow },
        DEFAULT_RETRY_POLICY,
        { ...DEFAULT_RETRY_POLICY, ...fast },
        { ...DEFAULT_RETRY_POLICY, ...slow },
        DEFAULT_RETRY_POLICY,
        { ...DEFAULT_RETRY_POLICY, ...fast },
      ];
      for (const keyed of [false, true]) {
        for (const reserved of store.capabilities.reservableJobIds ? [false, true] : [false]) {
          const q = nextQueue();
          const jobs = specs(q, keyed);
          const ids = reserved ? await store.jobReserveIds({ count: jobs.length }) : undefined;
          const results = await store.jobSubmit({ jobs, ...(ids ? { ids } : {}) });
          const stored = await Promise.all(results.map((r) => mustGet(r.id)));
          expect(
            stored.map((job) => job!.retryPolicy),
            `keyed ${keyed}, reserved ${reserved}`,
          ).toEqual(expected);
          expect(stored.map((job) => job!.payload)).toEqual(jobs.map((_, n) => ({ n })));
        }
      }
    });

    it('resolves delayMs against the pinned now', async () => {
      const q = nextQueue();
      const [result] = await store.jobSubmit({
        now: t(50),
        jobs: [spec({ kind: 'conf.delay', queue: q, delayMs: 5000 })],
      });
      expect(result!.runAt).toEqual(t(55));
      expect((await mustGet(result!.id)).runAt).toEqual(t(55));
    });

    it('resolves delayMs and a missing runAt against the database clock when now is not pinned', async () => {
      const q = nextQueue();
      const before = (await store.now()).getTime();
      const results = await store.jobSubmit({
        jobs: [spec({ kind: 'conf.delay', queue: q, delayMs: 60_000 }), spec({ kind: 'conf.asap', queue: q })],
      });
      const after = (await store.now()).getTime();
      const [delayed, asap] = results.map((r) => r.runAt.getTime());
      // 1 ms slack: PostgreSQL keeps microseconds, which JS Dates round to milliseconds.
      expect(delayed).toBeGreaterThanOrEqual(before + 60_000 - 1);
      expect(delayed).toBeLessThanOrEqual(after + 60_000 + 1);
      expect(asap).toBeGreaterThanOrEqual(before - 1);
      expect(asap).toBeLessThanOrEqual(after + 1);
    });

    it('keeps an explicit runAt exactly, whatever the clock says', async () => {
      const q = nextQueue();
      const runAt = new Date(Date.UTC(2031, 4, 6, 7, 8, 9, 123));
      const [result] = await store.jobSubmit({ jobs: [spec({ kind: 'conf.at', queue: q, runAt })] });
      expect(result!.runAt).toEqual(runAt);
      expect((await mustGet(result!.id)).runAt).toEqual(runAt);
    });

    it('returns the live job for a repeated idempotency key (same queue, kind, payload) and writes nothing', async () => {
      const q = nextQueue();
      const first = await store.jobSubmit({
        now: t(0),
        jobs: [spec({ kind: 'conf.idem', queue: q, payload: { v: 1 }, runAt: t(10), idempotencyKey: `${q}-k` })],
      });
      // Only the payload must agree: the repeat's other options (here its runAt) are not compared.
      const again = await store.jobSubmit({
        now: t(1),
        jobs: [spec({ kind: 'conf.idem', queue: q, payload: { v: 1 }, runAt: t(99), idempotencyKey: `${q}-k` })],
      });
      expect(again[0]).toEqual({ id: first[0]!.id, created: false, runAt: t(10) });
      const jobs = await store.jobList({ queue: q });
      expect(jobs).toHaveLength(1);
      expect(jobs[0]).toMatchObject({ payload: { v: 1 }, runAt: t(10), idempotencyKey: `${q}-k` });
    });

    it('also matches an idempotency key whose job is running', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.idem', queue: q, runAt: t(10), idempotencyKey: `${q}-k` }, t(0));
      await claimOne(q, t(10));
      const [again] = await store.jobSubmit({
        now: t(11),
        jobs: [spec({ kind: 'conf.idem', queue: q, idempotencyKey: `${q}-k` })],
      });
      expect(again).toMatchObject({ id, created: false });
      expect(await store.jobList({ queue: q })).toHaveLength(1);
    });

    it('frees an idempotency key once its job is done', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.idem', queue: q, runAt: t(10), idempotencyKey: `${q}-k` }, t(0));
      const claimed = await claimOne(q, t(10));
      expect(await store.jobComplete({ id, token: claimed.token, now: t(11) })).toBe('done');
      const [again] = await store.jobSubmit({
        now: t(12),
        jobs: [spec({ kind: 'conf.idem', queue: q, idempotencyKey: `${q}-k` })],
      });
      expect(again!.created).toBe(true);
      expect(again!.id).not.toBe(id);
      expect(await store.jobList({ queue: q, states: ['pending'] })).toHaveLength(1);
    });

    it('gives a key repeated inside one batch the first job of the batch', async () => {
      const q = nextQueue();
      const results = await store.jobSubmit({
        now: t(0),
        jobs: [
          spec({ kind: 'conf.idem', queue: q, payload: 'first', runAt: t(5), idempotencyKey: `${q}-k` }),
          spec({ kind: 'conf.other', queue: q, payload: 'other', runAt: t(6) }),
          spec({ kind: 'conf.idem', queue: q, payload: 'first', runAt: t(7), idempotencyKey: `${q}-k` }),
        ],
      });
      expect(results.map((r) => r.created)).toEqual([true, true, false]);
      expect(results[2]!.id).toBe(results[0]!.id);
      expect(results[2]!.runAt).toEqual(t(5));
      const jobs = await store.jobList({ queue: q });
      expect(jobs.map((j) => [j.payload, j.runAt])).toEqual([
        ['first', t(5)],
        ['other', t(6)],
      ]);
    });
  });

  describe('jobClaim', () => {
    it('refuses a negative or fractional limit and a non-positive leaseMs, writing nothing; limit 0 claims nothing', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.claim.params', queue: q, runAt: t(1) }, t(0));
      const claim = (limit: number, leaseMs: number) =>
        store.jobClaim({ owner: 'w', limit, leaseMs, queues: [q], now: t(10) }).then(
          (jobs) => jobs.map((job) => job.id),
          (error: { name?: string; field?: string }) => `${error.name}:${error.field}`,
        );
      expect(await claim(-1, LEASE_MS)).toBe('ValidationError:limit');
      expect(await claim(1.5, LEASE_MS)).toBe('ValidationError:limit');
      expect(await claim(1, 0)).toBe('ValidationError:leaseMs');
      expect(await claim(1, 2.5)).toBe('ValidationError:leaseMs');
      expect(await claim(0, LEASE_MS)).toEqual([]);
      expect(await mustGet(id)).toMatchObject({ state: 'pending', attempts: 0, token: 0 });
      expect(await claim(1, LEASE_MS)).toEqual([id]);
    });

    it('never hands out a job before its run_at: nothing at run_at - 1 ms, the job at run_at', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.due', queue: q, runAt: t(100) }, t(0));
      const early = await store.jobClaim({
        owner: 'w',
        limit: 10,
        leaseMs: LEASE_MS,
        queues: [q],
        now: new Date(99_999),
      });
      expect(early).toEqual([]);
      const onTime = await claimOne(q, t(100));
      expect(onTime.id).toBe(id);
    });

    it('orders by priority, then run_at, then id, and honours the limit', async () => {
      const q = nextQueue();
      const results = await store.jobSubmit({
        now: t(0),
        jobs: [
          spec({ kind: 'A', queue: q, runAt: t(10) }),
          spec({ kind: 'B', queue: q, runAt: t(50), priority: -1 }),
          spec({ kind: 'C', queue: q, runAt: t(5) }),
          spec({ kind: 'D', queue: q, runAt: t(10) }),
          spec({ kind: 'E', queue: q, runAt: t(1), priority: 1 }),
        ],
      });
      const [a, b, c, d, e] = results.map((r) => r.id);
      const idsAsNumbers = [a, d].map((id) => BigInt(id!));
      // The A/D tie on priority and run_at is broken by id, so A must have the smaller one.
      expect(idsAsNumbers[0]! < idsAsNumbers[1]!).toBe(true);
      const firstTwo = await store.jobClaim({ owner: 'w', limit: 2, leaseMs: LEASE_MS, queues: [q], now: t(100) });
      expect(firstTwo.map((j) => j.id)).toEqual([b, c]);
      const rest = await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: t(100) });
      expect(rest.map((j) => j.id)).toEqual([a, d, e]);
    });

    it('returns nothing and writes nothing for limit 0', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.zero', queue: q, runAt: t(1) }, t(0));
      expect(await store.jobClaim({ owner: 'w', limit: 0, leaseMs: LEASE_MS, queues: [q], now: t(100) })).toEqual([]);
      expect(await mustGet(id)).toMatchObject({ state: 'pending', token: 0, attempts: 0, leaseUntil: null });
    });

    it('claims only from the queues asked for', async () => {
      const q = nextQueue();
      const [inA, inB] = await Promise.all([
        submitOne(store, { kind: 'conf.q', queue: `${q}_a`, runAt: t(1) }, t(0)),
        submitOne(store, { kind: 'conf.q', queue: `${q}_b`, runAt: t(1) }, t(0)),
      ]);
      const fromA = await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [`${q}_a`], now: t(5) });
      expect(fromA.map((j) => j.id)).toEqual([inA]);
      expect((await mustGet(inB!)).state).toBe('pending');
      const fromBoth = await store.jobClaim({
        owner: 'w',
        limit: 10,
        leaseMs: LEASE_MS,
        queues: [`${q}_a`, `${q}_b`],
        now: t(5),
      });
      expect(fromBoth.map((j) => j.id)).toEqual([inB]);
    });

    it('claims from every queue when no queue is named', async () => {
      await withFreshStore(async (fresh) => {
        const ids = await Promise.all(
          ['one', 'two', 'three'].map((queue, i) =>
            submitOne(fresh, { kind: 'conf.all', queue, runAt: t(i + 1) }, t(0)),
          ),
        );
        const claimed = await fresh.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, now: t(10) });
        expect(claimed.map((j) => j.id)).toEqual(ids);
      });
    });

    it('sets owner and lease, and increments token and attempts on every claim', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.lease', queue: q, runAt: t(100), payload: { p: true } }, t(0));
      const first = await claimOne(q, t(100), 'worker-1');
      expect(first).toMatchObject({
        id,
        kind: 'conf.lease',
        queue: q,
        payload: { p: true },
        state: 'running',
        token: 1,
        attempts: 1,
        leaseOwner: 'worker-1',
        leaseUntil: t(130),
        runAt: t(100),
      });
      expect(await mustGet(id)).toMatchObject({ state: 'running', token: 1, attempts: 1, leaseOwner: 'worker-1' });
      expect(await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(129) })).toEqual([]);
      const second = await claimOne(q, t(131), 'worker-2');
      expect(second).toMatchObject({ id, token: 2, attempts: 2, leaseOwner: 'worker-2', leaseUntil: t(161) });
    });

    it('answers a claimed job exactly as the job then reads back, every field, on both claim forms', async () => {
      // The claim builds its Jobs on a path of its own (on PostgreSQL, from rows read as arrays);
      // a field it dropped, swapped or converted differently from jobGet shows here.
      const q = nextQueue();
      const id = await submitOne(
        store,
        {
          kind: 'conf.fields',
          queue: q,
          runAt: t(100),
          payload: { nested: { list: [1, 'two', null] }, text: 'say "hi"' },
          priority: 4,
          maxAttempts: 9,
          retry: { baseDelayMs: 250, factor: 3 },
          timeoutMs: 4500,
          idempotencyKey: `${q}-fields`,
        },
        t(0),
      );
      const first = await claimOne(q, t(100), 'worker-1');
      expect(first).toEqual(await mustGet(id));
      // A failed attempt gives the next claim a non-empty errors list to carry.
      await store.jobFail({ id, token: first.token, error: thrown('first'), decision: retryIn(1000), now: t(101) });
      const [second] = await store.jobClaim({
        owner: 'worker-2',
        limit: 1,
        leaseMs: LEASE_MS,
        queues: [q],
        now: t(103),
        includeLapsed: false,
      });
      expect(second?.errors).toHaveLength(1);
      expect(second).toEqual(await mustGet(id));
    });

    it('gives every job of one claim its own retry policy, which no other claimed job can change', async () => {
      // A claim parses each run of equal policy texts once, and that run's jobs share the parsed
      // policy: interleaved policies must still land on their own jobs, and a change made through
      // one job (refused or not) must never reach another job's backoff.
      const q = nextQueue();
      const slow = { baseDelayMs: 5000, factor: 3 };
      const extras = [{}, {}, { retry: slow }, {}, { retry: slow }, { retry: slow }, {}];
      await store.jobSubmit({
        jobs: extras.map((extra, n) => spec({ kind: 'conf.claim-policy', queue: q, payload: { n }, ...extra })),
        now: t(0),
      });
      const claimed = await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: t(1) });
      const expected = extras.map((extra) =>
        'retry' in extra ? { ...DEFAULT_RETRY_POLICY, ...slow } : DEFAULT_RETRY_POLICY,
      );
      expect(claimed.map((job) => job.payload)).toEqual(extras.map((_, n) => ({ n })));
      expect(claimed.map((job) => job.retryPolicy)).toEqual(expected);
      for (const job of claimed) {
        try {
          (job.retryPolicy as { factor: number }).factor = 99;
        } catch {
          // A read-only policy refuses the change: as good as keeping it to this job.
        }
        const others = claimed.filter((other) => other !== job);
        expect(others.map((other) => other.retryPolicy)).toEqual(expected.filter((_, n) => claimed[n] !== job));
      }
    });

    it("gives the jobs of one claim shared instants that no job can change, each equal to the job's own", async () => {
      // A claim reads each run of equal instants once (ClaimedRowValues): the lease end and start it
      // set on every row, and the run and creation times a batch gave alike. Shared Dates must be
      // read-only, and each job must still carry its own values where they differ.
      const q = nextQueue();
      const runAts = [t(10), t(10), t(20), t(10), t(20), t(20)];
      const ids = (
        await store.jobSubmit({
          jobs: runAts.map((runAt, n) => spec({ kind: 'conf.claim-instants', queue: q, payload: { n }, runAt })),
          now: t(0),
        })
      ).map((result) => result.id);
      const claimed = await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: t(30) });
      expect(claimed.map((job) => job.id).sort()).toEqual([...ids].sort());
      for (const job of claimed) {
        expect(job).toEqual(await mustGet(job.id));
        expect(job.runAt).toEqual(runAts[(job.payload as { n: number }).n]);
        expect(job.leaseUntil).toEqual(t(30 + LEASE_MS / 1000));
        expect(job.startedAt).toEqual(t(30));
        expect(job.createdAt).toEqual(t(0));
        for (const instant of [job.runAt, job.leaseUntil, job.createdAt, job.startedAt!]) {
          expect(instant).toBeInstanceOf(Date);
          const before = instant.getTime();
          expect(() => instant.setTime(0)).toThrow(/read-only.*new Date/);
          expect(() => instant.setUTCFullYear(2000)).toThrow(TypeError);
          expect(instant.getTime()).toBe(before);
          // A copy is an ordinary Date, free to change.
          const copy = new Date(instant);
          copy.setTime(0);
          expect(copy.getTime()).toBe(0);
        }
      }
    });

    it('gives every job of a many-row claim its own fields where neighbours differ, and where a value returns', async () => {
      // PostgreSQL's claim sends a repeated column once per run (NULL: "as the row before"), and the
      // reader carries it forward: every job must still get its own kind, queue, priority, token,
      // attempts, limits and times, including a value that comes back after a different one (A B A).
      const [q1, q2] = [nextQueue(), nextQueue()];
      const slow = { baseDelayMs: 5000, factor: 3 };
      const retried = await submitOne(store, { kind: 'conf.carry-a', queue: q1, payload: { n: 4 }, runAt: t(1) }, t(0));
      const firstAttempt = await claimOne(q1, t(2));
      expect(firstAttempt.id).toBe(retried);
      // Back to pending with token 1, attempts 1 and an error: due at t(14.5), between fresh jobs.
      await store.jobFail({ id: retried, token: 1, error: thrown('once'), decision: retryIn(11_500), now: t(3) });
      const batch = [
        spec({ kind: 'conf.carry-a', queue: q1, payload: { n: 0 }, runAt: t(10) }),
        spec({ kind: 'conf.carry-a', queue: q1, payload: { n: 1 }, runAt: t(11) }),
        spec({ kind: 'conf.carry-b', queue: q2, payload: { n: 2 }, runAt: t(12), maxAttempts: 7 }),
        spec({ kind: 'conf.carry-a', queue: q1, payload: { n: 3 }, runAt: t(13), retry: slow }),
        spec({ kind: 'conf.carry-a', queue: q1, payload: { n: 6 }, runAt: t(16), priority: 5 }),
        spec({ kind: 'conf.carry-b', queue: q1, payload: { n: 7 }, runAt: t(17), priority: 5 }),
      ];
      await store.jobSubmit({ jobs: batch, now: t(0) });
      // Created a second later than its neighbours: the creation time changes and changes back.
      await submitOne(
        store,
        {
          kind: 'conf.carry-a',
          queue: q1,
          payload: { n: 5 },
          runAt: t(15),
          timeoutMs: 9000,
          idempotencyKey: `k-${q1}`,
        },
        t(1),
      );
      const claimed = await store.jobClaim({ owner: 'w', limit: 20, leaseMs: LEASE_MS, queues: [q1, q2], now: t(30) });
      // The claim's order: priority, then run_at.
      expect(claimed.map((job) => (job.payload as { n: number }).n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      for (const job of claimed) expect(job).toEqual(await mustGet(job.id));
      expect(
        claimed.map((job) => [job.kind, job.queue, job.priority, job.token, job.attempts, job.maxAttempts]),
      ).toEqual([
        ['conf.carry-a', q1, 0, 1, 1, DEFAULT_MAX_ATTEMPTS],
        ['conf.carry-a', q1, 0, 1, 1, DEFAULT_MAX_ATTEMPTS],
        ['conf.carry-b', q2, 0, 1, 1, 7],
        ['conf.carry-a', q1, 0, 1, 1, DEFAULT_MAX_ATTEMPTS],
        ['conf.carry-a', q1, 0, 2, 2, DEFAULT_MAX_ATTEMPTS],
        ['conf.carry-a', q1, 0, 1, 1, DEFAULT_MAX_ATTEMPTS],
        ['conf.carry-a', q1, 5, 1, 1, DEFAULT_MAX_ATTEMPTS],
        ['conf.carry-b', q1, 5, 1, 1, DEFAULT_MAX_ATTEMPTS],
      ]);
      expect(claimed.map((job) => job.createdAt)).toEqual([t(0), t(0), t(0), t(0), t(0), t(1), t(0), t(0)]);
      expect(claimed.map((job) => job.runAt)).toEqual([t(10), t(11), t(12), t(13), t(14.5), t(15), t(16), t(17)]);
      expect(claimed.map((job) => job.retryPolicy.baseDelayMs)).toEqual([
        DEFAULT_RETRY_POLICY.baseDelayMs,
        DEFAULT_RETRY_POLICY.baseDelayMs,
        DEFAULT_RETRY_POLICY.baseDelayMs,
        5000,
        DEFAULT_RETRY_POLICY.baseDelayMs,
        DEFAULT_RETRY_POLICY.baseDelayMs,
        DEFAULT_RETRY_POLICY.baseDelayMs,
        DEFAULT_RETRY_POLICY.baseDelayMs,
      ]);
      expect(claimed[4]?.errors.map((error) => error.message)).toEqual(['once']);
      expect(claimed.filter((job) => job.errors.length > 0)).toHaveLength(1);
    });

    it('stores each job of a batch with its own values, whether its neighbours share a column or not', async () => {
      // PostgreSQL's submit sends a column every job of the batch shares as one value, which the
      // statement reads as every row's: a shared column must land in every row, and a column shared
      // by all but one (a nullable one too: a timeout among none) must stay each job's own. Sent
      // three ways: under reserved ids (the lean insert), without ids, and with idempotency keys.
      const slow = { baseDelayMs: 5000, factor: 3 };
      const shape = (job: Job) => [
        job.kind,
        job.queue,
        job.priority,
        job.runAt,
        job.maxAttempts,
        job.retryPolicy.baseDelayMs,
        job.timeoutMs,
      ];
      for (const way of ['reserved ids', 'sequence ids', 'idempotency keys'] as const) {
        const [q1, q2] = [nextQueue(), nextQueue()];
        const key = (n: number) => (way === 'idempotency keys' ? { idempotencyKey: `${q1}-${n}` } : {});
        const shared = { kind: 'conf.shared', queue: q1, priority: 3, runAt: t(20), maxAttempts: 4, retry: slow };
        const batches = [
          [0, 1, 2].map((n) => spec({ ...shared, payload: { n }, timeoutMs: 7000, ...key(n) })),
          [
            spec({ ...shared, payload: { n: 3 }, ...key(3) }),
            spec({ ...shared, kind: 'conf.other', queue: q2, payload: { n: 4 }, timeoutMs: 9000, ...key(4) }),
            spec({ ...shared, payload: { n: 5 }, priority: 0, maxAttempts: 9, ...key(5) }),
            spec({ ...shared, payload: { n: 6 }, runAt: undefined, delayMs: 2000, retry: undefined, ...key(6) }),
            spec({ ...shared, payload: { n: 7 }, ...key(7) }),
          ],
          // Every column shared but the timeout, which one job has and one does not.
          [
            spec({ ...shared, payload: { n: 8 }, ...key(8) }),
            spec({ ...shared, payload: { n: 9 }, timeoutMs: 9000, ...key(9) }),
          ],
          // Shared: no run-at (both due after the same delay) and no timeout.
          [8, 9].map((n) =>
            spec({ kind: 'conf.shared', queue: q1, payload: { n: n + 2 }, delayMs: 1000, ...key(n + 2) }),
          ),
        ];
        const jobs: Job[] = [];
        for (const batch of batches) {
          const ids =
            way === 'reserved ids' && store.capabilities.reservableJobIds
              ? await store.jobReserveIds({ count: batch.length })
              : undefined;
          const results = await store.jobSubmit({ jobs: batch, now: t(10), ...(ids ? { ids } : {}) });
          expect(results.map((result) => result.created)).toEqual(batch.map(() => true));
          for (const result of results) jobs.push(await mustGet(result.id));
        }
        expect(
          jobs.map((job) => (job.payload as { n: number }).n),
          way,
        ).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        const base = DEFAULT_RETRY_POLICY.baseDelayMs;
        expect(jobs.map(shape), way).toEqual([
          ['conf.shared', q1, 3, t(20), 4, 5000, 7000],
          ['conf.shared', q1, 3, t(20), 4, 5000, 7000],
          ['conf.shared', q1, 3, t(20), 4, 5000, 7000],
          ['conf.shared', q1, 3, t(20), 4, 5000, null],
          ['conf.other', q2, 3, t(20), 4, 5000, 9000],
          ['conf.shared', q1, 0, t(20), 9, 5000, null],
          ['conf.shared', q1, 3, t(12), 4, base, null],
          ['conf.shared', q1, 3, t(20), 4, 5000, null],
          ['conf.shared', q1, 3, t(20), 4, 5000, null],
          ['conf.shared', q1, 3, t(20), 4, 5000, 9000],
          ['conf.shared', q1, 0, t(11), DEFAULT_MAX_ATTEMPTS, base, null],
          ['conf.shared', q1, 0, t(11), DEFAULT_MAX_ATTEMPTS, base, null],
        ]);
      }
    });
  });

  describe('jobHeartbeat', () => {
    it('extends a current lease to now + leaseMs', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.hb', queue: q, runAt: t(100) }, t(0));
      const claimed = await claimOne(q, t(100));
      expect(await store.jobHeartbeat({ id, token: claimed.token, leaseMs: LEASE_MS, now: t(110) })).toEqual(t(140));
      expect((await mustGet(id)).leaseUntil).toEqual(t(140));
      expect(await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(135) })).toEqual([]);
    });

    it('answers null to a stale token and leaves the new lease alone', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.hb', queue: q, runAt: t(100) }, t(0));
      await claimOne(q, t(100));
      const second = await claimOne(q, t(131), 'worker-2');
      expect(second.token).toBe(2);
      expect(await store.jobHeartbeat({ id, token: 1, leaseMs: LEASE_MS, now: t(132) })).toBeNull();
      expect(await mustGet(id)).toMatchObject({ token: 2, leaseUntil: t(161), leaseOwner: 'worker-2' });
    });

    it('answers null once the lease has lapsed, even with the current token', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.hb', queue: q, runAt: t(100) }, t(0));
      const claimed = await claimOne(q, t(100));
      expect(await store.jobHeartbeat({ id, token: claimed.token, leaseMs: LEASE_MS, now: t(131) })).toBeNull();
      // The refused heartbeat must not have revived the lease: the job is due again.
      expect((await claimOne(q, t(131), 'worker-2')).token).toBe(2);
    });

    it('heartbeats many leases in one call, each fenced by its own token, in input order', async () => {
      const q = nextQueue();
      await store.jobSubmit({
        now: t(0),
        jobs: [1, 2, 3].map((i) => spec({ kind: 'conf.hb', queue: q, runAt: t(i) })),
      });
      const claimed = await store.jobClaim({ owner: 'w', limit: 3, leaseMs: LEASE_MS, queues: [q], now: t(10) });
      expect(claimed).toHaveLength(3);
      const [a, b, c] = claimed;
      const beats = await store.jobHeartbeatMany({
        now: t(20),
        leaseMs: LEASE_MS,
        leases: [
          { id: a!.id, token: a!.token },
          { id: b!.id, token: b!.token + 1 },
          { id: c!.id, token: c!.token },
          { id: UNKNOWN_ID, token: 1 },
        ],
      });
      expect(beats).toEqual([t(50), null, t(50), null]);
      expect((await mustGet(b!.id)).leaseUntil).toEqual(t(40));
    });
  });

  describe('jobComplete', () => {
    it('marks the job done, and a done job is never claimed again', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.done', queue: q, runAt: t(100) }, t(0));
      const claimed = await claimOne(q, t(100));
      expect(await store.jobComplete({ id, token: claimed.token, now: t(105) })).toBe('done');
      expect(await mustGet(id)).toMatchObject({ state: 'done', finishedAt: t(105), leaseUntil: null, token: 1 });
      expect(await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: t(10_000) })).toEqual(
        [],
      );
      // A repeat by the same claim (a retry after a lost reply) is told done: it was ours, and it changes nothing.
      expect(await store.jobComplete({ id, token: claimed.token, now: t(106) })).toBe('done');
      expect(await mustGet(id)).toMatchObject({ state: 'done', finishedAt: t(105) });
      expect(await store.jobHeartbeat({ id, token: claimed.token, leaseMs: LEASE_MS, now: t(106) })).toBeNull();
    });

    it('refuses a completion whose token is stale after a re-claim', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.done', queue: q, runAt: t(100) }, t(0));
      await claimOne(q, t(100));
      const second = await claimOne(q, t(141), 'worker-2');
      expect(await store.jobComplete({ id, token: 1, now: t(142) })).toBe('stale');
      expect(await mustGet(id)).toMatchObject({ state: 'running', token: 2 });
      expect(await store.jobComplete({ id, token: second.token, now: t(143) })).toBe('done');
    });

    it('refuses a completion for an unknown job', async () => {
      expect(await store.jobComplete({ id: UNKNOWN_ID, token: 1, now: t(1) })).toBe('stale');
    });

    it('completes many leases in one call, each fenced by its own token, in input order', async () => {
      const q = nextQueue();
      await store.jobSubmit({
        now: t(0),
        jobs: [1, 2, 3].map((i) => spec({ kind: 'conf.many', queue: q, runAt: t(i) })),
      });
      const claimed = await store.jobClaim({ owner: 'w', limit: 3, leaseMs: LEASE_MS, queues: [q], now: t(10) });
      const [a, b, c] = claimed;
      const outcomes = await store.jobCompleteMany({
        now: t(11),
        leases: [
          { id: a!.id, token: a!.token },
          { id: b!.id, token: b!.token + 5 },
          { id: c!.id, token: c!.token },
        ],
      });
      expect(outcomes).toEqual(['done', 'stale', 'done']);
      expect((await mustGet(a!.id)).state).toBe('done');
      expect((await mustGet(b!.id)).state).toBe('running');
      expect((await mustGet(c!.id)).state).toBe('done');
    });
  });

  describe('jobFail', () => {
    it('reschedules at now + delay and records the error with its attempt number', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.fail', queue: q, runAt: t(100) }, t(0));
      const claimed = await claimOne(q, t(100));
      const outcome = await store.jobFail({
        id,
        token: claimed.token,
        error: thrown('boom'),
        decision: retryIn(2000),
        now: t(101),
      });
      expect(outcome).toEqual({ outcome: 'retry', runAt: t(103) });
      const job = await mustGet(id);
      expect(job).toMatchObject({ state: 'pending', runAt: t(103), leaseUntil: null, attempts: 1, token: 1 });
      // The entry names the attempt's claim: when it started and under which lease owner.
      expect(job.errors).toEqual([
        {
          attempt: 1,
          at: t(101),
          message: 'boom',
          kind: 'thrown',
          detail: 'Error: boom\n    at handler',
          startedAt: t(100),
          owner: claimed.leaseOwner,
        },
      ]);
      expect(
        await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: new Date(102_999) }),
      ).toEqual([]);
      expect(await claimOne(q, t(103))).toMatchObject({ id, token: 2, attempts: 2 });
    });

    it('parks the job in the dead-letter list with every attempt’s error', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.park', queue: q, runAt: t(100), maxAttempts: 2 }, t(0));
      const first = await claimOne(q, t(100));
      await store.jobFail({ id, token: first.token, error: thrown('first'), decision: retryIn(2000), now: t(101) });
      const second = await claimOne(q, t(103));
      expect(
        await store.jobFail({ id, token: second.token, error: thrown('second'), decision: PARK, now: t(104) }),
      ).toEqual({
        outcome: 'parked',
      });
      const job = await mustGet(id);
      expect(job).toMatchObject({ state: 'dead', finishedAt: t(104), leaseUntil: null, attempts: 2 });
      expect(job.errors.map((e) => [e.attempt, e.message, e.kind, e.at])).toEqual([
        [1, 'first', 'thrown', t(101)],
        [2, 'second', 'thrown', t(104)],
      ]);
      expect((await store.deadLetterList({ queue: q })).map((j) => j.id)).toEqual([id]);
      expect((await store.jobList({ queue: q, states: ['dead'] })).map((j) => j.id)).toEqual([id]);
      expect(await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: t(100_000) })).toEqual(
        [],
      );
    });

    it('refuses a failure whose token is stale and changes nothing', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.fail', queue: q, runAt: t(100) }, t(0));
      await claimOne(q, t(100));
      await claimOne(q, t(131), 'worker-2');
      expect(
        await store.jobFail({ id, token: 1, error: thrown('late'), decision: retryIn(2000), now: t(132) }),
      ).toEqual({
        outcome: 'stale',
      });
      expect(await store.jobFail({ id, token: 1, error: thrown('late'), decision: PARK, now: t(132) })).toEqual({
        outcome: 'stale',
      });
      const job = await mustGet(id);
      expect(job).toMatchObject({ state: 'running', token: 2, leaseUntil: t(161) });
      expect(job.errors.filter((e) => e.message === 'late')).toEqual([]);
    });
  });

  describe('lapsed leases', () => {
    it('parks a job whose every lease lapsed at the next claim, with a lease_expired reason, and never hands it out again', async () => {
      const q = nextQueue();
      const poison = await submitOne(store, { kind: 'conf.crash', queue: q, runAt: t(100), maxAttempts: 3 }, t(0));
      expect((await claimOne(q, t(100))).token).toBe(1);
      expect((await claimOne(q, t(131))).token).toBe(2);
      expect(await claimOne(q, t(162))).toMatchObject({ token: 3, attempts: 3 });
      const healthy = await submitOne(store, { kind: 'conf.healthy', queue: q, runAt: t(190) }, t(190));

      // limit 1: parking the exhausted job must not use up the batch, or a poison job would starve the queue.
      const next = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(193) });
      expect(
        next.map((j) => j.id),
        'a claim of 1 that parks an exhausted job still hands out the next due job',
      ).toEqual([healthy]);
      const parked = await mustGet(poison);
      expect(parked).toMatchObject({ state: 'dead', token: 3, attempts: 3, leaseUntil: null });
      expect(parked.finishedAt).toBeInstanceOf(Date);
      const last = parked.errors.at(-1);
      expect(last, 'the parked job records why it was parked').toMatchObject({ attempt: 3, kind: 'lease_expired' });
      expect((await store.deadLetterList({ queue: q })).map((j) => j.id)).toEqual([poison]);
      expect(await store.jobComplete({ id: healthy, token: next[0]!.token, now: t(194) })).toBe('done');
      expect(await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: t(10_000) })).toEqual(
        [],
      );
    });

    it('parks every exhausted job due in the claimed queues, however small the limit', async () => {
      const q = nextQueue();
      const [first, healthy, second] = (
        await store.jobSubmit({
          now: t(0),
          jobs: [
            spec({ kind: 'conf.crash.a', queue: q, runAt: t(1), maxAttempts: 1, priority: 1 }),
            spec({ kind: 'conf.healthy', queue: q, runAt: t(50), priority: 0 }),
            spec({ kind: 'conf.crash.b', queue: q, runAt: t(3), maxAttempts: 1, priority: 1 }),
          ],
        })
      ).map((r) => r.id);
      const crashed = await store.jobClaim({ owner: 'w', limit: 2, leaseMs: LEASE_MS, queues: [q], now: t(10) });
      expect(crashed.map((j) => j.id)).toEqual([first, second]);
      // Both leases lapse at t(40). The healthy job sorts first (priority 0) and fills the batch of 1:
      // a claim that parked only what it walked past would leave both exhausted jobs behind, so a
      // late completion or cancel would then answer differently from store to store.
      const next = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(60) });
      expect(next.map((j) => j.id)).toEqual([healthy]);
      expect((await mustGet(first!)).state, 'the first exhausted job').toBe('dead');
      expect((await mustGet(second!)).state, 'the second exhausted job, beyond the batch of 1').toBe('dead');
    });
  });

  describe('lapsed leases, searched or not', () => {
    it('takes over no lapsed lease and parks nothing in a claim with includeLapsed false; the next searching claim does both', async () => {
      const q = nextQueue();
      const [crashed, exhausted, due] = (
        await store.jobSubmit({
          now: t(0),
          jobs: [
            spec({ kind: 'conf.lapse.crashed', queue: q, runAt: t(1), priority: 0 }),
            spec({ kind: 'conf.lapse.exhausted', queue: q, runAt: t(2), maxAttempts: 1, priority: 0 }),
            spec({ kind: 'conf.lapse.due', queue: q, runAt: t(50), priority: 5 }),
          ],
        })
      ).map((r) => r.id);
      expect(
        (await store.jobClaim({ owner: 'gone', limit: 2, leaseMs: LEASE_MS, queues: [q], now: t(10) })).map(
          (j) => j.id,
        ),
      ).toEqual([crashed, exhausted]);
      // Both leases lapsed at t(40). Without the search the claim sees the due job alone.
      const pendingOnly = await store.jobClaim({
        owner: 'w',
        limit: 5,
        leaseMs: LEASE_MS,
        queues: [q],
        now: t(60),
        includeLapsed: false,
      });
      expect(pendingOnly.map((j) => j.id)).toEqual([due]);
      expect((await mustGet(crashed!)).state).toBe('running');
      expect((await mustGet(exhausted!)).state, 'not parked by a claim that does not search').toBe('running');
      const searching = await store.jobClaim({ owner: 'w', limit: 5, leaseMs: LEASE_MS, queues: [q], now: t(61) });
      expect(searching.map((j) => [j.id, j.attempts])).toEqual([[crashed, 2]]);
      expect((await mustGet(exhausted!)).state).toBe('dead');
    });
  });

  describe('lease boundaries', () => {
    it('ends a lease at lease_until: the job is claimable then, and a heartbeat at that instant is refused', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.edge', queue: q, runAt: t(100) }, t(0));
      const claimed = await claimOne(q, t(100));
      expect(await store.jobHeartbeat({ id, token: claimed.token, leaseMs: LEASE_MS, now: new Date(129_999) })).toEqual(
        new Date(159_999),
      );
      expect(
        await store.jobHeartbeat({ id, token: claimed.token, leaseMs: LEASE_MS, now: new Date(159_999) }),
      ).toBeNull();
      expect(await claimOne(q, new Date(159_999), 'worker-2')).toMatchObject({ id, token: 2 });
    });

    it('accepts a completion with the current token after the lease lapsed, when nobody re-claimed the job', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.late', queue: q, runAt: t(100) }, t(0));
      const claimed = await claimOne(q, t(100));
      expect(await store.jobComplete({ id, token: claimed.token, now: t(145) })).toBe('done');
      expect(await mustGet(id)).toMatchObject({ state: 'done', finishedAt: t(145) });
    });

    it('accepts a failure with the current token after the lease lapsed, when nobody re-claimed the job', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.late', queue: q, runAt: t(100) }, t(0));
      const claimed = await claimOne(q, t(100));
      const outcome = await store.jobFail({
        id,
        token: claimed.token,
        error: thrown('slow'),
        decision: retryIn(2000),
        now: t(145),
      });
      expect(outcome).toEqual({ outcome: 'retry', runAt: t(147) });
      expect(await claimOne(q, t(147))).toMatchObject({ id, token: 2, attempts: 2 });
    });
  });

  describe('jobRelease', () => {
    it('makes the job due at once and gives the attempt back; a stale token is refused', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.release', queue: q, runAt: t(100) }, t(0));
      const claimed = await claimOne(q, t(100));
      expect(await store.jobRelease({ id, token: claimed.token, now: t(105) })).toBe('released');
      expect(await mustGet(id)).toMatchObject({ state: 'pending', attempts: 0, leaseUntil: null, token: 1 });
      expect(await store.jobRelease({ id, token: claimed.token, now: t(105) })).toBe('stale');
      expect(await claimOne(q, t(105), 'worker-2')).toMatchObject({ token: 2, attempts: 1 });
      expect(await store.jobRelease({ id, token: 1, now: t(106) })).toBe('stale');
      expect(await mustGet(id)).toMatchObject({ state: 'running', token: 2, attempts: 1, leaseOwner: 'worker-2' });
    });

    it('keeps a released job’s run_at, so it keeps its place in claim order', async () => {
      const q = nextQueue();
      const [early, later] = (
        await store.jobSubmit({
          now: t(0),
          jobs: [
            spec({ kind: 'conf.early', queue: q, runAt: t(10) }),
            spec({ kind: 'conf.later', queue: q, runAt: t(20) }),
          ],
        })
      ).map((r) => r.id);
      const claimed = await claimOne(q, t(30));
      expect(claimed.id).toBe(early);
      expect(await store.jobRelease({ id: early!, token: claimed.token, now: t(40) })).toBe('released');
      expect((await mustGet(early!)).runAt).toEqual(t(10));
      expect((await claimOne(q, t(40))).id, 'the released job, due since t(10), goes before the one due at t(20)').toBe(
        early,
      );
      expect((await claimOne(q, t(40))).id).toBe(later);
    });
  });

  describe('jobCancel', () => {
    it('cancels a pending job, which is never claimed', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.cancel', queue: q, runAt: t(100) }, t(0));
      expect(await store.jobCancel({ id, now: t(5) })).toBe('cancelled');
      expect(await mustGet(id)).toMatchObject({ state: 'cancelled', finishedAt: t(5) });
      expect(await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: t(1000) })).toEqual([]);
    });

    it('cancels a running job, so its holder’s heartbeat, completion and failure are stale', async () => {
      const q = nextQueue();
      const id = await submitOne(store, { kind: 'conf.cancel', queue: q, runAt: t(100) }, t(0));
      const claimed = await claimOne(q, t(100));
      expect(await store.jobCancel({ id, now: t(101) })).toBe('cancelled');
      expect(await store.jobHeartbeat({ id, token: claimed.token, leaseMs: LEASE_MS, now: t(102) })).toBeNull();
      expect(await store.jobComplete({ id, token: claimed.token, now: t(103) })).toBe('stale');
      expect(
        await store.jobFail({ id, token: claimed.token, error: thrown('x'), decision: retryIn(1000), now: t(103) }),
      ).toEqual({ outcome: 'stale' });
      expect(await mustGet(id)).toMatchObject({ state: 'cancelled', finishedAt: t(101) });
      expect(await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: t(1000) })).toEqual([]);
    });

    it('answers already_finished for done, cancelled and dead jobs, and changes nothing', async () => {
      const q = nextQueue();
      const [done, cancelled, dead] = (
        await store.jobSubmit({
          now: t(0),
          jobs: [1, 2, 3].map((i) => spec({ kind: 'conf.finished', queue: q, runAt: t(i), maxAttempts: 1 })),
        })
      ).map((r) => r.id);
      const claimed = await store.jobClaim({ owner: 'w', limit: 3, leaseMs: LEASE_MS, queues: [q], now: t(10) });
      expect(await store.jobComplete({ id: done!, token: claimed[0]!.token, now: t(11) })).toBe('done');
      expect(await store.jobCancel({ id: cancelled!, now: t(11) })).toBe('cancelled');
      expect(
        await store.jobFail({ id: dead!, token: claimed[2]!.token, error: thrown('x'), decision: PARK, now: t(11) }),
      ).toEqual({ outcome: 'parked' });
      for (const id of [done!, cancelled!, dead!]) {
        expect(await store.jobCancel({ id, now: t(12) }), `cancel of ${id}`).toBe('already_finished');
      }
      expect((await store.jobList({ queue: q })).map((j) => j.state)).toEqual(['done', 'cancelled', 'dead']);
    });

    it('answers not_found for an unknown id', async () => {
      expect(await store.jobCancel({ id: UNKNOWN_ID, now: t(1) })).toBe('not_found');
    });
  });

  describe('jobGet and jobList', () => {
    it('answers null for an unknown id', async () => {
      expect(await store.jobGet({ id: UNKNOWN_ID })).toBeNull();
    });

    it('treats an id that is not a number as unknown instead of throwing', async () => {
      for (const id of ['abc', '', '1.5', '-1', '99999999999999999999999']) {
        expect(await store.jobGet({ id }), `jobGet(${JSON.stringify(id)})`).toBeNull();
        expect(await store.jobCancel({ id, now: t(1) }), `jobCancel(${JSON.stringify(id)})`).toBe('not_found');
        expect(await store.jobComplete({ id, token: 1, now: t(1) }), `jobComplete(${JSON.stringify(id)})`).toBe(
          'stale',
        );
        expect(await store.deadLetterRetry({ id, now: t(1) }), `deadLetterRetry(${JSON.stringify(id)})`).toBeNull();
      }
    });

    it('lists by state, queue and kind, ordered by id', async () => {
      const q = nextQueue();
      const ids = (
        await store.jobSubmit({
          now: t(0),
          jobs: ['x', 'y', 'x', 'y', 'x'].map((k, i) => spec({ kind: `conf.${k}`, queue: q, runAt: t(10 * (i + 1)) })),
        })
      ).map((r) => r.id);
      await store.jobSubmit({ now: t(0), jobs: [spec({ kind: 'conf.x', queue: `${q}_other`, runAt: t(1) })] });
      await claimOne(q, t(15));
      const list = async (params: Parameters<Store['jobList']>[0]) => (await store.jobList(params)).map((j) => j.id);
      expect(await list({ queue: q })).toEqual(ids);
      expect(await list({ queue: q, states: ['pending'] })).toEqual(ids.slice(1));
      expect(await list({ queue: q, states: ['running'] })).toEqual(ids.slice(0, 1));
      expect(await list({ queue: q, states: ['running', 'pending'] })).toEqual(ids);
      expect(await list({ queue: q, states: ['done'] })).toEqual([]);
      expect(await list({ queue: q, kind: 'conf.x' })).toEqual([ids[0], ids[2], ids[4]]);
      expect(await list({ queue: q, kind: 'conf.y', states: ['pending'] })).toEqual([ids[1], ids[3]]);
    });

    it('pages with limit and afterId, comparing ids as numbers', async () => {
      await withFreshStore(async (fresh) => {
        const first = await submitOne(fresh, { kind: 'conf.page', runAt: t(1) }, t(0));
        // Enough jobs to cross a power of ten (9 -> 10), where comparing ids as text would misorder them.
        const crossing = 10 ** first.length - Number(first) + 3;
        const count = Math.min(Math.max(crossing, 12), 1200);
        const more = await fresh.jobSubmit({
          now: t(0),
          jobs: Array.from({ length: count }, () => spec({ kind: 'conf.page', runAt: t(1) })),
        });
        const all = [first, ...more.map((r) => r.id)].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
        const pageSize = Math.ceil(all.length / 4);
        const seen: string[] = [];
        let afterId: string | undefined;
        for (let page = 0; page < 10; page++) {
          const rows = await fresh.jobList({ limit: pageSize, afterId });
          if (rows.length === 0) break;
          expect(rows.length).toBeLessThanOrEqual(pageSize);
          seen.push(...rows.map((j) => j.id));
          afterId = rows.at(-1)!.id;
        }
        expect(seen).toEqual(all);
      });
    });

    /** The ValidationError a list call throws, as `{field, message}` (both stores must agree). */
    async function refusal(call: Promise<unknown>): Promise<{ name: string; field: unknown; message: string }> {
      const error = (await call.then(
        () => new Error('the call was accepted'),
        (e: unknown) => e,
      )) as Error & { field?: unknown };
      return { name: error.name, field: error.field, message: error.message };
    }

    it('refuses limit 0, a non-integer limit and one over 1000, naming `limit`', async () => {
      const q = nextQueue();
      await submitOne(store, { kind: 'conf.limit', queue: q, runAt: t(1) }, t(0));
      expect(await refusal(store.jobList({ queue: q, limit: 0 }))).toEqual({
        name: 'ValidationError',
        field: 'limit',
        message: 'limit: must be an integer from 1 to 1000, got 0',
      });
      expect(await refusal(store.jobList({ queue: q, limit: 1.5 }))).toMatchObject({ field: 'limit' });
      expect(await refusal(store.deadLetterList({ queue: q, limit: 0 }))).toMatchObject({ field: 'limit' });
      expect(await refusal(store.scheduleList({ limit: 0 }))).toMatchObject({ field: 'limit' });
      expect(await refusal(store.jobList({ queue: q, limit: 1_000_000 }))).toEqual({
        name: 'ValidationError',
        field: 'limit',
        message: 'limit: must be an integer from 1 to 1000, got 1000000',
      });
      expect(await store.jobList({ queue: q, limit: 1000 })).toHaveLength(1);
    });

    it('refuses an afterId that is not a job id, naming `afterId`', async () => {
      const q = nextQueue();
      await submitOne(store, { kind: 'conf.after', queue: q, runAt: t(1) }, t(0));
      for (const afterId of ['abc', '-1', '1.5', '', '99999999999999999999']) {
        expect(await refusal(store.jobList({ queue: q, afterId })), afterId).toEqual({
          name: 'ValidationError',
          field: 'afterId',
          message: `afterId: must be a job id (decimal digits, at most 9007199254740991), got ${JSON.stringify(afterId)}`,
        });
      }
      expect(await refusal(store.deadLetterList({ queue: q, afterId: 'abc' }))).toMatchObject({ field: 'afterId' });
      // A well-formed id that names no job is a fine cursor: past the largest id, nothing is left.
      // (Not UNKNOWN_ID: on a sharded store a later shard's ids are larger, docs/sharding.md.)
      expect(await store.jobList({ queue: q, afterId: String(Number.MAX_SAFE_INTEGER) })).toEqual([]);
    });

    it('refuses an unknown state, naming its index', async () => {
      const q = nextQueue();
      const states = ['pending', 'sleeping'] as unknown as Job['state'][];
      expect(await refusal(store.jobList({ queue: q, states }))).toEqual({
        name: 'ValidationError',
        field: 'states[1]',
        message: 'states[1]: must be one of pending, running, done, cancelled, dead, got "sleeping"',
      });
    });
  });

  describe('dead letters', () => {
    async function park(q: string, kindName: string, at: number): Promise<string> {
      const id = await submitOne(store, { kind: kindName, queue: q, runAt: t(at), maxAttempts: 1 }, t(0));
      const claimed = await claimOne(q, t(at));
      expect(
        await store.jobFail({
          id,
          token: claimed.token,
          error: thrown(`${kindName} broke`),
          decision: PARK,
          now: t(at),
        }),
      ).toEqual({ outcome: 'parked' });
      return id;
    }

    it('lists parked jobs by queue and kind, and retries one with its id, errors and token kept', async () => {
      const q = nextQueue();
      const a = await park(q, 'conf.dead.a', 100);
      const b = await park(q, 'conf.dead.b', 101);
      // Listed by id. Ids follow submit order on one database; a sharded store's two jobs may
      // sit on different shards, whose ids order shard-major (docs/sharding.md).
      const [first, second] = [a, b].sort((x, y) => Number(x) - Number(y));
      expect((await store.deadLetterList({ queue: q })).map((j) => [j.id, j.state])).toEqual([
        [first, 'dead'],
        [second, 'dead'],
      ]);
      expect((await store.deadLetterList({ queue: q, kind: 'conf.dead.b' })).map((j) => j.id)).toEqual([b]);
      expect((await store.deadLetterList({ queue: q, limit: 1 })).map((j) => j.id)).toEqual([first]);
      expect((await store.deadLetterList({ queue: q, afterId: first })).map((j) => j.id)).toEqual([second]);

      const retried = await store.deadLetterRetry({ id: a, now: t(200) });
      expect(retried).toMatchObject({
        id: a,
        state: 'pending',
        attempts: 0,
        token: 1,
        runAt: t(200),
        finishedAt: null,
      });
      expect(retried!.errors.map((e) => e.message)).toEqual(['conf.dead.a broke']);
      expect((await store.deadLetterList({ queue: q })).map((j) => j.id)).toEqual([b]);
      const again = await claimOne(q, t(200));
      expect(again).toMatchObject({ id: a, token: 2, attempts: 1 });
      expect(await store.jobComplete({ id: a, token: again.token, now: t(201) })).toBe('done');
      expect(await mustGet(a)).toMatchObject({ state: 'done', errors: [{ attempt: 1, message: 'conf.dead.a broke' }] });
    });

    it('answers null when retrying a job that is not parked', async () => {
      const q = nextQueue();
      const pending = await submitOne(store, { kind: 'conf.live', queue: q, runAt: t(1) }, t(0));
      expect(await store.deadLetterRetry({ id: pending, now: t(2) })).toBeNull();
      expect(await store.deadLetterRetry({ id: UNKNOWN_ID, now: t(2) })).toBeNull();
      expect((await mustGet(pending)).state).toBe('pending');
    });

    it('purges parked jobs by id, and only parked ones', async () => {
      const q = nextQueue();
      const a = await park(q, 'conf.dead.a', 100);
      const b = await park(q, 'conf.dead.b', 101);
      const live = await submitOne(store, { kind: 'conf.live', queue: q, runAt: t(1) }, t(0));
      expect(await store.deadLetterPurge({})).toBe(0);
      expect(await store.deadLetterPurge({ ids: [a, live, UNKNOWN_ID] })).toBe(1);
      expect(await store.jobGet({ id: a })).toBeNull();
      expect((await mustGet(live)).state).toBe('pending');
      expect((await store.deadLetterList({ queue: q })).map((j) => j.id)).toEqual([b]);
    });

    it('purges parked jobs parked before an instant', async () => {
      await withFreshStore(async (fresh) => {
        const parkAt = async (seconds: number) => {
          const id = await submitOne(fresh, { kind: 'conf.dead', runAt: t(seconds), maxAttempts: 1 }, t(0));
          const [claimed] = await fresh.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, now: t(seconds) });
          expect(claimed?.id).toBe(id);
          await fresh.jobFail({ id, token: claimed!.token, error: thrown('x'), decision: PARK, now: t(seconds) });
          return id;
        };
        const old = await parkAt(10);
        const recent = await parkAt(20);
        expect(await fresh.deadLetterPurge({ parkedBefore: t(15) })).toBe(1);
        expect(await fresh.jobGet({ id: old })).toBeNull();
        expect((await fresh.deadLetterList({})).map((j) => j.id)).toEqual([recent]);
      });
    });
  });

  describe('jobPruneFinished', () => {
    it('deletes done and cancelled records finished before the instant, and nothing else', async () => {
      await withFreshStore(async (fresh) => {
        const ids = (
          await fresh.jobSubmit({
            now: t(0),
            jobs: [1, 2, 3, 4, 5].map((i) => spec({ kind: `conf.prune.${i}`, runAt: t(i), maxAttempts: 1 })),
          })
        ).map((r) => r.id);
        const [oldDone, oldCancelled, newDone, dead, pending] = ids;
        const claimed = await fresh.jobClaim({ owner: 'w', limit: 4, leaseMs: LEASE_MS, now: t(4) });
        expect(claimed.map((j) => j.id)).toEqual(ids.slice(0, 4));
        expect(await fresh.jobComplete({ id: oldDone!, token: claimed[0]!.token, now: t(10) })).toBe('done');
        expect(await fresh.jobCancel({ id: oldCancelled!, now: t(20) })).toBe('cancelled');
        expect(await fresh.jobComplete({ id: newDone!, token: claimed[2]!.token, now: t(40) })).toBe('done');
        await fresh.jobFail({ id: dead!, token: claimed[3]!.token, error: thrown('x'), decision: PARK, now: t(5) });

        expect(await fresh.jobPruneFinished({ finishedBefore: t(30) })).toBe(2);
        expect(await fresh.jobGet({ id: oldDone! })).toBeNull();
        expect(await fresh.jobGet({ id: oldCancelled! })).toBeNull();
        expect((await fresh.jobList({})).map((j) => [j.id, j.state])).toEqual([
          [newDone, 'done'],
          [dead, 'dead'],
          [pending, 'pending'],
        ]);
      });
    });
  });

  describe('jobNextRunAt', () => {
    it('is null with no live job, a pending run_at, a live lease’s end, and never later than a lapsed lease', async () => {
      await withFreshStore(async (fresh) => {
        expect(await fresh.jobNextRunAt({ now: t(100) })).toBeNull();
        const late = await submitOne(fresh, { kind: 'conf.next', queue: 'a', runAt: t(500) }, t(0));
        expect(await fresh.jobNextRunAt({ now: t(100) })).toEqual(t(500));
        const soon = await submitOne(fresh, { kind: 'conf.next', queue: 'b', runAt: t(300) }, t(0));
        expect(await fresh.jobNextRunAt({ now: t(100) })).toEqual(t(300));
        expect(await fresh.jobNextRunAt({ now: t(100), queues: ['a'] })).toEqual(t(500));
        expect(await fresh.jobNextRunAt({ now: t(100), queues: ['c'] })).toBeNull();

        const [claimed] = await fresh.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: ['b'], now: t(300) });
        expect(claimed?.id).toBe(soon);
        expect(await fresh.jobNextRunAt({ now: t(310) })).toEqual(t(330));
        const lapsed = await fresh.jobNextRunAt({ now: t(340) });
        expect(lapsed, 'a lapsed lease makes its job claimable already').not.toBeNull();
        expect(lapsed!.getTime()).toBeGreaterThanOrEqual(t(330).getTime());
        expect(lapsed!.getTime()).toBeLessThanOrEqual(t(340).getTime());

        const [reclaimed] = await fresh.jobClaim({
          owner: 'w',
          limit: 1,
          leaseMs: LEASE_MS,
          queues: ['b'],
          now: t(340),
        });
        expect(await fresh.jobComplete({ id: soon, token: reclaimed!.token, now: t(341) })).toBe('done');
        expect(await fresh.jobNextRunAt({ now: t(341) })).toEqual(t(500));
        expect(await fresh.jobCancel({ id: late, now: t(342) })).toBe('cancelled');
        expect(await fresh.jobNextRunAt({ now: t(342) })).toBeNull();
      });
    });
  });

  describe('queueStats', () => {
    it('counts scheduled, available (including lapsed), running, done, cancelled and dead per queue', async () => {
      const q = nextQueue();
      const ids = (
        await store.jobSubmit({
          now: t(0),
          jobs: [
            spec({ kind: 'scheduled', queue: q, runAt: t(500) }),
            spec({ kind: 'available', queue: q, runAt: t(10) }),
            spec({ kind: 'running', queue: q, runAt: t(4) }),
            spec({ kind: 'lapsed', queue: q, runAt: t(5) }),
            spec({ kind: 'done', queue: q, runAt: t(1) }),
            spec({ kind: 'cancelled', queue: q, runAt: t(2) }),
            spec({ kind: 'dead', queue: q, runAt: t(3), maxAttempts: 1 }),
            spec({ kind: 'elsewhere', queue: `${q}_b`, runAt: t(1) }),
          ],
        })
      ).map((r) => r.id);
      const claimed = await store.jobClaim({ owner: 'w', limit: 4, leaseMs: 1_000_000, queues: [q], now: t(4) });
      expect(claimed.map((j) => j.kind)).toEqual(['done', 'cancelled', 'dead', 'running']);
      await store.jobComplete({ id: claimed[0]!.id, token: claimed[0]!.token, now: t(4) });
      await store.jobCancel({ id: claimed[1]!.id, now: t(4) });
      await store.jobFail({
        id: claimed[2]!.id,
        token: claimed[2]!.token,
        error: thrown('x'),
        decision: PARK,
        now: t(4),
      });
      const lapsed = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: 10_000, queues: [q], now: t(6) });
      expect(lapsed.map((j) => j.id)).toEqual([ids[3]]);

      const stats = await store.queueStats({ now: t(100) });
      expect(stats.find((s) => s.queue === q)).toEqual({
        queue: q,
        scheduled: 1,
        available: 2,
        running: 1,
        done: 1,
        cancelled: 1,
        dead: 1,
        unhandled: 0,
      });
      expect(stats.find((s) => s.queue === `${q}_b`)).toEqual({
        queue: `${q}_b`,
        scheduled: 0,
        available: 1,
        running: 0,
        done: 0,
        cancelled: 0,
        dead: 0,
        unhandled: 0,
      });
    });
  });

  describe('subscribe', () => {
    it('wakes a subscriber after a due submit', async () => {
      const q = nextQueue();
      let deliver: (wakeUp: WakeUp) => void = () => {};
      const woke = new Promise<WakeUp>((resolve) => {
        deliver = resolve;
      });
      const unsubscribe = await store.subscribe((wakeUp) => deliver(wakeUp));
      try {
        await store.jobSubmit({ jobs: [spec({ kind: 'conf.wake', queue: q })] });
        const wakeUp = await withTimeout(woke, 10_000, 'wake-up after a due submit');
        if (wakeUp.runAt !== null) {
          expect(wakeUp.runAt.getTime()).toBeLessThanOrEqual((await store.now()).getTime() + 1);
        }
      } finally {
        await unsubscribe();
      }
    });
  });

  describe('two store instances on one database', () => {
    it('see each other’s committed writes at once', async () => {
      const q = nextQueue();
      const other = await openAnother();
      try {
        const id = await submitOne(store, { kind: 'conf.visible', queue: q, runAt: t(1) }, t(0));
        expect((await other.jobGet({ id }))?.state).toBe('pending');
        const [claimed] = await other.jobClaim({ owner: 'other', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(2) });
        expect(claimed?.id).toBe(id);
        expect(await mustGet(id)).toMatchObject({ state: 'running', leaseOwner: 'other' });
      } finally {
        await other.close();
      }
    });

    it('never hand out one job twice when claiming concurrently', async () => {
      const q = nextQueue();
      const total = 120;
      await store.jobSubmit({
        now: t(0),
        jobs: Array.from({ length: total }, (_, i) => spec({ kind: 'conf.race', queue: q, runAt: t(1), payload: i })),
      });
      const instances = [await openAnother(), await openAnother()];
      try {
        const claimedBy = await Promise.all(
          instances.map(async (instance, n) => {
            const mine: string[] = [];
            // Each claimer keeps going until the queue looks empty to it; leases outlive the test.
            for (let round = 0; round < total; round++) {
              const batch = await instance.jobClaim({ owner: `claimer-${n}`, limit: 3, leaseMs: 600_000, queues: [q] });
              if (batch.length === 0) break;
              mine.push(...batch.map((j) => j.id));
            }
            return mine;
          }),
        );
        const all = claimedBy.flat();
        const duplicates = all.filter((id, i) => all.indexOf(id) !== i);
        expect(duplicates, 'ids handed out twice').toEqual([]);
        expect(all).toHaveLength(total);
        const running = await store.jobList({ queue: q, states: ['running'], limit: 1000 });
        expect(running.map((j) => j.token)).toEqual(Array(total).fill(1));
      } finally {
        await Promise.all(instances.map((instance) => instance.close()));
      }
    });
  });
});
