/**
 * The submit path's pure policy (src/submit/submit-policy.ts): when a flush goes out and how long
 * a submit that lost its connection waits before the next send.
 */
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../src/retry/random.js';
import {
  nextFlushSize,
  SUBMIT_BATCH_MAX,
  SUBMIT_CONCURRENT_FLUSHES_MAX,
  SUBMIT_RETRY_BASE_DELAY_MS,
  SUBMIT_RETRY_MAX_DELAY_MS,
  SUBMIT_RETRY_WINDOW_MS,
  shouldRetrySubmit,
  submitRetryDelayMs,
} from '../../src/submit/submit-policy.js';

describe('nextFlushSize', () => {
  it('flushes everything queued at once when no flush is in flight', () => {
    expect(nextFlushSize({ queued: 1, inFlight: 0 })).toBe(1);
    expect(nextFlushSize({ queued: 137, inFlight: 0 })).toBe(137);
  });

  it('caps one flush at a batch', () => {
    expect(nextFlushSize({ queued: SUBMIT_BATCH_MAX * 3, inFlight: 0 })).toBe(SUBMIT_BATCH_MAX);
  });

  it('accumulates while a flush is in flight, unless a full batch waits', () => {
    expect(nextFlushSize({ queued: SUBMIT_BATCH_MAX - 1, inFlight: 1 })).toBe(0);
    expect(nextFlushSize({ queued: SUBMIT_BATCH_MAX, inFlight: 1 })).toBe(SUBMIT_BATCH_MAX);
  });

  it('never exceeds the concurrent flush cap, and flushes nothing when nothing waits', () => {
    expect(nextFlushSize({ queued: SUBMIT_BATCH_MAX * 10, inFlight: SUBMIT_CONCURRENT_FLUSHES_MAX })).toBe(0);
    expect(nextFlushSize({ queued: 0, inFlight: 0 })).toBe(0);
  });
});

describe('submit retry backoff', () => {
  it('doubles from the base delay up to the cap, jittered into [0.5, 1) of nominal', () => {
    const random = seededRandom(7);
    for (let attempt = 1; attempt <= 12; attempt++) {
      const nominal = Math.min(SUBMIT_RETRY_MAX_DELAY_MS, SUBMIT_RETRY_BASE_DELAY_MS * 2 ** (attempt - 1));
      for (let draw = 0; draw < 50; draw++) {
        const delay = submitRetryDelayMs(attempt, random);
        expect(delay).toBeGreaterThanOrEqual(Math.round(nominal * 0.5));
        expect(delay).toBeLessThanOrEqual(nominal);
      }
    }
  });

  it('spreads the delays of submitters that failed together', () => {
    const random = seededRandom(11);
    const delays = new Set(Array.from({ length: 100 }, () => submitRetryDelayMs(6, random)));
    expect(delays.size).toBeGreaterThan(50);
  });

  it('sends again only while the wait still ends inside the window', () => {
    expect(shouldRetrySubmit(0, 100, SUBMIT_RETRY_WINDOW_MS)).toBe(true);
    expect(shouldRetrySubmit(SUBMIT_RETRY_WINDOW_MS - 101, 100, SUBMIT_RETRY_WINDOW_MS)).toBe(true);
    expect(shouldRetrySubmit(SUBMIT_RETRY_WINDOW_MS - 100, 100, SUBMIT_RETRY_WINDOW_MS)).toBe(false);
  });
});
