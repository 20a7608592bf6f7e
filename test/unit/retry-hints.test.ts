import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY } from '../../src/job/job-spec.js';
import { backoffBand, decideAfterFailure } from '../../src/retry/backoff.js';
import { seededRandom } from '../../src/retry/random.js';

const policy = { ...DEFAULT_RETRY_POLICY, jitterRatio: 0 };

describe('decideAfterFailure with hints', () => {
  it('waits for a Retry-After longer than the backoff', () => {
    expect(
      decideAfterFailure({
        attempts: 1,
        maxAttempts: 5,
        policy,
        random: seededRandom(1),
        hints: { retryAfterMs: 30_000.4 },
      }),
    ).toEqual({
      kind: 'retry',
      delayMs: 30_001,
    });
  });

  it('never lets a Retry-After shorten the backoff band', () => {
    const random = seededRandom(7);
    for (let attempt = 1; attempt < 5; attempt++) {
      const decision = decideAfterFailure({
        attempts: attempt,
        maxAttempts: 5,
        policy: DEFAULT_RETRY_POLICY,
        random,
        hints: { retryAfterMs: 1 },
      });
      expect(decision.kind).toBe('retry');
      if (decision.kind === 'retry')
        expect(decision.delayMs).toBeGreaterThanOrEqual(backoffBand(DEFAULT_RETRY_POLICY, attempt).minMs);
    }
  });

  it('parks at once when the failure is not retryable, whatever attempts remain', () => {
    expect(
      decideAfterFailure({ attempts: 1, maxAttempts: 5, policy, random: seededRandom(1), hints: { retryable: false } }),
    ).toEqual({
      kind: 'park',
    });
  });

  it('ignores a non-finite Retry-After', () => {
    expect(
      decideAfterFailure({
        attempts: 1,
        maxAttempts: 5,
        policy,
        random: seededRandom(1),
        hints: { retryAfterMs: Number.NaN },
      }),
    ).toEqual({
      kind: 'retry',
      delayMs: 2000,
    });
  });
});
