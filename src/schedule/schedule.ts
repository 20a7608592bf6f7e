/**
 * Recurring schedules: what a caller passes, its validation, and the stored form. Everything is
 * checked here, before any store sees it, so bad input is refused with a {@link ValidationError}
 * naming the field and nothing is written. The job template reuses the one-off submit's
 * validators (src/job/job-spec.ts), so a schedule's jobs obey exactly the same rules.
 */
import { ValidationError } from '../job/errors.js';
import type { JsonValue, RetryPolicy } from '../job/job.js';
import {
  describe,
  integerIn,
  isPlainObject,
  type JobSpec,
  normalizeSubmit,
  rejectUnknownFields,
} from '../job/job-spec.js';
import { compileCron } from './cron-pattern.js';
import { JITTER_MODES, type JitterMode } from './jitter.js';
import { validateTimeZone } from './time-zone.js';

/** Schedule ids: letters, digits and `_ . : -`, 1 to 200 characters. */
export const SCHEDULE_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,200}$/;
/** Longest schedule id accepted, in characters. */
export const MAX_SCHEDULE_ID_LENGTH = 200;
/** Largest jitter window (one day): a wider spread is a different schedule, not jitter. */
export const MAX_SCHEDULE_JITTER_MS = 24 * 3_600_000;
/** Largest catch-up window (seven days). */
export const MAX_CATCH_UP_WINDOW_MS = 7 * 24 * 3_600_000;
/** Most runs one catch-up may enqueue at once. */
export const MAX_CATCH_UP_RUNS = 1000;

/** What happens to slots that passed while nothing ran. */
export type MisfirePolicyName = 'skip' | 'run_once' | 'catch_up';

/** Every misfire policy, for validation and docs. */
export const MISFIRE_POLICIES = ['skip', 'run_once', 'catch_up'] as const satisfies readonly MisfirePolicyName[];

/** A validated misfire policy with its bounds (the bounds only matter for `catch_up`). */
export interface MisfirePolicy {
  policy: MisfirePolicyName;
  /** `catch_up` only runs missed slots at most this old (slot >= now - catchUpWindowMs). */
  catchUpWindowMs: number;
  /** `catch_up` enqueues at most this many missed slots at once: the latest ones. */
  maxCatchUpRuns: number;
}

/** The default: skip missed slots and wait for the next one. */
export const DEFAULT_MISFIRE_POLICY: MisfirePolicy = Object.freeze({
  policy: 'skip',
  catchUpWindowMs: 3_600_000,
  maxCatchUpRuns: 10,
});

/** The job a schedule enqueues for each slot, as a caller writes it. */
export interface ScheduleJobInput<P = JsonValue> {
  kind: string;
  payload?: P;
  queue?: string;
  priority?: number;
  maxAttempts?: number;
  retry?: Partial<RetryPolicy>;
  timeoutMs?: number;
}

/** What a caller passes to create or replace a schedule. */
export interface ScheduleInput<P = JsonValue> {
  /** The schedule's key, chosen by the caller (e.g. `nightly-report`). */
  id: string;
  /** 5 fields, or 6 with seconds first. */
  cron: string;
  /** IANA zone whose wall clock the cron expression is read against; default `UTC`. */
  timeZone?: string;
  job: ScheduleJobInput<P>;
  /** Each run starts uniformly inside [slot, slot + jitterMs); default 0. */
  jitterMs?: number;
  /** Default `stable`. */
  jitterMode?: JitterMode;
  /** Default {@link DEFAULT_MISFIRE_POLICY}; fields not given take its values. */
  misfire?: Partial<MisfirePolicy>;
  /** A paused schedule enqueues nothing; default false. */
  paused?: boolean;
}

/** A {@link ScheduleInput} whose job is typed as `J` (a kind-checked or defined job; see src/job/job-definition.ts). */
export type ScheduleInputWith<J> = Omit<ScheduleInput, 'job'> & { job: J };

/** The validated job template: a {@link JobSpec} without the per-run fields. */
export type ScheduleJobTemplate = Pick<
  JobSpec,
  'kind' | 'queue' | 'payloadJson' | 'priority' | 'maxAttempts' | 'retryPolicy' | 'timeoutMs'
>;

/** A validated, normalised schedule, ready for a store to write. */
export interface ScheduleSpec {
  id: string;
  /** Whitespace-normalised. */
  cron: string;
  timeZone: string;
  job: ScheduleJobTemplate;
  jitterMs: number;
  jitterMode: JitterMode;
  misfire: MisfirePolicy;
  paused: boolean;
}

/**
 * The job a schedule enqueues for each slot, as a {@link Schedule} record carries it: the input's
 * names ({@link ScheduleJobInput}) with every default filled in, so a record read back is also a
 * valid input. The same shape over HTTP and in the CLI's `--json`.
 */
export interface ScheduleJob {
  kind: string;
  queue: string;
  /** The payload each run gets, as a JSON value. */
  payload: JsonValue;
  priority: number;
  maxAttempts: number;
  /** The full retry policy of each run (defaults merged). */
  retry: RetryPolicy;
  /** Per-attempt time limit in ms; null = no limit. */
  timeoutMs: number | null;
}

/**
 * A schedule as stored, with its progress: the record the library returns, and (instants as
 * ISO-8601 strings) the one HTTP and the CLI's `--json` print. Times are database times.
 */
export interface Schedule extends Omit<ScheduleSpec, 'job'> {
  job: ScheduleJob;
  /**
   * The latest slot whose run has started, or was enqueued already due (a late or caught-up
   * run); null before the first. Never the future slot of the pending run (that is nextSlotAt).
   */
  lastSlotAt: Date | null;
  /** The slot of the pending next run; null while paused or when the pattern has no later match. */
  nextSlotAt: Date | null;
  /** nextSlotAt plus the jitter offset: when that run becomes due. */
  nextRunAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

const SCHEDULE_FIELDS = new Set(['id', 'cron', 'timeZone', 'job', 'jitterMs', 'jitterMode', 'misfire', 'paused']);
const JOB_FIELDS = new Set(['kind', 'payload', 'queue', 'priority', 'maxAttempts', 'retry', 'timeoutMs']);
const MISFIRE_FIELDS = new Set(['policy', 'catchUpWindowMs', 'maxCatchUpRuns']);

/** Validates a schedule id. */
export function validateScheduleId(value: unknown, field = 'id'): string {
  if (typeof value === 'string' && value.length > MAX_SCHEDULE_ID_LENGTH) {
    throw new ValidationError(
      field,
      `is ${value.length} characters, over the ${MAX_SCHEDULE_ID_LENGTH}-character limit`,
    );
  }
  if (typeof value !== 'string' || !SCHEDULE_ID_PATTERN.test(value)) {
    throw new ValidationError(
      field,
      `must match ${SCHEDULE_ID_PATTERN} (letters, digits, _ . : -), got ${describe(value)}`,
    );
  }
  return value;
}

function normalizeJobTemplate(value: unknown): ScheduleJobTemplate {
  if (!isPlainObject(value)) throw new ValidationError('job', `must be an object, got ${describe(value)}`);
  // Checked first: runAt, delayMs, idempotencyKey and jitterMs are one-off options that
  // normalizeSubmit would accept but a schedule decides itself.
  rejectUnknownFields(value, JOB_FIELDS, 'job.');
  const spec = normalizeSubmit(value, () => 0, 'job.');
  return {
    kind: spec.kind,
    queue: spec.queue,
    payloadJson: spec.payloadJson,
    priority: spec.priority,
    maxAttempts: spec.maxAttempts,
    retryPolicy: spec.retryPolicy,
    timeoutMs: spec.timeoutMs,
  };
}

function normalizeMisfire(value: unknown): MisfirePolicy {
  if (value === undefined) return DEFAULT_MISFIRE_POLICY;
  if (!isPlainObject(value)) throw new ValidationError('misfire', `must be an object, got ${describe(value)}`);
  rejectUnknownFields(value, MISFIRE_FIELDS, 'misfire.');
  const policy = value.policy === undefined ? DEFAULT_MISFIRE_POLICY.policy : value.policy;
  if (typeof policy !== 'string' || !(MISFIRE_POLICIES as readonly string[]).includes(policy)) {
    throw new ValidationError(
      'misfire.policy',
      `must be one of ${MISFIRE_POLICIES.join(', ')}, got ${describe(policy)}`,
    );
  }
  if (policy !== 'catch_up') {
    // A window or cap on a policy that never reads it is almost certainly a mistaken policy.
    for (const key of ['catchUpWindowMs', 'maxCatchUpRuns'] as const) {
      if (value[key] !== undefined) {
        throw new ValidationError(`misfire.${key}`, `only applies to policy catch_up, not ${policy}`);
      }
    }
  }
  return {
    policy: policy as MisfirePolicyName,
    catchUpWindowMs:
      value.catchUpWindowMs === undefined
        ? DEFAULT_MISFIRE_POLICY.catchUpWindowMs
        : integerIn('misfire.catchUpWindowMs', value.catchUpWindowMs, 1, MAX_CATCH_UP_WINDOW_MS),
    maxCatchUpRuns:
      value.maxCatchUpRuns === undefined
        ? DEFAULT_MISFIRE_POLICY.maxCatchUpRuns
        : integerIn('misfire.maxCatchUpRuns', value.maxCatchUpRuns, 1, MAX_CATCH_UP_RUNS),
  };
}

/** Validates a schedule and fills in its defaults; throws a {@link ValidationError} naming the field. */
export function normalizeScheduleSpec(input: unknown): ScheduleSpec {
  if (!isPlainObject(input)) throw new ValidationError('schedule', `must be an object, got ${describe(input)}`);
  rejectUnknownFields(input, SCHEDULE_FIELDS, '');
  const id = validateScheduleId(input.id);
  const cron = compileCron(input.cron).pattern;
  const timeZone = input.timeZone === undefined ? 'UTC' : validateTimeZone(input.timeZone);
  const job = normalizeJobTemplate(input.job);
  const jitterMs = input.jitterMs === undefined ? 0 : integerIn('jitterMs', input.jitterMs, 0, MAX_SCHEDULE_JITTER_MS);
  const jitterMode = input.jitterMode === undefined ? 'stable' : input.jitterMode;
  if (typeof jitterMode !== 'string' || !(JITTER_MODES as readonly string[]).includes(jitterMode)) {
    throw new ValidationError('jitterMode', `must be one of ${JITTER_MODES.join(', ')}, got ${describe(jitterMode)}`);
  }
  const misfire = normalizeMisfire(input.misfire);
  const paused = input.paused === undefined ? false : input.paused;
  if (typeof paused !== 'boolean')
    throw new ValidationError('paused', `must be true or false, got ${describe(paused)}`);
  return { id, cron, timeZone, job, jitterMs, jitterMode: jitterMode as JitterMode, misfire, paused };
}

/** The job a store inserts for one run of a schedule: the template plus the slot and its run time. */
export function jobSpecForRun(spec: ScheduleSpec, run: { slot: Date; runAt: Date }): JobSpec {
  return {
    ...spec.job,
    runAt: run.runAt,
    delayMs: 0,
    idempotencyKey: null,
    scheduleId: spec.id,
    scheduleSlot: run.slot,
  };
}
