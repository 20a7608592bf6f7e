/**
 * Conformance: jobReleaseByOwner gives back exactly the leases still held under one claim's owner
 * (for a claim whose answer was lost), like a release: due at once, attempt uncounted. Runs
 * unchanged against every store; time is pinned (`t(100)` is 100 s after the epoch).
 */
import { describe, expect, it } from 'vitest';
import { conformanceStoreKinds } from '../support/stores.js';
import { spec, t, useConformanceDatabase } from './conformance-helpers.js';

const LEASE_MS = 30_000;

describe.each(conformanceStoreKinds())('%s store: release by owner', (kind) => {
  const { store, nextQueue } = useConformanceDatabase(kind, 'owner');

  it('releases every lease of that owner and no other, due at once with the attempt given back', async () => {
    const q = nextQueue();
    await store.jobSubmit({ now: t(0), jobs: [1, 2, 3].map((i) => spec({ kind: 'owner.a', queue: q, runAt: t(i) })) });
    const lost = await store.jobClaim({ owner: 'w/1', limit: 2, leaseMs: LEASE_MS, queues: [q], now: t(10) });
    const kept = await store.jobClaim({ owner: 'w/2', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(10) });
    expect(lost).toHaveLength(2);
    expect(kept).toHaveLength(1);

    expect(await store.jobReleaseByOwner({ owner: 'w/1', now: t(11) })).toBe(2);
    for (const job of lost) {
      expect(await store.jobGet({ id: job.id })).toMatchObject({ state: 'pending', attempts: 0, leaseUntil: null });
    }
    expect(await store.jobGet({ id: kept[0]!.id })).toMatchObject({ state: 'running', attempts: 1, token: 1 });
    // Due at once: another claim takes them right away, with fresh tokens.
    const again = await store.jobClaim({ owner: 'w/3', limit: 10, leaseMs: LEASE_MS, queues: [q], now: t(11) });
    expect(again.map((j) => j.id).sort()).toEqual(lost.map((j) => j.id).sort());
    expect(again.every((j) => j.token === 2 && j.attempts === 1)).toBe(true);
    // The lost claim's tokens are stale now.
    expect(await store.jobComplete({ id: lost[0]!.id, token: lost[0]!.token, now: t(12) })).toBe('stale');
  });

  it('leaves alone a job re-claimed under another owner since, and answers 0 for an unknown owner', async () => {
    const q = nextQueue();
    await store.jobSubmit({ now: t(0), jobs: [spec({ kind: 'owner.b', queue: q, runAt: t(1) })] });
    const [first] = await store.jobClaim({ owner: 'x/1', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(10) });
    // Its lease lapses and another worker takes it.
    const [second] = await store.jobClaim({ owner: 'y/1', limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(41) });
    expect(second).toMatchObject({ id: first!.id, token: 2 });
    expect(await store.jobReleaseByOwner({ owner: 'x/1', now: t(42) })).toBe(0);
    expect(await store.jobGet({ id: first!.id })).toMatchObject({ state: 'running', token: 2, leaseOwner: 'y/1' });
    expect(await store.jobReleaseByOwner({ owner: 'nobody', now: t(42) })).toBe(0);
  });
});
