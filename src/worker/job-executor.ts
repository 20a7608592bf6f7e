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
 * The context a handler receives for `job`; its signal and logger are made on first use.
 * `completeInTransaction` is the worker's fenced in-transaction completion for this attempt.
 *
 * A class, with `signal` and `logger` as getters on its prototype: an object literal with getters
 * is built by V8 in dictionary mode, about 1.1 KB and 4-5 µs per job (a busy worker's largest
 * single allocation), where this is about 120 bytes and 1 µs. Reading `ctx.signal`, destructuring
 * `const { signal } = ctx` or passing `ctx` on all work; a spread copy (`{ ...ctx }`) holds the
 * data fields only (docs/library.md).
 */
export class WorkerJobContext implements JobContext {
  readonly jobId: string;
  readonly kind: string;
  readonly queue: string;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly token: number;
  readonly runAt: Date;
  readonly completeInTransaction: (transaction: unknown) => Promise<void>;
  readonly #abort: InvocationAbort;
  readonly #workerLogger: Logger;
  #jobLogger: Logger | undefined;

  constructor(
    job: ClaimedJob,
    abort: InvocationAbort,
    logger: Logger,
    completeInTransaction: (transaction: unknown) => Promise<void>,
  ) {
    this.jobId = job.id;
    this.kind = job.kind;
    this.queue = job.queue;
    this.attempt = job.attempts;
    this.maxAttempts = job.maxAttempts;
    this.token = job.token;
    this.runAt = job.runAt;
    this.completeInTransaction = completeInTransaction;
    this.#abort = abort;
    this.#workerLogger = logger;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get logger(): Logger {
    this.#jobLogger ??= childLogger(this.#workerLogger, { jobId: this.jobId, kind: this.kind, attempt: this.attempt });
    return this.#jobLogger;
  }
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
  // One promise of its own per job (it was three layers: a settled promise, a race around it and
  // Promise.resolve of the result): a busy worker runs tens of thousands of these a second.
  return new Promise<HandlerOutcome>((resolve) => {
    let done = false;
    let reportLate = true;
    const handlerSettled = (outcome: HandlerOutcome): void => {
      abort.onAbort(undefined);
      if (done) {
        if (reportLate) onLateSettle();
        return;
      }
      done = true;
      resolve(outcome);
    };
    // A synchronous throw is a failure like a rejection, never an exception out of the worker.
    let result: unknown;
    let threw = false;
    try {
      result = handler(job.payload as never, ctx);
    } catch (thrown) {
      threw = true;
      result = thrown;
    }
    if (abort.aborted) {
      // Cut off while the handler was being called: whatever it does later is not reported.
      done = true;
      reportLate = false;
      resolve({ kind: 'aborted' });
    } else {
      abort.onAbort(() => {
        if (done) return;
        done = true;
        resolve({ kind: 'aborted' });
      });
    }
    if (threw) {
      handlerSettled(threwOutcome(result));
    } else if (isThenable(result)) {
      Promise.resolve(result).then(
        () => handlerSettled(RETURNED),
        (thrown: unknown) => handlerSettled(threwOutcome(thrown)),
      );
    } else {
      handlerSettled(RETURNED);
    }
  });
}

/** The outcome of a handler that returned (shared: it carries nothing of its own). */
const RETURNED: HandlerOutcome = Object.freeze({ kind: 'returned' });

function threwOutcome(thrown: unknown): HandlerOutcome {
  return { kind: 'threw', ...describeThrown(thrown), hints: retryHints(thrown) };
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
