/**
 * Runs one handler invocation and turns whatever it does into a value: it never rejects, and a
 * handler that never settles is cut off by its signal, so one bad handler cannot wedge a slot.
 */
import type { ClaimedJob } from '../job/job.js';
import { isDelay, type RetryHints } from '../retry/backoff.js';
import type { JobAbortError, JobContext, JobHandler } from './job-handler.js';
import type { Logger } from './logger.js';
import { childLogger } from './logger.js';

/** How one invocation ended, from the worker's point of view. */
export type HandlerOutcome =
  | { kind: 'returned' }
  | { kind: 'threw'; message: string; detail: string | undefined; hints: RetryHints }
  | { kind: 'aborted' };

/**
 * Reads the retry hints off a thrown value by property, so RetryAfterError (`retryAfterMs`),
 * DoNotRetryError (`retryable: false`), SnoozeError (`snoozeMs`) and any error of the caller's
 * own with the same properties all work: delays must be finite numbers >= 0, anything else is ignored.
 */
export function retryHints(thrown: unknown): RetryHints {
  if (typeof thrown !== 'object' || thrown === null) return {};
  const { retryAfterMs, retryable, snoozeMs } = thrown as {
    retryAfterMs?: unknown;
    retryable?: unknown;
    snoozeMs?: unknown;
  };
  const hints: RetryHints = {
    retryAfterMs: isDelay(retryAfterMs) ? retryAfterMs : undefined,
    retryable: retryable === false ? false : undefined,
  };
  if (isDelay(snoozeMs)) hints.snoozeMs = snoozeMs;
  return hints;
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

/**
 * The cut-off switch of one invocation. Its AbortSignal is created only when the handler reads
 * `ctx.signal` (already aborted if the cut-off came first): an AbortController and its listeners
 * per job were a measurable share of a busy worker's CPU, and most handlers never look.
 */
export class InvocationAbort {
  private controller: AbortController | undefined;
  private error: JobAbortError | undefined;
  private listener: (() => void) | undefined;

  /** The handler's signal, created on first use. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.error) this.controller.abort(this.error);
    }
    return this.controller.signal;
  }

  /** Whether the invocation has been cut off. */
  get aborted(): boolean {
    return this.error !== undefined;
  }

  /** Cuts the invocation off: aborts the signal (if created) and tells the waiting invoker; only the first call counts. */
  abort(error: JobAbortError): void {
    if (this.error) return;
    this.error = error;
    this.controller?.abort(error);
    const listener = this.listener;
    this.listener = undefined;
    listener?.();
  }

  /** Sets the one listener told on cut-off (the invoker's). */
  onAbort(listener: (() => void) | undefined): void {
    this.listener = listener;
  }
}

/**
 * Builds the context a handler receives for `job`; its signal and logger are made on first use.
 * `completeInTransaction` is the worker's fenced in-transaction completion for this attempt.
 */
export function createJobContext(
  job: ClaimedJob,
  abort: InvocationAbort,
  logger: Logger,
  completeInTransaction: (transaction: unknown) => Promise<void>,
): JobContext {
  let jobLogger: Logger | undefined;
  // Own enumerable getters, not a class: a handler that spreads or copies ctx still gets both.
  return {
    jobId: job.id,
    kind: job.kind,
    queue: job.queue,
    attempt: job.attempts,
    maxAttempts: job.maxAttempts,
    token: job.token,
    runAt: job.runAt,
    get signal() {
      return abort.signal;
    },
    get logger() {
      jobLogger ??= childLogger(logger, { jobId: job.id, kind: job.kind, attempt: job.attempts });
      return jobLogger;
    },
    completeInTransaction,
  };
}

/**
 * Invokes `handler` and resolves when it settles or when `abort` cuts it off, whichever is first.
 * `onLateSettle` is told when a handler settles after it was cut off: its result is discarded.
 */
export function invokeHandler(
  handler: JobHandler<never>,
  job: ClaimedJob,
  ctx: JobContext,
  abort: InvocationAbort,
  onLateSettle: () => void,
): Promise<HandlerOutcome> {
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
  if (abort.aborted) return Promise.resolve({ kind: 'aborted' });
  return new Promise<HandlerOutcome>((resolve) => {
    let done = false;
    abort.onAbort(() => {
      if (done) return;
      done = true;
      resolve({ kind: 'aborted' });
    });
    void settled.then((outcome) => {
      abort.onAbort(undefined);
      if (done) {
        onLateSettle();
        return;
      }
      done = true;
      resolve(outcome);
    });
  });
}
