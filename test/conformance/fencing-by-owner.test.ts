/**
 * Conformance: every fenced write matches the claim's own lease owner as well as its token.
 *
 * Why the token alone is not enough: a standby promoted without the primary's last WAL (asynchronous
 * replication) never saw the last claims, so its next claim of such a job issues the same token
 * number again, to another owner. The first holder's write, carrying that number, must still be
 * refused. The store cannot be made to forget commits here, so each test builds the state a
 * promoted standby would be in, a running job whose token equals the one a write carries, under
 * another owner, and checks that the write changes nothing (test/failover/failover.test.ts does it
 * with a real promoted standby). Runs unchanged against every store; time is pinned.
 */
import { describe, expect, it } from 'vitest';
import type { ClaimedJob } from '../../src/job/job.js';
import { storeKinds } from '../support/stores.js';
import { PARK, retryIn, spec, t, thrown, useConformanceDatabase } from './conformance-helpers.js';

const LEASE_MS = 30_000;

describe.each(storeKinds())('%s store: fencing by token and owner', (kind) => {
  const { store, nextQueue } = useConformanceDatabase(kind, 'fence_owner');

  /** One job claimed at t(10) by `owner`: token 1, lease until t(40). */
  async function claimedBy(owner: string): Promise<ClaimedJob> {
    const q = nextQueue();
    await store.jobSubmit({ now: t(0), jobs: [spec({ kind: 'fence.owner', queue: q, runAt: t(1) })] });
    const [job] = await store.jobClaim({ owner, limit: 1, leaseMs: LEASE_MS, queues: [q], now: t(10) });
    expect(job).toMatchObject({ token: 1, leaseOwner: owner });
    return job!;
  }

  /** The job is exactly as the claim left it: running under the same token, owner and lease, no error. */
  async function expectUntouched(job: ClaimedJob): Promise<void> {
    expect(await store.jobGet({ id: job.id })).toMatchObject({
      state: 'running',
      token: job.token,
      leaseOwner: job.leaseOwner,
      leaseUntil: job.leaseUntil,
      attempts: 1,
      errors: [],
    });
  }

  it('refuses a heartbeat with the current token but another owner, and extends the owner’s own', async () => {
    const job = await claimedBy('new-primary/b.1');
    const forged = { id: job.id, token: job.token, leaseOwner: 'old-primary/a.1' };
    expect(await store.jobHeartbeat({ ...forged, leaseMs: LEASE_MS, now: t(20) })).toBeNull();
    expect(await store.jobHeartbeatMany({ leases: [forged], leaseMs: LEASE_MS, now: t(20) })).toEqual([null]);
    await expectUntouched(job);
    expect(await store.jobHeartbeat({ ...job, leaseMs: LEASE_MS, now: t(20) })).toEqual(t(50));
  });

  it('refuses a completion with the current token but another owner, alone and in a batch', async () => {
    const job = await claimedBy('new-primary/b.2');
    const other = await claimedBy('new-primary/b.3');
    const forged = { id: job.id, token: job.token, leaseOwner: 'old-primary/a.2' };
    expect(await store.jobComplete({ ...forged, now: t(20) })).toBe('stale');
    // In a batch each lease is fenced by its own owner: the rightful one beside it is accepted.
    expect(await store.jobCompleteMany({ leases: [forged, other], now: t(20) })).toEqual(['stale', 'done']);
    await expectUntouched(job);
    expect(await store.jobComplete({ ...job, now: t(21) })).toBe('done');
  });

  it('fences a batch whose leases all name one owner, and one whose owners differ or are missing', async () => {
    // Each lease of a batch is fenced by its own owner, whether the batch's leases share one owner,
    // name several or none.
    const a = await claimedBy('new-primary/b.8');
    const b = await claimedBy('new-primary/b.8');
    const c = await claimedBy('new-primary/b.9');
    const forgedAll = [a, b].map((job) => ({ id: job.id, token: job.token, leaseOwner: 'old-primary/a.8' }));
    expect(await store.jobHeartbeatMany({ leases: forgedAll, leaseMs: LEASE_MS, now: t(20) })).toEqual([null, null]);
    expect(await store.jobCompleteMany({ leases: forgedAll, now: t(20) })).toEqual(['stale', 'stale']);
    await expectUntouched(a);
    await expectUntouched(b);
    // One owner for all, one lease stale by its token: only that one is refused.
    const staleToken = { id: a.id, token: a.token + 1, leaseOwner: a.leaseOwner };
    expect(await store.jobHeartbeatMany({ leases: [staleToken, b], leaseMs: LEASE_MS, now: t(21) })).toEqual([
      null,
      t(51),
    ]);
    // Mixed: a lease without an owner (the token alone), another owner's own, and a forged one.
    const tokenOnly = { id: a.id, token: a.token };
    const forgedC = { id: c.id, token: c.token, leaseOwner: 'new-primary/b.8' };
    expect(await store.jobHeartbeatMany({ leases: [tokenOnly, forgedC, b], leaseMs: LEASE_MS, now: t(22) })).toEqual([
      t(52),
      null,
      t(52),
    ]);
    expect(await store.jobCompleteMany({ leases: [tokenOnly, forgedC, b], now: t(23) })).toEqual([
      'done',
      'stale',
      'done',
    ]);
    // The repeated completions, with one owner for all and with owners that differ.
    expect(await store.jobCompleteMany({ leases: [a, b], now: t(24) })).toEqual(['done', 'done']);
    const forgedRepeat = { id: b.id, token: b.token, leaseOwner: 'old-primary/a.8' };
    expect(await store.jobCompleteMany({ leases: [a, forgedRepeat, c], now: t(24) })).toEqual([
      'done',
      'stale',
      'done',
    ]);
  });

  it('answers a repeated completion `done` only for the owner whose completion was accepted', async () => {
    const job = await claimedBy('new-primary/b.4');
    expect(await store.jobComplete({ ...job, now: t(20) })).toBe('done');
    // The same token from another owner is not "our earlier completion whose reply was lost".
    expect(await store.jobComplete({ id: job.id, token: job.token, leaseOwner: 'old-primary/a.4', now: t(21) })).toBe(
      'stale',
    );
    expect(
      await store.jobCompleteMany({
        leases: [{ id: job.id, token: job.token, leaseOwner: 'old-primary/a.4' }, job],
        now: t(21),
      }),
    ).toEqual(['stale', 'done']);
    expect(await store.jobComplete({ ...job, now: t(22) })).toBe('done');
  });

  it('refuses a failure (retry or park) with the current token but another owner: no error recorded, no attempt applied', async () => {
    const job = await claimedBy('new-primary/b.5');
    const forged = { id: job.id, token: job.token, leaseOwner: 'old-primary/a.5' };
    expect(await store.jobFail({ ...forged, error: thrown('late'), decision: retryIn(1000), now: t(20) })).toEqual({
      outcome: 'stale',
    });
    expect(await store.jobFail({ ...forged, error: thrown('late'), decision: PARK, now: t(20) })).toEqual({
      outcome: 'stale',
    });
    await expectUntouched(job);
    expect(await store.jobFail({ ...job, error: thrown('own'), decision: retryIn(1000), now: t(21) })).toEqual({
      outcome: 'retry',
      runAt: t(22),
    });
  });

  it('refuses a release with the current token but another owner, and gives back the owner’s own', async () => {
    const job = await claimedBy('new-primary/b.6');
    expect(await store.jobRelease({ id: job.id, token: job.token, leaseOwner: 'old-primary/a.6', now: t(20) })).toBe(
      'stale',
    );
    await expectUntouched(job);
    expect(await store.jobRelease({ ...job, now: t(21) })).toBe('released');
    expect(await store.jobGet({ id: job.id })).toMatchObject({ state: 'pending', attempts: 0 });
  });

  it('still fences by the token alone when a caller gives no owner (documented in JobLease)', async () => {
    const job = await claimedBy('new-primary/b.7');
    expect(await store.jobHeartbeat({ id: job.id, token: job.token + 1, leaseMs: LEASE_MS, now: t(20) })).toBeNull();
    expect(await store.jobComplete({ id: job.id, token: job.token + 1, now: t(20) })).toBe('stale');
    expect(await store.jobHeartbeat({ id: job.id, token: job.token, leaseMs: LEASE_MS, now: t(20) })).toEqual(t(50));
    expect(await store.jobComplete({ id: job.id, token: job.token, now: t(21) })).toBe('done');
  });
});
