/**
 * Runs one handler invocation and turns whatever it does into a value: it never rejects, and a
 * handler that never settles is cut off by its signal, so one bad handler cannot wedge a slot.
 */
import type { ClaimedJob } from '../job/job.js';
import { replaceUnstorableCharacters } from '../job/json-value.js';
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
    // Cut before cleaning: a cut between a surrogate pair's halves leaves one alone.
    const message = replaceUnstorableCharacters((thrown.message || thrown.name || 'Error').slice(0, MAX_ERROR_MESSAGE));
    const stack =
      typeof thrown.stack === 'string'
        ? replaceUnstorableCharacters(thrown.stack.slice(0, MAX_ERROR_DETAIL))
        : undefined;
    return { message, detail: stack };
  }
  let message: string;
  try {
    message = typeof thrown === 'string' ? thrown : `non-Error thrown: ${JSON.stringify(thrown)}`;
  } catch {
    message = `non-Error thrown: ${String(thrown)}`;
  }
  return { message: replaceUnstorableCharacters(message.slice(0, MAX_ERROR_MESSAGE)), detail: undefined };
}

/** What an {@link InvocationAbort} tells when it cuts its invocation off (the invocation itself). */
export interface CutOffListener {
  cutOff(): void;
}

/**
 * The cut-off switch of one invocation. Its AbortSignal is created only when the handler reads
 * `ctx.signal` (already aborted if the cut-off came first): an AbortController and its listeners
 * per job were a measurable share of a busy worker's CPU, and most handlers never look.
 */
export class InvocationAbort {
  private controller: AbortController | undefined;
  private error: JobAbortError | undefined;
  private listener: CutOffListener | undefined;

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
    listener?.cutOff();
  }

  /** Sets the one listener told on cut-off (the invocation's). */
  onAbort(listener: CutOffListener | undefined): void {
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

/** Who hears how an invocation ended ({@link invokeHandler}). */
export interface InvocationListener {
  /** The invocation ended: the handler settled, or it was cut off first. Told once, never synchronously. */
  handlerSettled(outcome: HandlerOutcome): void;
  /** The handler settled after it was cut off: its result is discarded. Told at most once. */
  handlerSettledLate(): void;
}

/**
 * Invokes `handler` and tells `listener` when it settles or when `abort` cuts it off, whichever is
 * first (and, when the handler settles after a cut-off, that it did).
 *
 * A callback, not a promise: per job this allocates one invocation and the two functions the
 * handler's promise is given, where a promise of its own (with its resolving functions and
 * executor), closures for the race against the cut-off and the caller's `.then` layer were about
 * 0.7 KB of garbage a job, and a drain's collections grow with its garbage (bench/worker-cpu.ts).
 */
export function invokeHandler(
  handler: JobHandler<never>,
  job: ClaimedJob,
  ctx: JobContext,
  abort: InvocationAbort,
  listener: InvocationListener,
): void {
  new HandlerInvocation(abort, listener).start(handler, job, ctx);
}

/** One handler call and the race between its settling and its cut-off. */
class HandlerInvocation implements CutOffListener {
  private done = false;
  private reportLate = true;

  constructor(
    private readonly abort: InvocationAbort,
    private readonly listener: InvocationListener,
  ) {}

  start(handler: JobHandler<never>, job: ClaimedJob, ctx: JobContext): void {
    // A synchronous throw is a failure like a rejection, never an exception out of the worker.
    let result: unknown;
    let threw = false;
    try {
      result = handler(job.payload as never, ctx);
    } catch (thrown) {
      threw = true;
      result = thrown;
    }
    if (this.abort.aborted) {
      // Cut off while the handler was being called: whatever it does later is not reported.
      this.done = true;
      this.reportLate = false;
      queueMicrotask(() => this.listener.handlerSettled(ABORTED));
      return;
    }
    if (threw || !isThenable(result)) {
      // Settled synchronously, so no cut-off can come first; told on a microtask all the same, so
      // the listener never runs inside the call that started the job (where the worker is still
      // starting the jobs it buffered).
      this.done = true;
      const outcome = threw ? threwOutcome(result) : RETURNED;
      queueMicrotask(() => this.listener.handlerSettled(outcome));
      return;
    }
    this.abort.onAbort(this);
    // A native promise (an async handler's) is used as it is: no promise of our own. (Inline
    // arrows, not class fields: tsx, which the benchmarks and tests run through, names every
    // function stored in a field with a property definition per instance.)
    Promise.resolve(result).then(
      () => this.handlerSettled(RETURNED),
      (thrown: unknown) => this.handlerSettled(threwOutcome(thrown)),
    );
  }

  /** {@link CutOffListener.cutOff}: the cut-off came first, unless the handler already settled. */
  cutOff(): void {
    if (this.done) return;
    this.done = true;
    queueMicrotask(() => this.listener.handlerSettled(ABORTED));
  }

  private handlerSettled(outcome: HandlerOutcome): void {
    this.abort.onAbort(undefined);
    if (this.done) {
      if (this.reportLate) this.listener.handlerSettledLate();
      return;
    }
    this.done = true;
    this.listener.handlerSettled(outcome);
  }
}

/** The outcome of an invocation cut off before its handler settled (shared). */
const ABORTED: HandlerOutcome = Object.freeze({ kind: 'aborted' });

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
