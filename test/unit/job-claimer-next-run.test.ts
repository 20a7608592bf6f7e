/**
 * After a short claim the claimer reads the next run time. A job that fell due after that claim
 * went out (a stream of delayed jobs: the next is usually due by the time the answer arrives) is
 * claimed at once; one due before it went out, which the claim should have leased but did not
 * (another worker's claim holds it), is looked at again only after RECHECK_DUE_MS, so the claimer
 * never spins on it. Driven by a ManualClock whose time the scripted store moves while a claim is
 * "in flight", and a store clock equal to the worker's (offset 0).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import type { ClaimedJob } from '../../src/job/job.js';
import type { JobClaimParams, Store } from '../../src/store/store.js';
import { claimerHarness, settle } from '../support/job-claimers.js';

const CLAIM_ROUND_TRIP_MS = 3;

/**
 * Each claim takes CLAIM_ROUND_TRIP_MS of clock time and leases one job (a short claim of 10);
 * each next-run-at read answers `nextRunAt(sentAtMs)`, given when the latest claim was sent.
 */
function streamStore(clock: ManualClock, nextRunAt: (claimSentAtMs: number) => number) {
  const sentAt: number[] = [];
  const store = {
    async now() {
      return new Date(clock.now());
    },
    async subscribe() {
      return async () => {};
    },
    async jobNextRunAt() {
      return new Date(nextRunAt(sentAt.at(-1) ?? clock.now()));
    },
    async jobReleaseByOwner() {
      return 0;
    },
    async jobClaim(_params: JobClaimParams): Promise<ClaimedJob[]> {
      sentAt.push(clock.now());
      clock.advance(CLAIM_ROUND_TRIP_MS);
      return [{ id: String(sentAt.length) } as ClaimedJob];
    },
  } as unknown as Store;
  return { store, sentAt };
}

describe('JobClaimer: the next run time after a short claim', () => {
  const { claimer, stopAll } = claimerHarness();
  afterEach(stopAll);

  it('claims at once a job that fell due after the short claim went out', async () => {
    const clock = new ManualClock(1_000_000);
    // The next job fell due 1 ms after each claim was sent, while that claim was in flight.
    const { store, sentAt } = streamStore(clock, (claimSentAtMs) => claimSentAtMs + 1);
    await claimer(store, clock).start();
    await settle();
    // No time passes outside the claims' own round trips: each next claim follows at once.
    expect(sentAt.length).toBeGreaterThanOrEqual(3);
    expect(sentAt[1]! - sentAt[0]!).toBe(CLAIM_ROUND_TRIP_MS);
  });

  it('waits RECHECK_DUE_MS before looking again for a job due before the claim went out', async () => {
    const clock = new ManualClock(1_000_000);
    // Due 1 ms before each claim was sent: the claim saw it and did not lease it (another worker's).
    const { store, sentAt } = streamStore(clock, (claimSentAtMs) => claimSentAtMs - 1);
    await claimer(store, clock).start();
    await settle();
    expect(sentAt).toHaveLength(1);
    // RECHECK_DUE_MS from the answer, plus the 1 ms every wake timer adds against early firing.
    clock.advance(20);
    await settle();
    expect(sentAt, 'before the recheck delay').toHaveLength(1);
    clock.advance(1);
    await settle();
    expect(sentAt).toHaveLength(2);
  });
});
