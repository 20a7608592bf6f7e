/**
 * Conformance: a completion with `deleteRecord` (Docket's `retentionMs: 0`, decision 0022)
 * deletes the job's row instead of keeping a done record, fenced exactly as the update is: a
 * stale token, another owner, a job that is not running, or an id that names no job changes
 * nothing and answers `stale`. A deleted row keeps no token, so a repeat answers `stale` too.
 * Runs unchanged against every store; time is pinned (`t(100)` is 100 s after the epoch).
 */
import { describe, expect, it } from 'vitest';
import { conformanceStoreKinds } from '../support/stores.js';
import { spec, submitOne, t, useConformanceDatabase } from './conformance-helpers.js';

const LEASE_MS = 30_000;

describe.each(conformanceStoreKinds())('%s store: completion that deletes the record', (kind) => {
  const { store, nextQueue } = useConformanceDatabase(kind, 'compdel');

  it('deletes the completed job, leaves no dead letter, and answers stale to a repeat', async () => {
    const q = nextQueue();
    const id = await submitOne(store, { kind: 'compdel.one', queue: q, runAt: t(100) }, t(0));
    const [claimed] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(100) });
    expect(claimed?.id).toBe(id);
    const lease = { id, token: claimed!.token, leaseOwner: 'w' };
    expect(await store.jobComplete({ ...lease, deleteRecord: true, now: t(105) })).toBe('done');
    expect(await store.jobGet({ id })).toBeNull();
    expect(await store.deadLetterList({ queue: q })).toEqual([]);
    expect(await store.jobComplete({ ...lease, deleteRecord: true, now: t(106) })).toBe('stale');
    expect(await store.jobCompleteMany({ leases: [lease], deleteRecord: true, now: t(106) })).toEqual(['stale']);
    // Nothing left to claim: the job ran once and is gone.
    expect(await store.jobClaim({ owner: 'w', limit: 5, leaseMs: LEASE_MS, queues: [q], now: t(200) })).toEqual([]);
  });

  it('deletes only the rows whose token and owner are current, judging each lease of a batch alone', async () => {
    const q = nextQueue();
    await store.jobSubmit({
      now: t(0),
      jobs: [1, 2, 3, 4].map((i) => spec({ kind: 'compdel.many', queue: q, runAt: t(i) })),
    });
    const [a, b, c, d] = await store.jobClaim({ owner: 'w', limit: 4, leaseMs: LEASE_MS, queues: [q], now: t(10) });
    const outcomes = await store.jobCompleteMany({
      now: t(11),
      deleteRecord: true,
      leases: [
        { id: a!.id, token: a!.token, leaseOwner: 'w' },
        { id: b!.id, token: b!.token + 1, leaseOwner: 'w' },
        { id: 'not-a-job-id', token: 1 },
        { id: c!.id, token: c!.token, leaseOwner: 'another worker' },
        { id: a!.id, token: a!.token, leaseOwner: 'w' },
        { id: d!.id, token: d!.token },
      ],
    });
    expect(outcomes).toEqual(['done', 'stale', 'stale', 'stale', 'done', 'done']);
    expect(await store.jobGet({ id: a!.id })).toBeNull();
    expect(await store.jobGet({ id: d!.id })).toBeNull();
    // The refused ones are exactly as the claim left them.
    for (const job of [b!, c!]) {
      expect(await store.jobGet({ id: job.id })).toMatchObject({ state: 'running', token: job.token, leaseOwner: 'w' });
    }
    expect(await store.jobCompleteMany({ now: t(12), deleteRecord: true, leases: [b!, c!] })).toEqual(['done', 'done']);
    expect(await store.jobGet({ id: b!.id })).toBeNull();
  });

  it('answers stale and keeps the row when the job is pending again, cancelled or retaken', async () => {
    const q = nextQueue();
    const cancelled = await submitOne(store, { kind: 'compdel.cancel', queue: q, runAt: t(100) }, t(0));
    const [c] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(100) });
    expect(await store.jobCancel({ id: cancelled, now: t(101) })).toBe('cancelled');
    expect(await store.jobComplete({ ...c!, deleteRecord: true, now: t(102) })).toBe('stale');
    expect(await store.jobGet({ id: cancelled })).toMatchObject({ state: 'cancelled' });

    const released = await submitOne(store, { kind: 'compdel.release', queue: q, runAt: t(100) }, t(0));
    const [r] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(100) });
    expect(await store.jobRelease({ ...r!, now: t(101) })).toBe('released');
    expect(await store.jobComplete({ ...r!, deleteRecord: true, now: t(102) })).toBe('stale');
    expect(await store.jobGet({ id: released })).toMatchObject({ state: 'pending' });

    // A lapsed lease retaken by another worker: the old holder's late completion deletes nothing.
    const [old] = await store.jobClaim({ owner: 'old', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(103) });
    expect(old?.id).toBe(released);
    const [next] = await store.jobClaim({
      owner: 'new',
      limit: 1,
      leaseMs: LEASE_MS,
      queues: [q],
      includeLapsed: true,
      now: t(103 + LEASE_MS / 1000 + 1),
    });
    expect(next).toMatchObject({ id: released, token: old!.token + 1 });
    expect(await store.jobComplete({ ...old!, deleteRecord: true, now: t(140) })).toBe('stale');
    expect(await store.jobGet({ id: released })).toMatchObject({ state: 'running', token: next!.token });
    expect(await store.jobComplete({ ...next!, deleteRecord: true, now: t(141) })).toBe('done');
    expect(await store.jobGet({ id: released })).toBeNull();
  });
});
