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

/**
 * A submit whose database connection kept failing until its retry window closed. Docket sent
 * the submit again after each lost connection under the same reserved job ids (a second send can
 * never write a second job), but no send was confirmed in time, so the outcome is stated here:
 * `not_written` when no send could have reached the database (the ids could not even be
 * reserved), else `unknown`: the jobs in `jobIds` may exist. Look them up (`docket.getJob(id)`)
 * before submitting again, or submit with an idempotency key, which a repeat cannot duplicate.
 */
export class SubmitUnconfirmedError extends DocketError {
  /** Whether the jobs may have been written. */
  readonly outcome: 'not_written' | 'unknown';
  /** The ids the jobs were sent under, in input order (empty when none could be reserved). */
  readonly jobIds: readonly string[];

  constructor(options: {
    outcome: 'not_written' | 'unknown';
    jobIds: readonly string[];
    attempts: number;
    elapsedMs: number;
    cause: unknown;
  }) {
    const { outcome, jobIds, attempts, elapsedMs, cause } = options;
    const last = cause instanceof Error ? cause.message : String(cause);
    const which =
      jobIds.length === 1 ? `job ${jobIds[0]}` : `jobs ${jobIds[0]}…${jobIds[jobIds.length - 1]} (${jobIds.length})`;
    const verdict =
      outcome === 'not_written'
        ? 'nothing was written'
        : `${which} may or may not have been written: look ${jobIds.length === 1 ? 'it' : 'them'} up by id before submitting again`;
    super(
      'submit_unconfirmed',
      `submit not confirmed: the database connection failed on ${attempts} attempt${attempts === 1 ? '' : 's'} ` +
        `over ${Math.round(elapsedMs)} ms (last: ${last}); ${verdict}`,
      { cause },
    );
    this.outcome = outcome;
    this.jobIds = jobIds;
  }
}

/**
 * A batch call (heartbeats, completions) that reached only some of its databases: a sharded store
 * throws it when a shard could not be reached. `results` holds, in input order, the answers of the
 * shards that answered and `undefined` for the items whose shard did not; `cause` is that shard's
 * connection error. A caller may apply the known answers and retry the unknown ones, so one shard's
 * outage does not cost the other shards' jobs their leases.
 */
export class PartialBatchError<T> extends DocketError {
  readonly results: readonly (T | undefined)[];

  constructor(message: string, results: readonly (T | undefined)[], cause: unknown) {
    super('partial_batch', message, { cause });
    this.results = results;
  }
}
