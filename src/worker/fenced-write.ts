/**
 * Outcome writes (fail, release) under a lease, retried through database errors while the lease
 * is still held. Giving up is safe: the lease lapses and the job runs again elsewhere, which
 * at-least-once delivery allows.
 */
import type { Clock } from '../clock/clock.js';
import { sleep } from '../clock/clock.js';
import type { Logger } from './logger.js';

/** Outcome writes are retried through errors for at most this long, or leaseMs if longer. */
export const WRITE_RETRY_WINDOW_MS = 10_000;

/** How long a fenced write (single, or in a batch) is retried through errors before it is given up. */
export function writeRetryWindowMs(leaseMs: number): number {
  return Math.max(WRITE_RETRY_WINDOW_MS, leaseMs);
}

/** Logs a fenced write given up after its retry window; its lease then lapses. */
export function logGivingUp(logger: Logger, operation: string, lease: { id: string; token: number }): void {
  logger.error(
    { operation, jobId: lease.id, token: lease.token },
    `docket: giving up ${operation}; the lease will lapse and the job run again`,
  );
}

/** Retry delays after a failed write grow from 50 ms to 2 s, jittered by ±50 %. */
const RETRY_BASE_MS = 50;
const RETRY_MAX_MS = 2000;

/** What {@link writeWhileHeld} needs besides the write. */
export interface FencedWriteOptions {
  /** Names the write in logs and error events (`fail`, `release`). */
  operation: string;
  /** The lease the write is fenced by, for the give-up log line. */
  lease: { id: string; token: number };
  /** Whether the lease is still ours; asked before every try. */
  isHeld(): boolean;
  /** Retry for at least this long (the worker passes its leaseMs). */
  leaseMs: number;
  clock: Clock;
  random: () => number;
  logger: Logger;
  onError(error: unknown, operation: string): void;
}

/**
 * Runs a fenced write, retrying through errors while `isHeld()`. Resolves undefined when the
 * lease is lost or after the retry window, the write's answer otherwise.
 */
export async function writeWhileHeld<T>(options: FencedWriteOptions, write: () => Promise<T>): Promise<T | undefined> {
  const { clock, operation, lease } = options;
  const deadline = clock.monotonic() + writeRetryWindowMs(options.leaseMs);
  for (let attempt = 0; ; attempt += 1) {
    if (!options.isHeld()) return undefined;
    try {
      return await write();
    } catch (error) {
      options.onError(error, operation);
      if (clock.monotonic() >= deadline) {
        logGivingUp(options.logger, operation, lease);
        return undefined;
      }
      await sleep(clock, Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** attempt) * (0.5 + options.random()));
    }
  }
}
