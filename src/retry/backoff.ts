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

/**
 * What a failed attempt may ask of the policy (a webhook's Retry-After, a request that can never
 * succeed, a handler's "not now"). Local handlers give them by throwing RetryAfterError,
 * DoNotRetryError or SnoozeError (or any value with these properties); remote workers send
 * `retryAfterMs` with their fail call. Every path decides through {@link decideAfterFailure}.
 */
export interface RetryHints {
  /** Wait at least this long before the retry; never shortens the backoff. */
  retryAfterMs?: number | undefined;
  /** `false` parks the job at once: retrying cannot help (a refused destination, a 4xx). */
  retryable?: boolean | undefined;
  /**
   * Retry after exactly this long instead of the backoff (SnoozeError). The attempt still counts,
   * so with none left the job is parked.
   */
  snoozeMs?: number | undefined;
}

/**
 * Retry or park after attempt `attempts` failed. Attempts are counted at claim time, so
 * `attempts` already includes the attempt that just failed. Hints may lengthen the wait or park
 * at once; apart from an explicit snooze they can never make a retry sooner than its backoff
 * band allows. Precedence: no attempts left or `retryable: false` parks; then `snoozeMs` sets the
 * delay outright; otherwise the backoff, lengthened to `retryAfterMs` when that is longer.
 * Invalid hint values (negative, NaN, infinite) are ignored.
 */
export function decideAfterFailure(params: {
  attempts: number;
  maxAttempts: number;
  policy: RetryPolicy;
  random: () => number;
  hints?: RetryHints | undefined;
}): RetryDecision {
  if (params.attempts >= params.maxAttempts || params.hints?.retryable === false) return { kind: 'park' };
  const snoozeMs = params.hints?.snoozeMs;
  if (isDelay(snoozeMs)) return { kind: 'retry', delayMs: Math.ceil(snoozeMs) };
  const delayMs = retryDelayMs(params.policy, params.attempts, params.random);
  const retryAfterMs = params.hints?.retryAfterMs;
  if (isDelay(retryAfterMs) && retryAfterMs > delayMs) {
    return { kind: 'retry', delayMs: Math.ceil(retryAfterMs) };
  }
  return { kind: 'retry', delayMs };
}

/** A usable delay hint: a finite number of milliseconds >= 0. */
export function isDelay(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}
