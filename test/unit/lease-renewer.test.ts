/**
 * LeaseRenewer when a heartbeat never comes back: a network partition leaves the request unanswered
 * (no error, no reply, for as long as TCP keeps retransmitting), and the worker must still presume
 * the lease lost once its last confirmation runs out, not whenever the request finally fails.
 * Time is a ManualClock; the store is the smallest stub of the one method the renewer calls.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import type { JobLease, Store } from '../../src/store/store.js';
import { type HeldLease, type LeaseLossReason, LeaseRenewer } from '../../src/worker/lease-renewer.js';

/** Lets promise callbacks run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** A store whose heartbeats are confirmed, refused (`refuse`) or never answered (`hang`). */
function heartbeatStore() {
  const state = { hang: false, refuse: false, calls: 0 };
  const store = {
    jobHeartbeatMany: ({ leases }: { leases: JobLease[] }) => {
      state.calls += 1;
      if (state.hang) return new Promise<(Date | null)[]>(() => {});
      return Promise.resolve(leases.map(() => (state.refuse ? null : new Date())));
    },
  } as unknown as Store;
  return { store, state };
}

describe('LeaseRenewer', () => {
  it('presumes a lease lost when its heartbeat hangs, as soon as the last confirmation runs out', async () => {
    const clock = new ManualClock(0);
    const { store, state } = heartbeatStore();
    const lost: { lease: JobLease; reason: LeaseLossReason; at: number }[] = [];
    const renewer = new LeaseRenewer(
      store,
      1000,
      250,
      { onLost: (lease, reason) => lost.push({ lease, reason, at: clock.monotonic() }), onError: () => {} },
      clock,
    );
    const lease = renewer.add({ id: '1', token: 1 }, clock.monotonic());
    renewer.start();
    // Two answered heartbeats (at 250 and 500): the last confirmation was sent at 500.
    for (let i = 0; i < 2; i += 1) {
      clock.advance(250);
      await settle();
    }
    expect(state.calls).toBe(2);
    state.hang = true;
    clock.advance(250); // the heartbeat at 750 goes out and never returns
    await settle();
    expect(state.calls).toBe(3);
    clock.advance(749);
    await settle();
    expect(lost, 'still confirmed until 500 + 1000').toEqual([]);
    expect(renewer.holds(lease)).toBe(true);
    clock.advance(1);
    await settle();
    expect(lost).toEqual([{ lease, reason: 'lease_unconfirmed', at: 1500 }]);
    expect(renewer.holds(lease)).toBe(false);
    // No second heartbeat is sent while the first is still out.
    clock.advance(5000);
    await settle();
    expect(state.calls).toBe(3);
    await Promise.race([renewer.stop(), settle()]);
  });

  it('lets a heartbeat sent after the confirmation ran out (a frozen worker) be answered: a refusal is reported as such', async () => {
    const clock = new ManualClock(0);
    const { store, state } = heartbeatStore();
    state.refuse = true;
    const lost: LeaseLossReason[] = [];
    const renewer = new LeaseRenewer(
      store,
      1000,
      250,
      { onLost: (_l, reason) => lost.push(reason), onError: () => {} },
      clock,
    );
    // Confirmed long ago: by the first heartbeat the confirmation has run out, as after a SIGSTOP.
    renewer.add({ id: '1', token: 1 }, -5000);
    renewer.start();
    clock.advance(250); // the heartbeat goes out
    clock.advance(1); // its answer is not in yet
    expect(lost).toEqual([]);
    await settle();
    expect(lost).toEqual(['heartbeat_refused']);
    expect(state.calls).toBe(1);
    await renewer.stop();
  });

  it('keeps renewing on schedule while heartbeats are answered', async () => {
    const clock = new ManualClock(0);
    const { store, state } = heartbeatStore();
    const lost: LeaseLossReason[] = [];
    const renewer = new LeaseRenewer(
      store,
      1000,
      250,
      { onLost: (_l, reason) => lost.push(reason), onError: () => {} },
      clock,
    );
    renewer.add({ id: '1', token: 1 }, 0);
    renewer.start();
    for (let i = 0; i < 40; i += 1) {
      clock.advance(250);
      await settle();
    }
    expect(state.calls).toBe(40);
    expect(lost).toEqual([]);
    await renewer.stop();
  });

  it("knows a lease by the held lease add() returned: an equal object, or another renewer's lease, is not held here", () => {
    const { store } = heartbeatStore();
    const events = { onLost: () => {}, onError: () => {} };
    const renewer = new LeaseRenewer(store, 1000, 250, events, new ManualClock(0));
    const other = new LeaseRenewer(store, 1000, 250, events, new ManualClock(0));
    const claimed = { id: '7', token: 3, leaseOwner: 'w/a.1' };
    const lease = renewer.add(claimed, 0);
    expect(lease).toMatchObject(claimed);
    expect(renewer.holds(lease)).toBe(true);
    expect(renewer.holds(claimed)).toBe(false);
    // The same job claimed again: another lease, held separately.
    const again = renewer.add(claimed, 0);
    expect(renewer.size).toBe(2);
    const foreign = other.add(claimed, 0);
    expect(renewer.holds(foreign)).toBe(false);
    renewer.remove(foreign);
    renewer.remove(claimed);
    expect(renewer.size).toBe(2);
    expect(other.holds(foreign)).toBe(true);
    renewer.remove(lease);
    renewer.remove(lease);
    expect(renewer.holds(lease)).toBe(false);
    expect(renewer.holds(again)).toBe(true);
    expect(renewer.size).toBe(1);
  });

  it('reports each unconfirmed lease once, even when a report ends another lease the check had found', async () => {
    const clock = new ManualClock(0);
    const { store, state } = heartbeatStore();
    const lost: string[] = [];
    const leases: HeldLease[] = [];
    const renewer: LeaseRenewer = new LeaseRenewer(
      store,
      1000,
      250,
      {
        onLost: (lease) => {
          lost.push(lease.id);
          // The worker ends a lost job's lease; here the first loss also ends the second lease.
          if (lease.id === '1') renewer.remove(leases[1]!);
        },
        onError: () => {},
      },
      clock,
    );
    leases.push(renewer.add({ id: '1', token: 1 }, 0), renewer.add({ id: '2', token: 1 }, 0));
    const fresh = renewer.add({ id: '3', token: 1 }, 900);
    state.hang = true;
    renewer.start();
    clock.advance(250); // the heartbeat goes out and never returns
    await settle();
    clock.advance(750); // 1 and 2 confirmed until 1000, 3 until 1900
    await settle();
    expect(lost).toEqual(['1']);
    expect(renewer.holds(leases[1]!)).toBe(false);
    expect(renewer.holds(fresh)).toBe(true);
    expect(renewer.size).toBe(1);
    await Promise.race([renewer.stop(), settle()]);
  });
});
