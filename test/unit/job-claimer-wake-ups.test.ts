/**
 * A wake-up that names a queue or kind the claimer never claims costs it nothing: no claim, no
 * timer. Workers of other services share the database's NOTIFY channel, and each claim they sent
 * for another's submit could find nothing (decision 0025). One naming the claimer's own queue and
 * kind, or naming neither, is claimed at once as before.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import type { Store, WakeUp } from '../../src/store/store.js';
import { claimerHarness, settle } from '../support/job-claimers.js';

/** A store whose claims find nothing; it counts them and hands back the claimer's wake-up listener. */
function emptyStore() {
  const state = { claims: 0, wake: (_wakeUp: WakeUp) => {} };
  const store = {
    async now() {
      return new Date(0);
    },
    async subscribe(listener: (wakeUp: WakeUp) => void) {
      state.wake = listener;
      return async () => {};
    },
    async jobNextRunAt() {
      return null;
    },
    async jobReleaseByOwner() {
      return 0;
    },
    async jobClaim() {
      state.claims += 1;
      return [];
    },
  } as unknown as Store;
  return { store, state };
}

describe('JobClaimer: wake-ups naming a queue and kind', () => {
  const { claimer, stopAll } = claimerHarness();
  afterEach(stopAll);

  it('ignores a wake-up for another queue or kind, due now or later, and claims for its own', async () => {
    const clock = new ManualClock(0);
    const { store, state } = emptyStore();
    await claimer(store, clock, { queues: ['emails'], kinds: () => ['send'] }).start();
    await settle();
    const atStart = state.claims;
    expect(atStart).toBe(1);

    state.wake({ runAt: new Date(clock.now()), queue: 'emails', kind: 'report' });
    state.wake({ runAt: new Date(clock.now()), queue: 'reports', kind: 'send' });
    await settle();
    expect(state.claims).toBe(atStart);

    // A later run time of another kind sets no timer either.
    state.wake({ runAt: new Date(clock.now() + 5_000), queue: 'emails', kind: 'report' });
    clock.advance(6_000);
    await settle();
    expect(state.claims).toBe(atStart);

    state.wake({ runAt: new Date(clock.now()), queue: 'emails', kind: 'send' });
    await settle();
    expect(state.claims).toBe(atStart + 1);

    // A wake-up that names nothing (an earlier release's payload, a reconnect) concerns everyone.
    state.wake({ runAt: new Date(clock.now()) });
    await settle();
    expect(state.claims).toBe(atStart + 2);
    state.wake({ runAt: null });
    await settle();
    expect(state.claims).toBe(atStart + 3);
  });

  it('heeds a later wake-up of its own kind with a timer', async () => {
    const clock = new ManualClock(0);
    const { store, state } = emptyStore();
    await claimer(store, clock, { queues: ['emails'], kinds: () => ['send'] }).start();
    await settle();
    const atStart = state.claims;
    state.wake({ runAt: new Date(clock.now() + 5_000), queue: 'emails', kind: 'send' });
    await settle();
    expect(state.claims).toBe(atStart);
    clock.advance(5_001);
    await settle();
    expect(state.claims).toBe(atStart + 1);
  });

  it('claims for any queue and kind when it claims every one, and for a kind added while running', async () => {
    const clock = new ManualClock(0);
    const catchAll = emptyStore();
    await claimer(catchAll.store, clock).start();
    await settle();
    const catchAllAtStart = catchAll.state.claims;
    catchAll.state.wake({ runAt: new Date(clock.now()), queue: 'anything', kind: 'at.all' });
    await settle();
    expect(catchAll.state.claims).toBe(catchAllAtStart + 1);

    const kinds = ['send'];
    const growing = emptyStore();
    await claimer(growing.store, clock, { kinds: () => kinds }).start();
    await settle();
    const atStart = growing.state.claims;
    growing.state.wake({ runAt: new Date(clock.now()), queue: 'default', kind: 'report' });
    await settle();
    expect(growing.state.claims).toBe(atStart);
    // A handler registered later: the claimer reads its kinds at every wake-up.
    kinds.push('report');
    growing.state.wake({ runAt: new Date(clock.now()), queue: 'default', kind: 'report' });
    await settle();
    expect(growing.state.claims).toBe(atStart + 1);
  });
});
