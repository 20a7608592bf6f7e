/**
 * The automatic prefetch's rule, on a manual clock: a buffer only while claims come back full,
 * sized to what the worker finishes in the window at its observed rate, capped, and gone when the
 * backlog is, or when handlers are slow.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import { AdaptivePrefetch, AUTO_PREFETCH_MAX, AUTO_PREFETCH_WINDOW_MS } from '../../src/worker/adaptive-prefetch.js';

/** `count` handlers settling evenly over `ms` on `clock`, each after `heldMs` in its slot (one slot: ms / count). */
function settleOver(
  clock: ManualClock,
  prefetch: AdaptivePrefetch,
  count: number,
  ms: number,
  heldMs = ms / count,
): void {
  for (let i = 0; i < count; i += 1) {
    clock.advance(ms / count);
    prefetch.settled(heldMs);
  }
}

describe('AdaptivePrefetch', () => {
  it('holds nothing before any claim, and nothing while claims come back short', () => {
    const clock = new ManualClock(0);
    const prefetch = new AdaptivePrefetch(clock);
    expect(prefetch.current()).toBe(0);
    settleOver(clock, prefetch, 1000, 500);
    expect(prefetch.current()).toBe(0);
    prefetch.claimAnswered(3, 10);
    expect(prefetch.current()).toBe(0);
  });

  it('buffers what the worker finishes in the window while the backlog is deeper than a claim', () => {
    const clock = new ManualClock(0);
    const prefetch = new AdaptivePrefetch(clock);
    // 400 jobs per second.
    settleOver(clock, prefetch, 400, 1000);
    prefetch.claimAnswered(10, 10);
    expect(prefetch.ratePerSecond()).toBeCloseTo(400, -1);
    expect(prefetch.current()).toBe(Math.floor((400 * AUTO_PREFETCH_WINDOW_MS) / 1000));
    // The backlog ran out: the next claim came back short, so nothing more is held.
    prefetch.claimAnswered(4, 110);
    expect(prefetch.current()).toBe(0);
  });

  it('is capped, and the cap is the constructor’s', () => {
    const clock = new ManualClock(0);
    const prefetch = new AdaptivePrefetch(clock);
    settleOver(clock, prefetch, 20_000, 1000);
    prefetch.claimAnswered(510, 510);
    expect(prefetch.current()).toBe(AUTO_PREFETCH_MAX);
    const small = new AdaptivePrefetch(clock, 7);
    settleOver(clock, small, 20_000, 1000);
    small.claimAnswered(1, 1);
    expect(small.current()).toBe(7);
  });

  it('gives slow handlers no buffer: a job would wait longer than the window for its slot', () => {
    const clock = new ManualClock(0);
    const prefetch = new AdaptivePrefetch(clock);
    // Two slots, one-second handlers: two jobs per second.
    settleOver(clock, prefetch, 2, 1000, 1000);
    prefetch.claimAnswered(2, 2);
    expect(prefetch.current()).toBe(0);
  });

  it('forgets an old rate: a quiet spell reads as a low rate, and the first settles after it as no burst', () => {
    const clock = new ManualClock(0);
    const prefetch = new AdaptivePrefetch(clock);
    settleOver(clock, prefetch, 4000, 1000);
    prefetch.claimAnswered(10, 10);
    expect(prefetch.current()).toBeGreaterThan(100);
    clock.advance(10_000);
    expect(prefetch.ratePerSecond()).toBeLessThan(1);
    expect(prefetch.current()).toBe(0);
    // Two slow handlers settle together after the quiet spell (a worker started late, say):
    // they open a new bucket, and the rate is still the closed bucket's, not 2 per no time at all.
    prefetch.settled(1000);
    prefetch.settled(1000);
    expect(prefetch.current()).toBe(0);
  });

  it('reads the first settles of a worker started long after it was made as the slow rate they are', () => {
    const clock = new ManualClock(0);
    const prefetch = new AdaptivePrefetch(clock);
    // Made, then started 1.5 s later; two slots of 700 ms handlers.
    clock.advance(1500 + 700);
    prefetch.settled(700);
    prefetch.settled(700);
    prefetch.claimAnswered(2, 2);
    expect(prefetch.current()).toBe(0);
    clock.advance(700);
    prefetch.settled(700);
    prefetch.settled(700);
    expect(prefetch.current()).toBe(0);
  });

  it('gives a spike after a quiet spell its buffer within milliseconds when handlers are fast', () => {
    const clock = new ManualClock(0);
    const prefetch = new AdaptivePrefetch(clock);
    clock.advance(10_000);
    // The first claim (24 free slots) came back full; its no-op handlers settle within 2 ms.
    prefetch.claimAnswered(24, 24);
    settleOver(clock, prefetch, 24, 2, 0.05);
    // Read over the 20 ms minimum span: 24 per 20 ms, 1,200/s, so 300 in the 250 ms window.
    expect(prefetch.current()).toBe(Math.floor((24 * 1000 * AUTO_PREFETCH_WINDOW_MS) / 20 / 1000));
    settleOver(clock, prefetch, 300, 18, 0.05);
    expect(prefetch.current()).toBe(AUTO_PREFETCH_MAX);
  });

  it('reads handlers that settle together over twice their slot time, not as a burst', () => {
    const clock = new ManualClock(0);
    const prefetch = new AdaptivePrefetch(clock);
    clock.advance(10_000);
    prefetch.claimAnswered(24, 24);
    // 24 slots of 200 ms handlers that started together and settle in the same millisecond:
    // 120 per second, a buffer of 30, never 24 per no time at all.
    settleOver(clock, prefetch, 24, 1, 200);
    expect(prefetch.ratePerSecond()).toBeCloseTo(60, 0);
    expect(prefetch.current()).toBeLessThanOrEqual(Math.floor((120 * AUTO_PREFETCH_WINDOW_MS) / 1000));
  });
});
