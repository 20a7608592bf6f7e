/**
 * Submit input and its validation. Everything a caller can pass is checked here, before any
 * store sees it, so bad input is refused with a {@link ValidationError} naming the field and
 * nothing is written.
 */
import { BUILTIN_QUEUE, isBuiltinKind } from './builtin-kinds.js';
import { ValidationError } from './errors.js';
import { describe, finiteAtLeast, integerIn, isPlainObject, rejectUnknownFields } from './field-checks.js';
import { LATEST_RUN_AT_MS, parseInstant } from './instant.js';
import type { JsonValue, RetryPolicy } from './job.js';
import { serializePayload, validateStorableText } from './json-value.js';

// Re-exported so existing imports of these names from job-spec keep working.
export { describe, finiteAtLeast, integerIn, isPlainObject, rejectUnknownFields } from './field-checks.js';
export { LATEST_RUN_AT_MS, parseInstant, RFC3339_INSTANT_PATTERN } from './instant.js';
export {
  checkJsonValue,
  MAX_PAYLOAD_BYTES,
  MAX_PAYLOAD_DEPTH,
  serializePayload,
  unstorableReason,
  validateStorableText,
} from './json-value.js';

/** Longest idempotency key accepted, in characters. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 200;
/** Longest job kind accepted, in characters. */
export const MAX_KIND_LENGTH = 200;
/** Queue names: letters, digits and `_ . : -`, 1 to 64 characters. */
export const QUEUE_NAME_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;
/** Priorities are small integers; lower runs first. Fits a PostgreSQL smallint. */
export const PRIORITY_RANGE = { min: -32768, max: 32767 } as const;
/** maxAttempts bounds. */
export const MAX_ATTEMPTS_RANGE = { min: 1, max: 1000 } as const;
/**
 * Longest `delayMs` accepted: 100 years. The delay is added to the database's clock, which
 * validation cannot read, so the bound is fixed well inside {@link LATEST_RUN_AT_MS} for any
 * plausible "now"; a larger delay is nearly always seconds given as milliseconds twice over.
 */
export const MAX_DELAY_MS = 100 * 365.25 * 24 * 3600 * 1000;

/** The defaults of docs/design.md: five attempts, delays of 2, 4, 8, 16 s, up to 20 % jitter added. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  baseDelayMs: 1000,
  factor: 2,
  maxDelayMs: 60 * 60 * 1000,
  jitterRatio: 0.2,
});
export const DEFAULT_MAX_ATTEMPTS = 5;
export const DEFAULT_QUEUE = 'default';

/** What a caller passes to submit a job. */
export interface SubmitInput<P = JsonValue> {
  /** Which handler runs it. */
  kind: string;
  /** Any JSON-serialisable value; `undefined` is stored as `null`. */
  payload?: P;
  /** Earliest start: a Date, epoch milliseconds or an RFC 3339 string with an offset. Omit (with no delayMs) to run as soon as possible. */
  runAt?: Date | number | string;
  /** Start this long after the database's now (at most {@link MAX_DELAY_MS}, 100 years); exclusive with runAt. */
  delayMs?: number;
  /** Lower runs first within a queue; default 0. */
  priority?: number;
  /** Named queue; default `default`. */
  queue?: string;
  /** Claims allowed before the job is parked; default 5. */
  maxAttempts?: number;
  /** Overrides of {@link DEFAULT_RETRY_POLICY}. */
  retry?: Partial<RetryPolicy>;
  /** Per-attempt time limit in ms; the handler's signal aborts when it passes. */
  timeoutMs?: number;
  /** A repeated submit with the same key, while the first job is live, returns the first job's id. */
  idempotencyKey?: string;
  /** Spread the start uniformly over [runAt, runAt + jitterMs), never earlier. */
  jitterMs?: number;
}

/** A validated, normalised job, ready for a store to write. */
export interface JobSpec {
  kind: string;
  queue: string;
  /** The payload as JSON text, already size-checked. */
  payloadJson: string;
  priority: number;
  /** Absolute earliest start; null means "the database's now plus delayMs". */
  runAt: Date | null;
  /** Added to the database's now when runAt is null. */
  delayMs: number;
  maxAttempts: number;
  retryPolicy: RetryPolicy;
  timeoutMs: number | null;
  idempotencyKey: string | null;
  scheduleId: string | null;
  scheduleSlot: Date | null;
}

const SUBMIT_FIELDS = new Set<string>([
  'kind',
  'payload',
  'runAt',
  'delayMs',
  'priority',
  'queue',
  'maxAttempts',
  'retry',
  'timeoutMs',
  'idempotencyKey',
  'jitterMs',
]);
const RETRY_FIELDS = new Set<string>(['baseDelayMs', 'factor', 'maxDelayMs', 'jitterRatio']);

/** Validates a retry policy override and merges it over the defaults. */
export function normalizeRetryPolicy(value: unknown, field = 'retry'): RetryPolicy {
  if (value === undefined) return DEFAULT_RETRY_POLICY;
  if (!isPlainObject(value)) throw new ValidationError(field, `must be an object, got ${describe(value)}`);
  rejectUnknownFields(value, RETRY_FIELDS, `${field}.`);
  const merged = { ...DEFAULT_RETRY_POLICY, ...value } as Record<string, unknown>;
  const policy: RetryPolicy = {
    baseDelayMs: finiteAtLeast(`${field}.baseDelayMs`, merged.baseDelayMs, 0),
    factor: finiteAtLeast(`${field}.factor`, merged.factor, 1),
    maxDelayMs: finiteAtLeast(`${field}.maxDelayMs`, merged.maxDelayMs, 0),
    jitterRatio: finiteAtLeast(`${field}.jitterRatio`, merged.jitterRatio, 0),
  };
  if (policy.jitterRatio > 1)
    throw new ValidationError(`${field}.jitterRatio`, `must be at most 1, got ${policy.jitterRatio}`);
  return policy;
}

/** Validates a job kind. */
export function validateKind(value: unknown, field = 'kind'): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new ValidationError(field, `must be a non-empty string, got ${describe(value)}`);
  }
  if (value.length > MAX_KIND_LENGTH) throw new ValidationError(field, `must be at most ${MAX_KIND_LENGTH} characters`);
  return validateStorableText(field, value);
}

/** Validates a queue name. */
export function validateQueue(value: unknown, field = 'queue'): string {
  if (typeof value !== 'string' || !QUEUE_NAME_PATTERN.test(value)) {
    throw new ValidationError(
      field,
      `must match ${QUEUE_NAME_PATTERN} (letters, digits, _ . : -), got ${describe(value)}`,
    );
  }
  return value;
}

/**
 * The queue of a job: built-in kinds live on {@link BUILTIN_QUEUE} (their default), and no user
 * kind may use it, so local built-in workers and remote workers can never take each other's jobs.
 */
function resolveQueue(kind: string, value: unknown, field: string): string {
  if (isBuiltinKind(kind)) {
    if (value === undefined || value === BUILTIN_QUEUE) return BUILTIN_QUEUE;
    throw new ValidationError(
      field,
      `${kind} jobs run on the reserved queue ${BUILTIN_QUEUE}; leave queue out, got ${describe(value)}`,
    );
  }
  if (value === undefined) return DEFAULT_QUEUE;
  const queue = validateQueue(value, field);
  if (queue === BUILTIN_QUEUE) {
    throw new ValidationError(field, `${BUILTIN_QUEUE} is reserved for Docket's built-in kinds`);
  }
  return queue;
}

/**
 * Validates one submit input and turns it into a {@link JobSpec}.
 * @param random uniform in [0, 1); injected so jitter is reproducible in tests.
 */
export function normalizeSubmit(input: unknown, random: () => number = Math.random, field = ''): JobSpec {
  const at = (name: string) => `${field}${name}`;
  if (!isPlainObject(input)) throw new ValidationError(field || 'job', `must be an object, got ${describe(input)}`);
  rejectUnknownFields(input, SUBMIT_FIELDS, field);

  const kind = validateKind(input.kind, at('kind'));
  const queue = resolveQueue(kind, input.queue, at('queue'));
  const payloadJson = serializePayload(at('payload'), input.payload);
  const priority =
    input.priority === undefined
      ? 0
      : integerIn(at('priority'), input.priority, PRIORITY_RANGE.min, PRIORITY_RANGE.max);
  const maxAttempts =
    input.maxAttempts === undefined
      ? DEFAULT_MAX_ATTEMPTS
      : integerIn(at('maxAttempts'), input.maxAttempts, MAX_ATTEMPTS_RANGE.min, MAX_ATTEMPTS_RANGE.max);
  const retryPolicy = normalizeRetryPolicy(input.retry, at('retry'));
  const timeoutMs =
    input.timeoutMs === undefined ? null : integerIn(at('timeoutMs'), input.timeoutMs, 1, 7 * 24 * 3600 * 1000);

  let idempotencyKey: string | null = null;
  if (input.idempotencyKey !== undefined) {
    const key = input.idempotencyKey;
    if (typeof key !== 'string' || key.length === 0) {
      throw new ValidationError(at('idempotencyKey'), `must be a non-empty string, got ${describe(key)}`);
    }
    if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
      throw new ValidationError(
        at('idempotencyKey'),
        `is ${key.length} characters, over the ${MAX_IDEMPOTENCY_KEY_LENGTH}-character limit`,
      );
    }
    idempotencyKey = validateStorableText(at('idempotencyKey'), key);
  }

  if (input.runAt !== undefined && input.delayMs !== undefined) {
    throw new ValidationError(at('delayMs'), 'give runAt or delayMs, not both');
  }
  let runAt: Date | null = input.runAt === undefined ? null : parseInstant(at('runAt'), input.runAt);
  let delayMs = 0;
  if (input.delayMs !== undefined) {
    delayMs = integerIn(at('delayMs'), input.delayMs, 0, MAX_DELAY_MS);
  }
  if (input.jitterMs !== undefined) {
    const jitterMs = integerIn(at('jitterMs'), input.jitterMs, 0, 7 * 24 * 3600 * 1000);
    if (runAt && runAt.getTime() + jitterMs > LATEST_RUN_AT_MS) {
      throw new ValidationError(at('jitterMs'), 'would spread the start past 9999-12-31T23:59:59.999Z');
    }
    // Uniform in [0, jitterMs): never before the requested instant, spreads "on the hour" spikes.
    const offset = Math.floor(random() * jitterMs);
    if (runAt) runAt = new Date(runAt.getTime() + offset);
    else delayMs += offset;
  }

  return {
    kind,
    queue,
    payloadJson,
    priority,
    runAt,
    delayMs,
    maxAttempts,
    retryPolicy,
    timeoutMs,
    idempotencyKey,
    scheduleId: null,
    scheduleSlot: null,
  };
}
