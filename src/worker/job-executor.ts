/**
 * Runs one handler invocation and turns whatever it does into a value: it never rejects, and a
 * handler that never settles is cut off by its signal, so one bad handler cannot wedge a slot.
 */
import type { ClaimedJob } from '../job/job.js';
import type { RetryHints } from '../retry/backoff.js';
import type { JobContext, JobHandler } from './job-handler.js';
import type { Logger } from './logger.js';
import { childLogger } from './logger.js';

/** How one invocation ended, from the worker's point of view. */
export type HandlerOutcome =
  | { kind: 'returned' }
  | { kind: 'threw'; message: string; detail: string | undefined; hints: RetryHints }
  | { kind: 'aborted' };

/** Reads `retryAfterMs` (a finite number >= 0) and `retryable: false` off a thrown value. */
export function retryHints(thrown: unknown): RetryHints {
  if (typeof thrown !== 'object' || thrown === null) return {};
  const { retryAfterMs, retryable } = thrown as { retryAfterMs?: unknown; retryable?: unknown };
  return {
    retryAfterMs:
      typeof retryAfterMs === 'number' && Number.isFinite(retryAfterMs) && retryAfterMs >= 0 ? retryAfterMs : undefined,
    retryable: retryable === false ? false : undefined,
  };
}

/** Limits stored error text so a huge thrown message cannot bloat the job row. */
const MAX_ERROR_MESSAGE = 2000;
const MAX_ERROR_DETAIL = 8000;

/** Turns anything a handler threw into the message and detail stored with the attempt. */
export function describeThrown(thrown: unknown): { message: string; detail: string | undefined } {
  if (thrown instanceof Error) {
    const message = (thrown.message || thrown.name || 'Error').slice(0, MAX_ERROR_MESSAGE);
    return { message, detail: thrown.stack?.slice(0, MAX_ERROR_DETAIL) };
  }
  let message: string;
  try {
    message = typeof thrown === 'string' ? thrown : `non-Error thrown: ${JSON.stringify(thrown)}`;
  } catch {
    message = `non-Error thrown: ${String(thrown)}`;
  }
  return { message: message.slice(0, MAX_ERROR_MESSAGE), detail: undefined };
}

/** Builds the context a handler receives for `job`. */
export function createJobContext(job: ClaimedJob, signal: AbortSignal, logger: Logger): JobContext {
  return {
    jobId: job.id,
    kind: job.kind,
    queue: job.queue,
    attempt: job.attempts,
    maxAttempts: job.maxAttempts,
    token: job.token,
    runAt: job.runAt,
    signal,
    logger: childLogger(logger, { jobId: job.id, kind: job.kind, attempt: job.attempts }),
  };
}

/**
 * Invokes `handler` and resolves when it settles or when `signal` aborts, whichever is first.
 * `onLateSettle` is told when a handler settles after its signal aborted: its result is discarded.
 */
export function invokeHandler(
  handler: JobHandler<never>,
  job: ClaimedJob,
  ctx: JobContext,
  onLateSettle: () => void,
): Promise<HandlerOutcome> {
  const { signal } = ctx;
  const settled = new Promise<HandlerOutcome>((resolve) => {
    // A synchronous throw is a failure like a rejection, never an exception out of the worker.
    let result: unknown;
    try {
      result = handler(job.payload as never, ctx);
    } catch (thrown) {
      resolve({ kind: 'threw', ...describeThrown(thrown), hints: retryHints(thrown) });
      return;
    }
    Promise.resolve(result).then(
      () => resolve({ kind: 'returned' }),
      (thrown: unknown) => resolve({ kind: 'threw', ...describeThrown(thrown), hints: retryHints(thrown) }),
    );
  });
  if (signal.aborted) return Promise.resolve({ kind: 'aborted' });
  return new Promise<HandlerOutcome>((resolve) => {
    let done = false;
    const onAbort = () => {
      if (done) return;
      done = true;
      resolve({ kind: 'aborted' });
    };
    signal.addEventListener('abort', onAbort, { once: true });
    void settled.then((outcome) => {
      signal.removeEventListener('abort', onAbort);
      if (done) {
        onLateSettle();
        return;
      }
      done = true;
      resolve(outcome);
    });
  });
}
