/**
 * The long-poll waiter of remote claims. Waiting claims are grouped by their queues and kinds; a
 * hint of a job due now wakes the longest-waiting claim of each group (`hint`), which passes the
 * wake-up on when its claim came back full; a hint naming a later run time wakes nobody until then,
 * and then one claim per group (`due`). Waking every waiting claim for every submit made each job
 * cost each idle worker a claim and two reads. Real timers and a store whose subscription the test
 * drives; the database clock runs ahead of the server's, so the conversion is exercised.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ClaimWaiter, type WaitEnd } from '../../src/http/claim-waiter.js';
import type { Store, WakeUp } from '../../src/store/store.js';

/** The database clock runs this far ahead of the server's in these tests. */
const DB_AHEAD_MS = 60_000;
/** Longer than any test here: a wait that ends was ended by a hint, a due time or a recheck. */
const POLL_MS = 60_000;
const ALL = ClaimWaiter.groupKey(undefined, undefined);
const REPORTS = ClaimWaiter.groupKey(['reports'], undefined);

function hintedStore() {
  let listener: ((wakeUp: WakeUp) => void) | undefined;
  const store = {
    async subscribe(received: (wakeUp: WakeUp) => void) {
      listener = received;
      return async () => {};
    },
  } as unknown as Store;
  return {
    store,
    hint: (runAt: Date | null, named: { queue?: string; kind?: string } = {}) => listener?.({ runAt, ...named }),
  };
}

const dbNow = () => Date.now() + DB_AHEAD_MS;
/**
 * The database's now and when it was read, as the claim route reads it before a wait. The waiter
 * takes its clock offset from the pair, so a hint at exactly dbNow() is due now however long the
 * wait took to start (Node 24 in CI once took long enough to read it as due a few ms later).
 */
const dbNowRead = () => {
  const dbNowReadAtMs = Date.now();
  return { dbNowMs: dbNowReadAtMs + DB_AHEAD_MS, dbNowReadAtMs };
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts a wait and records how and when it ended. */
function startWait(
  waiter: ClaimWaiter,
  group = ALL,
  nextRunAtMs: number | null = null,
  read: { dbNowMs: number; dbNowReadAtMs: number } = dbNowRead(),
) {
  const state: { end: WaitEnd | undefined; endedAtMs: number } = { end: undefined, endedAtMs: 0 };
  // The empty claim before the wait went out 10 ms ago.
  const times = { untilMs: Date.now() + POLL_MS, nextRunAtMs, ...read, claimSentAtMs: Date.now() - 10 };
  const done = waiter.wait(group, times).then((end) => {
    state.end = end;
    state.endedAtMs = Date.now();
  });
  return { state, done };
}

async function waitingCount(waiter: ClaimWaiter, count: number): Promise<void> {
  while (waiter.waiting !== count) await new Promise((resolve) => setImmediate(resolve));
}

describe('ClaimWaiter', () => {
  const waiters: ClaimWaiter[] = [];
  afterEach(async () => {
    await Promise.all(waiters.splice(0).map((waiter) => waiter.close()));
  });

  function made(store: Store): ClaimWaiter {
    const waiter = new ClaimWaiter(store, POLL_MS);
    waiters.push(waiter);
    return waiter;
  }

  it('groups claims by queues and kinds in any order', () => {
    expect(ClaimWaiter.groupKey(['b', 'a'], ['y', 'x'])).toBe(ClaimWaiter.groupKey(['a', 'b'], ['x', 'y']));
    expect(ClaimWaiter.groupKey(['a'], undefined)).not.toBe(ClaimWaiter.groupKey(undefined, ['a']));
  });

  it('passes by the groups that never claim the queue or kind a hint names', async () => {
    const { store, hint } = hintedStore();
    const waiter = made(store);
    const all = startWait(waiter);
    const reports = startWait(waiter, REPORTS);
    const emails = startWait(waiter, ClaimWaiter.groupKey(['emails'], ['send', 'bounce']));
    await waitingCount(waiter, 3);
    hint(new Date(dbNow()), { queue: 'emails', kind: 'send' });
    await Promise.all([all.done, emails.done]);
    expect([all.state.end, emails.state.end]).toEqual(['hint', 'hint']);
    await sleep(20);
    expect(reports.state.end, 'a claim of the reports queue sleeps through an emails job').toBeUndefined();
    // A later job of another kind sets no timer for the emails group either.
    const emailsAgain = startWait(waiter, ClaimWaiter.groupKey(['emails'], ['send', 'bounce']));
    await waitingCount(waiter, 2);
    hint(new Date(dbNow() + 30), { queue: 'emails', kind: 'report' });
    hint(new Date(dbNow()), { queue: 'reports', kind: 'send' });
    await reports.done;
    expect(reports.state.end).toBe('hint');
    await sleep(80);
    expect(emailsAgain.state.end).toBeUndefined();
    // A hint naming nothing concerns every group.
    hint(new Date(dbNow()));
    await emailsAgain.done;
    expect(emailsAgain.state.end).toBe('hint');
  });

  it('takes the clock offset from when the database now was read, not from when the wait started', async () => {
    const { store, hint } = hintedStore();
    const waiter = made(store);
    // The claim route read the database's now 40 ms before this wait started (a busy event loop).
    // Taken at the wait's start, the offset would be 40 ms short and a job due now would read as
    // due 40 ms later: the wait would end 'due', that late, instead of 'hint' at once.
    const readAtMs = Date.now() - 40;
    const late = startWait(waiter, ALL, null, { dbNowMs: readAtMs + DB_AHEAD_MS, dbNowReadAtMs: readAtMs });
    await waitingCount(waiter, 1);
    const hintedAtMs = Date.now();
    hint(new Date(dbNow()));
    await late.done;
    expect(late.state.end).toBe('hint');
    expect(late.state.endedAtMs - hintedAtMs).toBeLessThan(20);
  });

  it('wakes the longest-waiting claim of each group for a job due now, and the next when it passes on', async () => {
    const { store, hint } = hintedStore();
    const waiter = made(store);
    const [first, second, third] = [startWait(waiter), startWait(waiter), startWait(waiter)];
    const reports = startWait(waiter, REPORTS);
    await waitingCount(waiter, 4);
    hint(new Date(dbNow()));
    await Promise.all([first.done, reports.done]);
    expect([first.state.end, reports.state.end]).toEqual(['hint', 'hint']);
    await sleep(20);
    expect(waiter.waiting, 'one claim per group woken').toBe(2);
    // The woken claim came back full: the next of its group claims too, for the same reason.
    waiter.passOn(ALL, 'hint');
    await second.done;
    expect(second.state.end).toBe('hint');
    expect(third.state.end).toBeUndefined();
    // A hint of unknown time ("look again") wakes one as well.
    hint(null);
    await third.done;
    expect(third.state.end).toBe('hint');
  });

  it('wakes no claim for a job due later, then one claim of each group when it falls due', async () => {
    const { store, hint } = hintedStore();
    const waiter = made(store);
    const waits = [startWait(waiter), startWait(waiter)];
    await waitingCount(waiter, 2);
    const hintedAtMs = Date.now();
    hint(new Date(dbNow() + 300));
    await sleep(150);
    expect(waiter.waiting, 'no claim woken before the job is due').toBe(2);
    await waits[0]!.done;
    expect(waits[0]!.state.end).toBe('due');
    expect(waits[0]!.state.endedAtMs - hintedAtMs).toBeGreaterThanOrEqual(295);
    await sleep(50);
    expect(waits[1]!.state.end, 'the other claim keeps waiting').toBeUndefined();
  });

  it("sets the group's timer by the next run time a claim read, and never later than one already set", async () => {
    const { store, hint } = hintedStore();
    const waiter = made(store);
    const startedAtMs = Date.now();
    const early = startWait(waiter, ALL, dbNow() + 100);
    const late = startWait(waiter, ALL, dbNow() + 5_000);
    await waitingCount(waiter, 2);
    hint(new Date(dbNow() + 4_000));
    await early.done;
    expect(early.state.end).toBe('due');
    expect(early.state.endedAtMs - startedAtMs).toBeLessThan(2_000);
    expect(late.state.end).toBeUndefined();
  });

  it('claims again at once for a next run time past since the empty claim went out, and rechecks soon, without spinning, for one past before it', async () => {
    const { store } = hintedStore();
    const waiter = made(store);
    // Due 5 ms ago, after the claim went out (10 ms ago): that claim could not see it.
    const fresh = startWait(waiter, ALL, dbNow() - 5);
    await fresh.done;
    expect(fresh.state.end).toBe('timer');
    expect(waiter.waiting).toBe(0);
    // Due 20 ms ago, before the claim went out: another claim holds it.
    const startedAtMs = Date.now();
    const held = startWait(waiter, ALL, dbNow() - 20);
    await waitingCount(waiter, 1);
    await held.done;
    expect(held.state.end).toBe('timer');
    expect(held.state.endedAtMs - startedAtMs).toBeGreaterThanOrEqual(15);
  });

  it('after a short claim woken by the timer: claims at once for a job due since it went out, later for one due before', async () => {
    const { store } = hintedStore();
    const waiter = made(store);
    const [a, b] = [startWait(waiter), startWait(waiter)];
    await waitingCount(waiter, 2);
    // Due 1 ms after the claim went out (server clock), already past now: wake a claim now.
    const claimSentAtMs = Date.now() - 10;
    waiter.nextDue(ALL, claimSentAtMs + 1 + DB_AHEAD_MS, dbNowRead(), claimSentAtMs);
    await a.done;
    expect(a.state.end).toBe('due');
    // Due before that claim went out: another claim holds it; look again in RECHECK_DUE_MS.
    const askedAtMs = Date.now();
    waiter.nextDue(ALL, askedAtMs - 50 + DB_AHEAD_MS, dbNowRead(), askedAtMs - 10);
    await sleep(5);
    expect(b.state.end).toBeUndefined();
    await b.done;
    expect(b.state.end).toBe('due');
    expect(b.state.endedAtMs - askedAtMs).toBeGreaterThanOrEqual(15);
  });
});
