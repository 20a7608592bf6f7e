/**
 * A claim sent while others of the same claimer are in flight tells the store how many rows those
 * may take (JobClaimParams.aheadInFlight, decision 0028): the PostgreSQL claim then looks past the
 * first rows they hold instead of coming back short. A claim sent alone says nothing. Driven by a
 * ManualClock and a store whose claims answer only when the test lets them, so what each claim
 * carried, and which were in flight together, is exact.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import type { ClaimedJob } from '../../src/job/job.js';
import type { JobClaimParams, Store } from '../../src/store/store.js';
import { claimerHarness, settle } from '../support/job-claimers.js';

/** A store whose claims wait until `answer` is called, each then leasing its full limit. */
function heldStore() {
  const sent: { params: JobClaimParams; answer: () => void }[] = [];
  const store = {
    async now() {
      return new Date(0);
    },
    async subscribe() {
      return async () => {};
    },
    async jobNextRunAt() {
      return null;
    },
    async jobReleaseByOwner() {
      return 0;
    },
    jobClaim(params: JobClaimParams): Promise<ClaimedJob[]> {
      return new Promise((resolve) => {
        sent.push({
          params,
          answer: () => resolve(Array.from({ length: params.limit }, (_, i) => ({ id: String(i) }) as ClaimedJob)),
        });
      });
    },
  } as unknown as Store;
  return { store, sent };
}

describe('JobClaimer: claims in flight ahead', () => {
  const { claimer, stopAll } = claimerHarness();
  afterEach(stopAll);

  it('tells a claim sent beside others how many rows those may take, and a claim alone nothing', async () => {
    const { store, sent } = heldStore();
    // Room for 40 in claims of at most 10, four in flight at most; each answered claim uses its room.
    let free = 40;
    await claimer(store, new ManualClock(1_000_000), {
      maxConcurrentClaims: 4,
      freeSlots: () => free,
      idleSlots: () => free,
      onClaimed: (jobs) => {
        free -= jobs.length;
      },
    }).start();
    await settle();
    // The first claim goes out alone (no backlog known yet) and says nothing.
    expect(sent.map(({ params }) => params.aheadInFlight)).toEqual([undefined]);
    sent[0]!.answer();
    await settle();
    // It came back full: a backlog. Claims go out side by side, each told what those before it may take.
    const inFlight = sent.slice(1);
    expect(inFlight.map(({ params }) => [params.limit, params.aheadInFlight])).toEqual([
      [10, undefined],
      [10, 10],
      [10, 20],
    ]);
    for (const claim of sent.slice(1)) claim.answer();
    await settle();
    for (const claim of sent.slice(1 + inFlight.length)) claim.answer();
    await settle();
  });
});
