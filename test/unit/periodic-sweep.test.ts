/**
 * PeriodicSweep, the timer loop under the schedule repair and the unhandled-job park: one round at
 * a time, the next armed only after the previous settled, errors reported and retried. Time is a
 * ManualClock, so nothing sleeps.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import { PeriodicSweep, type PeriodicSweepTiming } from '../../src/worker/periodic-sweep.js';
import { deferred } from '../integration/support/deferred.js';

/** Lets the promise callbacks of a settled round run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** The smallest sweep: each round calls `round`. */
class TestSweep extends PeriodicSweep {
  constructor(
    private readonly round: () => Promise<unknown>,
    timing: PeriodicSweepTiming,
  ) {
    super(timing);
  }

  sweep(): Promise<unknown> {
    return this.round();
  }
}

describe('PeriodicSweep', () => {
  it('runs the first round after the first delay and each later one a next delay after the previous settled', async () => {
    const clock = new ManualClock(0);
    const startedAt: number[] = [];
    const delays = [30, 50];
    const sweep = new TestSweep(async () => startedAt.push(clock.now()), {
      firstDelayMs: () => 10,
      nextDelayMs: () => delays.shift() ?? 100,
      onError: (error) => {
        throw error;
      },
      clock,
    });
    sweep.start();
    sweep.start(); // a second start while running arms nothing more
    expect(clock.pendingTimers).toBe(1);
    clock.advance(9);
    expect(startedAt).toEqual([]);
    for (const step of [1, 30, 50, 100]) {
      clock.advance(step);
      await settle();
    }
    expect(startedAt).toEqual([10, 40, 90, 190]);
    await sweep.stop();
    expect(clock.pendingTimers).toBe(0);
  });

  it('never overlaps rounds: a slow round delays the next one, and stop waits for it', async () => {
    const clock = new ManualClock(0);
    const gate = deferred();
    let rounds = 0;
    let finished = 0;
    const sweep = new TestSweep(
      async () => {
        rounds += 1;
        await gate.promise;
        finished += 1;
      },
      {
        firstDelayMs: () => 10,
        nextDelayMs: () => 10,
        onError: () => {},
        clock,
      },
    );
    sweep.start();
    clock.advance(10);
    clock.advance(100);
    expect(rounds).toBe(1);
    expect(clock.pendingTimers).toBe(0);
    const stopped = sweep.stop();
    let stopResolved = false;
    void stopped.then(() => {
      stopResolved = true;
    });
    await settle();
    expect(stopResolved).toBe(false);
    gate.resolve();
    await stopped;
    expect(finished).toBe(1);
    // Stopped mid-round: the round's end arms nothing.
    expect(clock.pendingTimers).toBe(0);
  });

  it('reports a failed round and tries again on the next one', async () => {
    const clock = new ManualClock(0);
    const errors: unknown[] = [];
    let rounds = 0;
    const sweep = new TestSweep(
      async () => {
        rounds += 1;
        if (rounds === 1) throw new Error('store unavailable');
      },
      {
        firstDelayMs: () => 5,
        nextDelayMs: () => 5,
        onError: (error) => errors.push(error),
        clock,
      },
    );
    sweep.start();
    clock.advance(5);
    await settle();
    clock.advance(5);
    await settle();
    expect(rounds).toBe(2);
    expect(errors.map((error) => (error as Error).message)).toEqual(['store unavailable']);
    await sweep.stop();
  });
});
