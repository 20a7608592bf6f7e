/**
 * Errors Docket throws on purpose. Expected outcomes (a stale token, a job not found) are values,
 * never exceptions; these are for bad input and broken configuration.
 */

/** Base class for every error Docket raises deliberately, so callers can tell ours from others. */
export class DocketError extends Error {
  /** A stable machine-readable code, e.g. `invalid_input`. */
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Input that breaks a documented rule. `field` names the offending field (dotted path). */
export class ValidationError extends DocketError {
  readonly field: string;

  constructor(field: string, message: string) {
    super('invalid_input', `${field}: ${message}`);
    this.field = field;
  }
}

/** A configuration that cannot work safely, refused before anything starts. */
export class ConfigurationError extends DocketError {
  constructor(message: string) {
    super('invalid_configuration', message);
  }
}

/**
 * A submit reused an idempotency key that a live job of the same queue and kind holds, but with a
 * different payload: answering with the live job would silently drop the caller's new work, so it
 * is refused instead (HTTP 409, field `idempotencyKey`). Nothing of the batch is written.
 */
export class IdempotencyConflictError extends DocketError {
  readonly field: string;
  /** The live job that holds the key. */
  readonly existingId: string;

  constructor(field: string, existingId: string, message: string) {
    super('idempotency_conflict', `${field}: ${message}`);
    this.field = field;
    this.existingId = existingId;
  }
}

/**
 * Errors a handler throws to steer what happens to its job. Each one records a failed attempt
 * (`jobFail`, with this error's message) like any other throw; they differ only in the decision.
 * The worker reads them by their properties (`retryAfterMs`, `retryable`, `snoozeMs`), not by
 * class, so an error of your own carrying the same property works alike (a second copy of the
 * package too).
 */

/**
 * Retry no sooner than `delayMs` from now (a rate limit's Retry-After, a dependency's maintenance
 * window). The attempt counts; the wait is the longer of `delayMs` and the backoff; with no
 * attempts left the job is parked as usual.
 */
export class RetryAfterError extends DocketError {
  /** Read by the worker: wait at least this long before the retry. */
  readonly retryAfterMs: number;

  constructor(message: string, options: { delayMs: number; cause?: unknown }) {
    if (!(Number.isFinite(options.delayMs) && options.delayMs >= 0)) {
      throw new ValidationError(
        'delayMs',
        `must be a finite number of milliseconds >= 0, got ${String(options.delayMs)}`,
      );
    }
    super('retry_after', message, { cause: options.cause });
    this.retryAfterMs = options.delayMs;
  }
}

/**
 * Retrying cannot help (a refused destination, a payload that can never be processed): the job is
 * parked in the dead-letter table at once, whatever attempts remain (BullMQ's UnrecoverableError).
 */
export class DoNotRetryError extends DocketError {
  /** Read by the worker: `false` parks the job at once. */
  readonly retryable = false as const;

  constructor(message: string, options?: { cause?: unknown }) {
    super('do_not_retry', message, options);
  }
}

/**
 * Not now: run the job again after exactly `delayMs`, ignoring the backoff (which may be longer or
 * shorter). It is recorded as a failed attempt through the ordinary `jobFail`, so it counts
 * against `maxAttempts` and leaves an error entry; with no attempts left the job is parked. (A
 * snooze that gives its attempt back would need a store operation the contract does not have.)
 */
export class SnoozeError extends DocketError {
  /** Read by the worker: due again after exactly this long. */
  readonly snoozeMs: number;

  constructor(delayMs: number, message = `snoozed for ${delayMs} ms`) {
    if (!(Number.isFinite(delayMs) && delayMs >= 0)) {
      throw new ValidationError('delayMs', `must be a finite number of milliseconds >= 0, got ${String(delayMs)}`);
    }
    super('snoozed', message);
    this.snoozeMs = delayMs;
  }
}
