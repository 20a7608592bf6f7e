/**
 * Submit input and its validation. Everything a caller can pass is checked here, before any
 * store sees it, so bad input is refused with a {@link ValidationError} naming the field and
 * nothing is written.
 */
import { ValidationError } from './errors.js';
import type { JsonValue, RetryPolicy } from './job.js';

/** Largest payload accepted, measured as UTF-8 bytes of its JSON text (256 KiB). */
export const MAX_PAYLOAD_BYTES = 256 * 1024;
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
/** Latest run time accepted (year 9999), so a typo in seconds-vs-ms cannot park a job for ever unnoticed. */
export const LATEST_RUN_AT_MS = Date.UTC(9999, 11, 31);

/** The design's defaults: five attempts, delays of 2, 4, 8, 16 s, up to 20 % jitter added. */
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
  /** Earliest start, as a Date or epoch milliseconds. Omit (with no delayMs) to run as soon as possible. */
  runAt?: Date | number;
  /** Start this long after the database's now; exclusive with runAt. */
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

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

export function rejectUnknownFields(value: Record<string, unknown>, known: Set<string>, prefix: string): void {
  for (const key of Object.keys(value)) {
    if (!known.has(key)) {
      throw new ValidationError(`${prefix}${key}`, `unknown option (known: ${[...known].join(', ')})`);
    }
  }
}

export function integerIn(field: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new ValidationError(field, `must be an integer, got ${describe(value)}`);
  }
  if (value < min || value > max) {
    throw new ValidationError(field, `must be between ${min} and ${max}, got ${value}`);
  }
  return value;
}

export function finiteAtLeast(field: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new ValidationError(field, `must be a finite number, got ${describe(value)}`);
  }
  if (value < min) throw new ValidationError(field, `must be at least ${min}, got ${value}`);
  return value;
}

/** A short description of a bad value for error messages (never the whole payload). */
export function describe(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString();
  if (value === null) return 'null';
  return typeof value;
}

/**
 * Refuses an ISO-8601 date naming a day that does not exist. `Date.parse("2026-02-30")` quietly
 * rolls over to March 2, which would run a job on a day nobody asked for.
 */
function rejectImpossibleCalendarDay(field: string, value: string): void {
  const match = /^\s*([+-]?\d{4,6})-(\d{2})-(\d{2})/.exec(value);
  if (!match) return;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const probe = new Date(0);
  probe.setUTCFullYear(year, month - 1, day);
  if (month < 1 || month > 12 || probe.getUTCMonth() !== month - 1 || probe.getUTCDate() !== day) {
    throw new ValidationError(field, `is not a valid time: ${describe(value)} names a day that does not exist`);
  }
}

/** Checks and converts a run time given as a Date, epoch ms or ISO-8601 string. */
export function parseInstant(field: string, value: unknown): Date {
  let ms: number;
  if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'number') ms = value;
  else if (typeof value === 'string' && value.trim() !== '') {
    rejectImpossibleCalendarDay(field, value);
    ms = Date.parse(value);
  } else
    throw new ValidationError(
      field,
      `must be a Date, epoch milliseconds or an ISO-8601 string, got ${describe(value)}`,
    );
  if (!Number.isFinite(ms)) throw new ValidationError(field, `is not a valid time: ${describe(value)}`);
  if (ms < 0 || ms > LATEST_RUN_AT_MS) {
    throw new ValidationError(field, `must lie between 1970-01-01 and 9999-12-31, got ${describe(value)}`);
  }
  return new Date(ms);
}

/** Serialises a payload, refusing what JSON cannot carry faithfully and what is too large. */
export function serializePayload(field: string, payload: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(payload === undefined ? null : payload, (key, value: unknown) => {
      if (typeof value === 'bigint')
        throw new ValidationError(`${field}${key ? `.${key}` : ''}`, 'a BigInt is not JSON');
      if (typeof value === 'function' || typeof value === 'symbol') {
        throw new ValidationError(`${field}${key ? `.${key}` : ''}`, `a ${typeof value} is not JSON`);
      }
      if (typeof value === 'number' && !Number.isFinite(value)) {
        throw new ValidationError(`${field}${key ? `.${key}` : ''}`, `${value} is not JSON (it would become null)`);
      }
      return value;
    });
  } catch (error) {
    if (error instanceof ValidationError) throw error;
    throw new ValidationError(field, `is not JSON-serialisable: ${(error as Error).message}`);
  }
  if (text === undefined) throw new ValidationError(field, 'is not JSON-serialisable');
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_PAYLOAD_BYTES) {
    throw new ValidationError(field, `is ${bytes} bytes of JSON, over the ${MAX_PAYLOAD_BYTES}-byte limit`);
  }
  return text;
}

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
  return value;
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
 * Validates one submit input and turns it into a {@link JobSpec}.
 * @param random uniform in [0, 1); injected so jitter is reproducible in tests.
 */
export function normalizeSubmit(input: unknown, random: () => number = Math.random, field = ''): JobSpec {
  const at = (name: string) => `${field}${name}`;
  if (!isPlainObject(input)) throw new ValidationError(field || 'job', `must be an object, got ${describe(input)}`);
  rejectUnknownFields(input, SUBMIT_FIELDS, field);

  const kind = validateKind(input.kind, at('kind'));
  const queue = input.queue === undefined ? DEFAULT_QUEUE : validateQueue(input.queue, at('queue'));
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
    idempotencyKey = key;
  }

  if (input.runAt !== undefined && input.delayMs !== undefined) {
    throw new ValidationError(at('delayMs'), 'give runAt or delayMs, not both');
  }
  let runAt: Date | null = input.runAt === undefined ? null : parseInstant(at('runAt'), input.runAt);
  let delayMs = 0;
  if (input.delayMs !== undefined) {
    delayMs = integerIn(at('delayMs'), input.delayMs, 0, LATEST_RUN_AT_MS);
  }
  if (input.jitterMs !== undefined) {
    const jitterMs = integerIn(at('jitterMs'), input.jitterMs, 0, 7 * 24 * 3600 * 1000);
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
