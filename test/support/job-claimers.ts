/**
 * JobClaimer under a ManualClock for unit tests: one free-slot budget of 10, a claim of at most 10
 * in flight at a time, polls a minute apart (never within a test), every queue and kind unless
 * overridden, and every claimer made through
 * {@link claimerHarness} stopped by its `stopAll` (call it in afterEach).
 */
import type { ManualClock } from '../../src/clock/clock.js';
import type { Store } from '../../src/store/store.js';
import { JobClaimer, type JobClaimerOptions } from '../../src/worker/job-claimer.js';

/** Makes claimers and stops every one it made. */
export function claimerHarness() {
  const claimers: JobClaimer[] = [];
  return {
    claimer(store: Store, clock: ManualClock, overrides: Partial<JobClaimerOptions> = {}): JobClaimer {
      const made = new JobClaimer(store, {
        owner: 'w',
        leaseMs: 30_000,
        queues: undefined,
        kinds: () => undefined,
        pollIntervalMs: 60_000,
        claimBatchSize: 10,
        maxConcurrentClaims: 1,
        minClaimSize: () => 1,
        freeSlots: () => 10,
        idleSlots: () => 10,
        onClaimed: () => {},
        onError: () => {},
        random: () => 0.5,
        clock,
        ...overrides,
      });
      claimers.push(made);
      return made;
    },
    async stopAll(): Promise<void> {
      await Promise.all(claimers.splice(0).map((claimer) => claimer.stop()));
    },
  };
}

/** Lets every setImmediate and promise a claimer queued run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i += 1) await new Promise((resolve) => setImmediate(resolve));
}
