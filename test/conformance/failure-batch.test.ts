/**
 * Conformance: `jobFailMany`, the batch a worker writes its failed attempts in (decision 0024).
 * Each failure is judged alone, fenced by its own token and owner like `jobFail`: a retry makes
 * the job pending at now + delay with the attempt's error appended, a park moves it to the
 * dead-letter table with it; a stale token, another owner, a job that is not running or an id
 * that names no job changes nothing and answers `stale`; a lease named twice is written once.
 * Runs unchanged against every store; time is pinned (`t(100)` is 100 s after the epoch).
 */
import { describe, expect, it } from 'vitest';
import { LATEST_RUN_AT_MS } from '../../src/job/instant.js';
import type { JobFailure } from '../../src/store/store.js';
import { conformanceStoreKinds } from '../support/stores.js';
import { spec, submitOne, t, useConformanceDatabase } from './conformance-helpers.js';

const LEASE_MS = 30_000;

function failure(
  lease: { id: string; token: number; leaseOwner?: string | undefined },
  message: string,
  delayMs: number | null,
): JobFailure {
  return {
    id: lease.id,
    token: lease.token,
    leaseOwner: lease.leaseOwner,
    error: { kind: 'thrown', message, detail: `detail of ${message}` },
    decision: delayMs === null ? { kind: 'park' } : { kind: 'retry', delayMs },
  };
}

describe.each(conformanceStoreKinds())('%s store: failed attempts written as a batch', (kind) => {
  const { store, nextQueue } = useConformanceDatabase(kind, 'failbatch');

  it('retries and parks in one call, each as its decision says, answers in input order', async () => {
    const q = nextQueue();
    await store.jobSubmit({
      now: t(0),
      jobs: [1, 2, 3].map((i) => spec({ kind: 'failbatch.mixed', queue: q, runAt: t(i), maxAttempts: 5 })),
    });
    const [a, b, c] = await store.jobClaim({ owner: 'w', limit: 3, leaseMs: LEASE_MS, queues: [q], now: t(10) });
    const outcomes = await store.jobFailMany({
      now: t(20),
      failures: [failure(a!, 'a failed', 5_000), failure(b!, 'b failed', null), failure(c!, 'c failed', 250)],
    });
    expect(outcomes).toEqual([
      { outcome: 'retry', runAt: t(25) },
      { outcome: 'parked' },
      { outcome: 'retry', runAt: new Date(t(20).getTime() + 250) },
    ]);
    const retried = await store.jobGet({ id: a!.id });
    expect(retried).toMatchObject({ state: 'pending', runAt: t(25), leaseUntil: null, attempts: 1 });
    expect(retried?.errors).toEqual([
      expect.objectContaining({ attempt: 1, kind: 'thrown', message: 'a failed', detail: 'detail of a failed' }),
    ]);
    expect(retried?.errors[0]?.at.getTime()).toBe(t(20).getTime());
    const [dead] = await store.deadLetterList({ queue: q });
    expect(dead).toMatchObject({ id: b!.id, state: 'dead', attempts: 1 });
    expect(dead?.errors.map((error) => error.message)).toEqual(['b failed']);
    // Never before its run time: at t(20.1) only c is due again, at t(25) a too.
    const early = await store.jobClaim({ owner: 'w2', limit: 5, leaseMs: LEASE_MS, queues: [q], now: t(20.1) });
    expect(early.map((job) => job.id)).toEqual([]);
    const dueC = await store.jobClaim({ owner: 'w2', limit: 5, leaseMs: LEASE_MS, queues: [q], now: t(21) });
    expect(dueC.map((job) => job.id)).toEqual([c!.id]);
    const dueA = await store.jobClaim({ owner: 'w2', limit: 5, leaseMs: LEASE_MS, queues: [q], now: t(25) });
    expect(dueA.map((job) => [job.id, job.attempts])).toEqual([[a!.id, 2]]);
  });

  it('writes only the failures whose token and owner are current, and a repeated lease once', async () => {
    const q = nextQueue();
    await store.jobSubmit({
      now: t(0),
      jobs: [1, 2, 3, 4].map((i) => spec({ kind: 'failbatch.fence', queue: q, runAt: t(i) })),
    });
    const [a, b, c, d] = await store.jobClaim({ owner: 'w', limit: 4, leaseMs: LEASE_MS, queues: [q], now: t(10) });
    const outcomes = await store.jobFailMany({
      now: t(11),
      failures: [
        failure({ ...a!, leaseOwner: 'w' }, 'first copy', 1_000),
        failure({ id: b!.id, token: b!.token + 1, leaseOwner: 'w' }, 'stale token', 1_000),
        failure({ id: 'not-a-job-id', token: 1 }, 'no such job', 1_000),
        failure({ id: '999999999', token: 1 }, 'unknown id', null),
        failure({ id: c!.id, token: c!.token, leaseOwner: 'another worker' }, 'foreign owner', null),
        failure({ ...a!, leaseOwner: 'w' }, 'second copy', null),
        failure({ id: d!.id, token: d!.token }, 'token alone', null),
      ],
    });
    expect(outcomes).toEqual([
      { outcome: 'retry', runAt: t(12) },
      { outcome: 'stale' },
      { outcome: 'stale' },
      { outcome: 'stale' },
      { outcome: 'stale' },
      { outcome: 'stale' },
      { outcome: 'parked' },
    ]);
    const first = await store.jobGet({ id: a!.id });
    expect(first).toMatchObject({ state: 'pending', runAt: t(12) });
    expect(first?.errors.map((error) => error.message)).toEqual(['first copy']);
    // The refused ones are exactly as the claim left them.
    for (const job of [b!, c!]) {
      expect(await store.jobGet({ id: job.id })).toMatchObject({
        state: 'running',
        token: job.token,
        leaseOwner: 'w',
        errors: [],
      });
    }
    expect((await store.deadLetterList({ queue: q })).map((job) => job.id)).toEqual([d!.id]);
    // A repeat of a written failure finds the job no longer running under that lease.
    expect(await store.jobFailMany({ now: t(13), failures: [failure(a!, 'repeat', 1_000)] })).toEqual([
      { outcome: 'stale' },
    ]);
    expect(await store.jobFailMany({ now: t(13), failures: [] })).toEqual([]);
  });

  it('retries no later than the last instant a job may run at, so a delay of millennia cannot fail its batch', async () => {
    const q = nextQueue();
    await store.jobSubmit({
      now: t(0),
      jobs: [1, 2, 3].map((i) => spec({ kind: 'failbatch.far', queue: q, runAt: t(i) })),
    });
    const [a, b, c] = await store.jobClaim({ owner: 'w', limit: 3, leaseMs: LEASE_MS, queues: [q], now: t(10) });
    const latest = new Date(LATEST_RUN_AT_MS);
    const outcomes = await store.jobFailMany({
      now: t(11),
      failures: [
        failure(a!, 'snoozed for ages', 1e300),
        failure(b!, 'ordinary', 1_000),
        failure(c!, 'max finite', Number.MAX_VALUE),
      ],
    });
    expect(outcomes).toEqual([
      { outcome: 'retry', runAt: latest },
      { outcome: 'retry', runAt: t(12) },
      { outcome: 'retry', runAt: latest },
    ]);
    expect(await store.jobGet({ id: a!.id })).toMatchObject({ state: 'pending', runAt: latest });
    expect(await store.jobGet({ id: b!.id })).toMatchObject({ state: 'pending', runAt: t(12) });
  });

  it('answers stale for a cancelled or retaken job and leaves it as it is', async () => {
    const q = nextQueue();
    const cancelled = await submitOne(store, { kind: 'failbatch.cancel', queue: q, runAt: t(100) }, t(0));
    const [c] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(100) });
    expect(await store.jobCancel({ id: cancelled, now: t(101) })).toBe('cancelled');
    expect(await store.jobFailMany({ now: t(102), failures: [failure(c!, 'late', null)] })).toEqual([
      { outcome: 'stale' },
    ]);
    expect(await store.jobGet({ id: cancelled })).toMatchObject({ state: 'cancelled', errors: [] });

    // A lapsed lease retaken by another worker: the old holder's late failure writes nothing.
    const retaken = await submitOne(store, { kind: 'failbatch.retaken', queue: q, runAt: t(100) }, t(0));
    const [old] = await store.jobClaim({ owner: 'old', limit: 1, leaseMs: 1_000, queues: [q], now: t(100) });
    expect(old?.id).toBe(retaken);
    const [next] = await store.jobClaim({ owner: 'new', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(200) });
    expect(next?.id).toBe(retaken);
    expect(await store.jobFailMany({ now: t(201), failures: [failure(old!, 'late', 1_000)] })).toEqual([
      { outcome: 'stale' },
    ]);
    expect(await store.jobGet({ id: retaken })).toMatchObject({ state: 'running', token: next!.token });
  });
});
