/**
 * The bench's cross-process wall clock (bench/pg-admin.ts): anchored once per process, so a step
 * of the host's clock must be detected and re-anchored, never silently turned into latency.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { resyncWallClock, wallNowMs } from '../../bench/pg-admin.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('bench wall clock', () => {
  it('agrees with Date.now() to the millisecond while the host clock is steady', () => {
    const drift = resyncWallClock();
    expect(drift).toBeGreaterThan(-2);
    expect(drift).toBeLessThan(2);
    expect(Math.abs(Date.now() - wallNowMs())).toBeLessThan(2);
  });

  it('reports a step of the host clock once, then follows the stepped clock', () => {
    resyncWallClock();
    const realNow = Date.now;
    vi.spyOn(Date, 'now').mockImplementation(() => realNow() + 2_700);
    const drift = resyncWallClock();
    expect(drift).toBeGreaterThan(2_698);
    expect(drift).toBeLessThan(2_702);
    // Re-anchored: later readings match the stepped clock, and the next check finds no drift.
    expect(Math.abs(Date.now() - wallNowMs())).toBeLessThan(2);
    expect(Math.abs(resyncWallClock())).toBeLessThan(2);
    vi.restoreAllMocks();
    // The step undone: detected the same way.
    expect(resyncWallClock()).toBeLessThan(-2_698);
    expect(Math.abs(Date.now() - wallNowMs())).toBeLessThan(2);
  });
});
