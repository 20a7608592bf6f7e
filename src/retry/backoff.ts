/**
 * Backoff policy: when a failed job runs again, or whether it is parked. Pure; the random source
 * is injected so every retry time is reproducible under a seed.
 *
 * The band for the retry after failed attempt n (1-based) is
 *   nominal(n) = min(maxDelayMs, baseDelayMs * factor ** n)
 *   delay      ∈ [nominal(n), nominal(n) * (1 + jitterRatio))
 * With the defaults (1 s, x2, 20 %) the retries come after 2-2.4 s, 4-4.8 s, 8-9.6 s, 16-19.2 s.
 * Jitter only ever adds: a retry is never earlier than its nominal delay, and a thousand jobs that
 * failed together spread out instead of knocking the dependency over again in one second.
 */
import type { RetryPolicy } from '../job/job.js';

/** What happens to a job whose attempt just failed. */
export type RetryDecision = { kind: 'retry'; delayMs: number } | { kind: 'park' };

/** The inclusive-exclusive band [minMs, maxMs) a retry delay is drawn from after attempt n. */
export function backoffBand(policy: RetryPolicy, attempt: number): { minMs: number; maxMs: number } {
  const nominal = Math.min(policy.maxDelayMs, policy.baseDelayMs * policy.factor ** attempt);
  return { minMs: nominal, maxMs: nominal * (1 + policy.jitterRatio) };
}

/** A delay inside {@link backoffBand}, whole milliseconds, drawn with `random` (uniform in [0,1)). */
export function retryDelayMs(policy: RetryPolicy, attempt: number, random: () => number): number {
  const { minMs, maxMs } = backoffBand(policy, attempt);
  if (maxMs <= minMs) return Math.round(minMs);
  // floor keeps us below the band's exclusive top; ceil on the bottom keeps us at or above it.
  return Math.max(Math.ceil(minMs), Math.floor(minMs + random() * (maxMs - minMs)));
}

/** What a failed attempt may ask of the policy (a webhook's Retry-After, a request that can never succeed). */
export interface RetryHints {
  /** Wait at least this long before the retry; never shortens the backoff. */
  retryAfterMs?: number | undefined;
  /** `false` parks the job at once: retrying cannot help (a refused destination, a 4xx). */
  retryable?: boolean | undefined;
}

/**
 * Retry or park after attempt `attempts` failed. Attempts are counted at claim time, so
 * `attempts` already includes the attempt that just failed. Hints may lengthen the wait or park
 * at once; they can never make a retry sooner than its backoff band allows.
 */
export function decideAfterFailure(params: {
  attempts: number;
  maxAttempts: number;
  policy: RetryPolicy;
  random: () => number;
  hints?: RetryHints | undefined;
}): RetryDecision {
  if (params.attempts >= params.maxAttempts || params.hints?.retryable === false) return { kind: 'park' };
  const delayMs = retryDelayMs(params.policy, params.attempts, params.random);
  const retryAfterMs = params.hints?.retryAfterMs;
  if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs > delayMs) {
    return { kind: 'retry', delayMs: Math.ceil(retryAfterMs) };
  }
  return { kind: 'retry', delayMs };
}
