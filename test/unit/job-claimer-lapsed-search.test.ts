/**
 * The claimer asks the store for lapsed leases in at most one claim per LAPSED_SEARCH_INTERVAL_MS
 * (its other claims lease due pending jobs only), and asks again at once after a searching claim
 * failed. Driven by a ManualClock and a store that answers claims from a script, so the flags
 * each claim carried are exact.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import type { ClaimedJob } from '../../src/job/job.js';
import type { JobClaimParams, Store, WakeUp } from '../../src/store/store.js';
import { LAPSED_SEARCH_INTERVAL_MS } from '../../src/worker/lapsed-search-pacer.js';
import { claimerHarness, settle } from '../support/job-claimers.js';

/** A store whose claims answer from `answers` in turn: a job count, or an error to throw. */
function scriptedStore(answers: (number | Error)[]) {
  const sent: JobClaimParams[] = [];
  let wake: ((wakeUp: WakeUp) => void) | undefined;
  const store = {
    async now() {
      return new Date(0);
    },
    async subscribe(listener: (wakeUp: WakeUp) => void) {
      wake = listener;
      return async () => {};
    },
    async jobNextRunAt() {
      return null;
    },
    async jobReleaseByOwner() {
      return 0;
    },
    async jobClaim(params: JobClaimParams): Promise<ClaimedJob[]> {
      sent.push(params);
      const answer = answers.shift() ?? 0;
      if (answer instanceof Error) throw answer;
      return Array.from({ length: Math.min(answer, params.limit) }, (_, i) => ({ id: String(i) }) as ClaimedJob);
    },
  } as unknown as Store;
  return { store, sent, wakeUp: () => wake?.({ runAt: null }) };
}

describe('JobClaimer: the lapsed-lease search', () => {
  const { claimer, stopAll } = claimerHarness();
  afterEach(stopAll);

  it('searches in the first claim, then in no claim until the interval has passed', async () => {
    const clock = new ManualClock(1_000_000);
    // A backlog: four full claims back to back, then a short one.
    const { store, sent, wakeUp } = scriptedStore([10, 10, 10, 10, 3, 0]);
    await claimer(store, clock).start();
    await settle();
    expect(sent.map((params) => params.includeLapsed)).toEqual([true, false, false, false, false]);

    clock.advance(LAPSED_SEARCH_INTERVAL_MS - 1);
    wakeUp();
    await settle();
    expect(sent.at(-1)?.includeLapsed, 'one ms short of the interval').toBe(false);

    clock.advance(1);
    wakeUp();
    await settle();
    expect(sent.at(-1)?.includeLapsed, 'the interval has passed').toBe(true);
  });

  it('searches again in the next claim when a searching claim failed', async () => {
    const clock = new ManualClock(1_000_000);
    const { store, sent } = scriptedStore([new Error('connection terminated'), 0]);
    await claimer(store, clock).start();
    await settle();
    expect(sent).toHaveLength(1);
    // The failed claim backs off (50 ms at most for a first failure), then claims again.
    clock.advance(50);
    await settle();
    expect(sent.map((params) => params.includeLapsed)).toEqual([true, true]);
  });
});
