/**
 * The submit path's policy, pure TypeScript (no I/O; randomness injected): when concurrent single
 * submits are flushed to the store as one batch (group commit), and how a submit that lost its
 * database connection is sent again. {@link SubmitBatcher} (submit-batcher.ts) applies it.
 *
 * Flushing: a call that finds the store idle is flushed at once (at the end of the event loop's
 * turn, so calls made in the same turn share it); while a flush is in flight, calls accumulate and
 * go out together when it returns. One flush at a time is the point: 100 callers in flight become
 * one statement and one commit per round trip instead of 100 (each commit is a WAL flush, and a
 * NOTIFY per commit serialises on PostgreSQL's global notify lock). Only a full batch
 * ({@link SUBMIT_BATCH_MAX} calls queued) opens another concurrent flush, up to
 * {@link SUBMIT_CONCURRENT_FLUSHES_MAX}, so a flood is not held behind one round trip.
 *
 * Retrying: only a lost connection is retried (the request was fine; the database went away),
 * with capped, jittered exponential backoff, inside {@link SUBMIT_RETRY_WINDOW_MS}. Every send of
 * one submit carries the same reserved job ids, so a send whose commit was ambiguous (the
 * connection dropped after COMMIT) cannot yield a second job.
 */
import type { Random } from '../retry/random.js';

/** Most single submits one flush carries (the HTTP batch limit too): a bigger statement only adds latency. */
export const SUBMIT_BATCH_MAX = 1000;

/** Most flushes in flight at once; beyond the first, each needs a full batch waiting. */
export const SUBMIT_CONCURRENT_FLUSHES_MAX = 4;

/**
 * How long a submit keeps retrying a lost connection before it fails with
 * SubmitUnconfirmedError, ms: long enough to ride out a PostgreSQL restart or a failover
 * (Patroni's ttl of 10 s to 30 s), short enough that a web request gets its answer.
 */
export const SUBMIT_RETRY_WINDOW_MS = 30_000;

/** First retry delay after a lost connection, ms; doubled per attempt up to {@link SUBMIT_RETRY_MAX_DELAY_MS}. */
export const SUBMIT_RETRY_BASE_DELAY_MS = 50;

/** Longest wait between two sends of one submit, ms: a restarted database is found within a second or two. */
export const SUBMIT_RETRY_MAX_DELAY_MS = 2000;

/** What the flusher knows when it decides. */
export interface FlushState {
  /** Calls validated and waiting for a flush. */
  queued: number;
  /** Flushes sent and not yet answered. */
  inFlight: number;
}

/**
 * How many queued calls to flush now (0: wait for a flush in flight to return). Idle: all of
 * them, up to a batch. Busy: a full batch only, while fewer than the concurrency cap are out.
 */
export function nextFlushSize(state: FlushState): number {
  if (state.queued === 0 || state.inFlight >= SUBMIT_CONCURRENT_FLUSHES_MAX) return 0;
  if (state.inFlight === 0) return Math.min(state.queued, SUBMIT_BATCH_MAX);
  return state.queued >= SUBMIT_BATCH_MAX ? SUBMIT_BATCH_MAX : 0;
}

/**
 * The wait before send `attempt + 1` (attempt ≥ 1 sends failed on a lost connection), ms:
 * base·2^(attempt−1) capped at the maximum, times a jitter factor in [0.5, 1) so a fleet of
 * submitters that lost the database together does not reconnect in one burst.
 */
export function submitRetryDelayMs(attempt: number, random: Random): number {
  const nominal = Math.min(SUBMIT_RETRY_MAX_DELAY_MS, SUBMIT_RETRY_BASE_DELAY_MS * 2 ** Math.max(0, attempt - 1));
  return Math.round(nominal * (0.5 + random() / 2));
}

/**
 * Whether another send fits: the wait before it must end inside the window that opened at the
 * first send (`elapsedMs` since then); otherwise the caller gets its answer now.
 */
export function shouldRetrySubmit(elapsedMs: number, delayMs: number, windowMs: number): boolean {
  return elapsedMs + delayMs < windowMs;
}
