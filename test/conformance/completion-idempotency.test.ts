/**
 * Conformance: completion is idempotent for its own claim (store.ts header). A completion whose
 * commit succeeded but whose reply was lost (RELIABILITY.md fault class 5) is retried; the retry
 * must answer `done`, not `stale`, and change nothing. Any other token, or a job that is not
 * done, still answers `stale`. Runs unchanged against every store; time is pinned (`t(100)` is
 * 100 s after the epoch) so every lease is exact.
 */
import { describe, expect, it } from 'vitest';
import { conformanceStoreKinds } from '../support/stores.js';
import { PARK, spec, submitOne, t, thrown, useConformanceDatabase } from './conformance-helpers.js';

const LEASE_MS = 30_000;

describe.each(conformanceStoreKinds())('%s store: idempotent completion', (kind) => {
  const { store, nextQueue } = useConformanceDatabase(kind, 'idem');

  async function claimOne(queue: string, now: Date, owner = 'worker-1') {
    const claimed = await store.jobClaim({ owner, limit: 1, leaseMs: LEASE_MS, queues: [queue], now });
    expect(claimed, `claim in ${queue} at ${now.toISOString()}`).toHaveLength(1);
    return claimed[0]!;
  }

  it('answers done to a repeated completion with the same token, changing nothing', async () => {
    const q = nextQueue();
    const id = await submitOne(store, { kind: 'idem.repeat', queue: q, runAt: t(100) }, t(0));
    const claimed = await claimOne(q, t(100));
    expect(await store.jobComplete({ id, token: claimed.token, now: t(105) })).toBe('done');
    const first = await store.jobGet({ id });
    expect(await store.jobComplete({ id, token: claimed.token, now: t(200) })).toBe('done');
    expect(await store.jobComplete({ id, token: claimed.token })).toBe('done');
    // Still the first completion's record: the retry wrote nothing (finishedAt not moved to t(200)).
    expect(await store.jobGet({ id })).toEqual(first);
    expect(first).toMatchObject({ state: 'done', token: claimed.token, finishedAt: t(105), attempts: 1 });
  });

  it('answers done to a repeated completion inside a batch, each lease judged by its own token', async () => {
    const q = nextQueue();
    await store.jobSubmit({
      now: t(0),
      jobs: [1, 2, 3].map((i) => spec({ kind: 'idem.many', queue: q, runAt: t(i) })),
    });
    const [a, b, c] = await store.jobClaim({ owner: 'w', limit: 3, leaseMs: LEASE_MS, queues: [q], now: t(10) });
    expect(await store.jobCompleteMany({ now: t(11), leases: [{ id: a!.id, token: a!.token }] })).toEqual(['done']);
    const outcomes = await store.jobCompleteMany({
      now: t(12),
      leases: [
        { id: a!.id, token: a!.token },
        { id: b!.id, token: b!.token + 1 },
        { id: c!.id, token: c!.token },
        { id: a!.id, token: a!.token - 1 },
      ],
    });
    expect(outcomes).toEqual(['done', 'stale', 'done', 'stale']);
    expect(await store.jobGet({ id: a!.id })).toMatchObject({ state: 'done', finishedAt: t(11) });
    expect(await store.jobGet({ id: b!.id })).toMatchObject({ state: 'running', token: b!.token });
    expect(await store.jobGet({ id: c!.id })).toMatchObject({ state: 'done', finishedAt: t(12) });
  });

  it('answers done to both copies of a lease named twice in one batch, and stale to an id that names no job', async () => {
    const q = nextQueue();
    await store.jobSubmit({ now: t(0), jobs: [1, 2].map((i) => spec({ kind: 'idem.twice', queue: q, runAt: t(i) })) });
    const [a, b] = await store.jobClaim({ owner: 'w', limit: 2, leaseMs: LEASE_MS, queues: [q], now: t(10) });
    const outcomes = await store.jobCompleteMany({
      now: t(11),
      leases: [
        { id: a!.id, token: a!.token, leaseOwner: 'w' },
        { id: 'not-a-job-id', token: 1 },
        { id: a!.id, token: a!.token, leaseOwner: 'w' },
        { id: b!.id, token: b!.token, leaseOwner: 'another worker' },
      ],
    });
    expect(outcomes).toEqual(['done', 'stale', 'done', 'stale']);
    expect(await store.jobGet({ id: a!.id })).toMatchObject({ state: 'done', finishedAt: t(11) });
    expect(await store.jobGet({ id: b!.id })).toMatchObject({ state: 'running', token: b!.token });
  });

  it('answers stale to the old owner of a job the new owner completed', async () => {
    const q = nextQueue();
    const id = await submitOne(store, { kind: 'idem.takeover', queue: q, runAt: t(100) }, t(0));
    const old = await claimOne(q, t(100), 'old');
    const next = await claimOne(q, t(100 + LEASE_MS / 1000 + 1), 'new');
    expect(next.token).toBe(old.token + 1);
    expect(await store.jobComplete({ id, token: next.token, now: t(140) })).toBe('done');
    expect(await store.jobComplete({ id, token: old.token, now: t(141) })).toBe('stale');
    expect(await store.jobCompleteMany({ now: t(141), leases: [{ id, token: old.token }] })).toEqual(['stale']);
    expect(await store.jobComplete({ id, token: next.token, now: t(142) })).toBe('done');
  });

  it('answers stale with the current token when the job was cancelled, parked or given back', async () => {
    const q = nextQueue();
    const cancelled = await submitOne(store, { kind: 'idem.cancel', queue: q, runAt: t(100) }, t(0));
    const c = await claimOne(q, t(100));
    expect(await store.jobCancel({ id: cancelled, now: t(101) })).toBe('cancelled');
    expect(await store.jobComplete({ id: cancelled, token: c.token, now: t(102) })).toBe('stale');

    const parked = await submitOne(store, { kind: 'idem.park', queue: q, runAt: t(100) }, t(0));
    const p = await claimOne(q, t(100));
    expect(
      await store.jobFail({ id: parked, token: p.token, error: thrown('boom'), decision: PARK, now: t(101) }),
    ).toEqual({ outcome: 'parked' });
    expect(await store.jobComplete({ id: parked, token: p.token, now: t(102) })).toBe('stale');

    const released = await submitOne(store, { kind: 'idem.release', queue: q, runAt: t(100) }, t(0));
    const r = await claimOne(q, t(100));
    expect(await store.jobRelease({ id: released, token: r.token, now: t(101) })).toBe('released');
    expect(await store.jobComplete({ id: released, token: r.token, now: t(102) })).toBe('stale');
    expect(await store.jobGet({ id: released })).toMatchObject({ state: 'pending' });
  });

  // Last in the file: pruning acts on the whole database, and the records above are checked by now.
  it('answers stale once the done record has been pruned', async () => {
    const q = nextQueue();
    const id = await submitOne(store, { kind: 'idem.pruned', queue: q, runAt: t(100) }, t(0));
    const claimed = await claimOne(q, t(100));
    expect(await store.jobComplete({ id, token: claimed.token, now: t(105) })).toBe('done');
    expect(await store.jobPruneFinished({ finishedBefore: t(106) })).toBeGreaterThanOrEqual(1);
    expect(await store.jobGet({ id })).toBeNull();
    expect(await store.jobComplete({ id, token: claimed.token, now: t(107) })).toBe('stale');
  });
});
