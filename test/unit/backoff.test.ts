/**
 * Backoff policy (I6): parks at maxAttempts, keeps every delay inside its documented band, spreads
 * jitter roughly uniformly across the band, and gives the design's exact 2, 4, 8, 16 s without it.
 * Draws are seeded; every assertion names its seed so a failure can be replayed.
 */
import { describe, expect, it } from 'vitest';
import type { RetryPolicy } from '../../src/job/job.js';
import { DEFAULT_RETRY_POLICY } from '../../src/job/job-spec.js';
import { backoffBand, decideAfterFailure, retryDelayMs } from '../../src/retry/backoff.js';
import { seededRandom } from '../../src/retry/random.js';

const NO_JITTER: RetryPolicy = { baseDelayMs: 1000, factor: 2, maxDelayMs: 3_600_000, jitterRatio: 0 };

describe('decideAfterFailure', () => {
  it('retries below maxAttempts and parks at and beyond it', () => {
    const decide = (attempts: number, maxAttempts: number) =>
      decideAfterFailure({ attempts, maxAttempts, policy: NO_JITTER, random: () => 0 }).kind;
    expect([1, 2, 3, 4, 5, 6].map((a) => decide(a, 5))).toEqual(['retry', 'retry', 'retry', 'retry', 'park', 'park']);
    expect(decide(1, 1)).toBe('park');
  });

  it('gives exactly 2, 4, 8, 16 s and then parks with jitterRatio 0, whatever the random source says', () => {
    for (const r of [0, 0.5, 0.999_999]) {
      const decisions = [1, 2, 3, 4, 5].map((attempts) =>
        decideAfterFailure({ attempts, maxAttempts: 5, policy: NO_JITTER, random: () => r }),
      );
      expect(decisions, `random() = ${r}`).toEqual([
        { kind: 'retry', delayMs: 2000 },
        { kind: 'retry', delayMs: 4000 },
        { kind: 'retry', delayMs: 8000 },
        { kind: 'retry', delayMs: 16_000 },
        { kind: 'park' },
      ]);
    }
  });
});

describe('backoffBand and retryDelayMs', () => {
  it('documents the default band: 2-2.4 s, 4-4.8 s, 8-9.6 s, 16-19.2 s', () => {
    expect([1, 2, 3, 4].map((n) => backoffBand(DEFAULT_RETRY_POLICY, n))).toEqual([
      { minMs: 2000, maxMs: 2400 },
      { minMs: 4000, maxMs: 4800 },
      { minMs: 8000, maxMs: 9600 },
      { minMs: 16_000, maxMs: 19_200 },
    ]);
  });

  it('caps the nominal delay at maxDelayMs before jitter', () => {
    expect(backoffBand(DEFAULT_RETRY_POLICY, 30)).toEqual({ minMs: 3_600_000, maxMs: 4_320_000 });
  });

  it('keeps every delay inside its band, for many seeded draws', () => {
    const policies: RetryPolicy[] = [
      DEFAULT_RETRY_POLICY,
      { baseDelayMs: 250, factor: 3, maxDelayMs: 60_000, jitterRatio: 1 },
      { baseDelayMs: 1, factor: 1.5, maxDelayMs: 10, jitterRatio: 0.5 },
    ];
    for (const seed of [1, 2, 3, 1234]) {
      const random = seededRandom(seed);
      for (const policy of policies) {
        for (let attempt = 1; attempt <= 25; attempt++) {
          const { minMs, maxMs } = backoffBand(policy, attempt);
          for (let draw = 0; draw < 200; draw++) {
            const delay = retryDelayMs(policy, attempt, random);
            const where = `seed ${seed}, policy ${JSON.stringify(policy)}, attempt ${attempt}, draw ${draw}`;
            expect(Number.isInteger(delay), where).toBe(true);
            expect(delay, where).toBeGreaterThanOrEqual(Math.ceil(minMs));
            if (maxMs > minMs) expect(delay, where).toBeLessThan(maxMs);
          }
        }
      }
    }
  });

  it('spreads jittered delays roughly uniformly across the band', () => {
    const seed = 20_261_130;
    const random = seededRandom(seed);
    const draws = 20_000;
    const buckets = 10;
    const { minMs, maxMs } = backoffBand(DEFAULT_RETRY_POLICY, 3);
    const counts = new Array<number>(buckets).fill(0);
    for (let i = 0; i < draws; i++) {
      const delay = retryDelayMs(DEFAULT_RETRY_POLICY, 3, random);
      const bucket = Math.floor(((delay - minMs) / (maxMs - minMs)) * buckets);
      counts[bucket] = (counts[bucket] ?? 0) + 1;
    }
    // Expected 2000 per bucket, standard deviation about 42: +-10 % is about 5 sigma.
    for (const [bucket, count] of counts.entries()) {
      expect(count, `seed ${seed}, bucket ${bucket} of ${JSON.stringify(counts)}`).toBeGreaterThan(1800);
      expect(count, `seed ${seed}, bucket ${bucket} of ${JSON.stringify(counts)}`).toBeLessThan(2200);
    }
  });

  it('spreads a thousand jobs that failed together over many distinct seconds', () => {
    const seed = 7;
    const random = seededRandom(seed);
    const seconds = new Set(
      Array.from({ length: 1000 }, () => Math.floor(retryDelayMs(DEFAULT_RETRY_POLICY, 4, random) / 1000)),
    );
    // The band 16-19.2 s covers four whole seconds (16, 17, 18, 19): all of them must be hit.
    expect([...seconds].sort(), `seed ${seed}`).toEqual([16, 17, 18, 19]);
  });

  it('lands on the band’s bottom for random() = 0 and stays below its top for random() near 1', () => {
    expect(retryDelayMs(DEFAULT_RETRY_POLICY, 1, () => 0)).toBe(2000);
    expect(retryDelayMs(DEFAULT_RETRY_POLICY, 1, () => 0.999_999_9)).toBe(2399);
  });
});
