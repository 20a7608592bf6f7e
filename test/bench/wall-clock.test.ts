/**
 * The bench's cross-process wall clock (bench/pg-admin.ts): anchored once per process, so a step
 * of the host's clock must be detected and re-anchored, never silently turned into latency.
 *
 * Both clocks are scripted here (performance.now and Date.now), so the test does not depend on
 * this VM's clock staying steady or on the process not being descheduled between two reads.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { resyncWallClock, wallNowMs } from '../../bench/pg-admin.js';

/** Scripted clocks: monotonic ms since the process started, and the host's wall-clock step. */
let monotonicMs = 0;
let wallStepMs = 0;
/** Reads of performance.now after which the process is descheduled for 4 ms. */
let descheduleAfterReads: number[] = [];
let reads = 0;

function scriptedWallMs(): number {
  return Math.floor(performance.timeOrigin + monotonicMs + wallStepMs);
}

beforeEach(() => {
  monotonicMs = 1_000.25;
  wallStepMs = 0;
  descheduleAfterReads = [];
  reads = 0;
  vi.spyOn(performance, 'now').mockImplementation(() => {
    reads++;
    const reading = monotonicMs;
    if (descheduleAfterReads.includes(reads)) monotonicMs += 4;
    return reading;
  });
  vi.spyOn(Date, 'now').mockImplementation(scriptedWallMs);
  resyncWallClock(); // whatever an earlier test left, start anchored on the scripted clocks
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe('bench wall clock', () => {
  it('agrees with Date.now() to the millisecond while the host clock is steady', () => {
    monotonicMs += 12_345.5;
    const drift = resyncWallClock();
    expect(drift).toBeGreaterThan(-1);
    expect(drift).toBeLessThanOrEqual(0);
    expect(Math.abs(Date.now() - wallNowMs())).toBeLessThan(1);
  });

  it('reports a step of the host clock once, then follows the stepped clock', () => {
    wallStepMs = 2_700;
    const drift = resyncWallClock();
    expect(drift).toBeGreaterThan(2_698);
    expect(drift).toBeLessThan(2_701);
    // Re-anchored: later readings match the stepped clock, and the next check finds no drift.
    monotonicMs += 500;
    expect(Math.abs(Date.now() - wallNowMs())).toBeLessThan(1);
    expect(Math.abs(resyncWallClock())).toBeLessThan(1);
    // The step undone: detected the same way.
    wallStepMs = 0;
    expect(resyncWallClock()).toBeLessThan(-2_699);
    expect(Math.abs(Date.now() - wallNowMs())).toBeLessThan(1);
  });

  it('is not fooled by the process being descheduled between its reads of the two clocks', () => {
    // The next resync is paused for 4 ms just after its first read of the monotonic clock, so its
    // first reading of the wall clock is 4 ms late: taken as it is, that is a 4 ms drift.
    descheduleAfterReads = [reads + 1];
    const drift = resyncWallClock();
    expect(drift).toBeGreaterThan(-1);
    expect(drift).toBeLessThanOrEqual(0);
    expect(Math.abs(Date.now() - wallNowMs())).toBeLessThan(1);
  });
});
