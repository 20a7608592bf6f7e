/**
 * Typed job kinds: the compile-time half of submit validation. Two ways to type kinds and
 * payloads, which combine:
 *
 * - {@link defineJob}: a value per kind. `const sendEmail = defineJob<{ to: string }>('email.send')`,
 *   then `docket.submit(sendEmail.job({ to }))`, `docket.submitMany([...])`,
 *   `docket.schedule({ id, cron, job: sendEmail.job({ to }) })` and
 *   `docket.handle(sendEmail, async (payload) => …)`. A misspelt definition name does not
 *   compile, and neither does a payload of the wrong shape.
 * - The {@link DocketJobs} map, for code that names kinds as strings (graphile-worker's `Tasks`
 *   pattern): declare `interface DocketJobs { 'email.send': { to: string } }` by module
 *   augmentation, and `submit({ kind, payload })`, `submitMany`, `schedule({ job: { kind, payload } })`
 *   and `handle(kind, handler)` check both the kind and its payload. While the map is empty (the
 *   default) any kind is accepted with any JSON payload, as before.
 *
 * Payload types are constrained to what JSON carries ({@link JsonCompatible}): a `Date`, a
 * function, a `Map`, a `bigint` or a class with methods in a payload type fails to compile, since
 * the handler would receive something else (a string, nothing) after the JSON round trip. Runtime
 * validation (job-spec.ts) still checks every input; these types only move the mistakes earlier.
 * Pure types plus one small class: no I/O.
 */
import { ValidationError } from './errors.js';
import type { JsonValue, RetryPolicy } from './job.js';
import { describe, isPlainObject, normalizeSubmit, rejectUnknownFields, type SubmitInput } from './job-spec.js';

/**
 * Kinds and their payload types, for typed `submit`/`handle` by kind name. Empty here; an
 * application adds entries by module augmentation:
 *
 * ```ts
 * declare module 'docket' {
 *   interface DocketJobs {
 *     'email.send': { to: string; subject: string };
 *     'report.build': { reportId: number };
 *   }
 * }
 * ```
 *
 * Once it has an entry, a kind outside the map, or a payload of the wrong shape, is a compile error.
 */
// biome-ignore lint/suspicious/noEmptyInterface: filled by declaration merging in applications.
export interface DocketJobs {}

/** The kinds declared in {@link DocketJobs}; `never` while it is empty. */
export type DeclaredJobKind = Extract<keyof DocketJobs, string>;

/** The kinds `submit` and `handle` accept by name: the declared ones, or any string while none are declared. */
export type JobKind = [DeclaredJobKind] extends [never] ? string : DeclaredJobKind;

/** The payload type of a declared kind; any JSON value for an undeclared one. */
export type PayloadOf<K extends string> = K extends DeclaredJobKind ? DocketJobs[K] : JsonValue;

/** JSON's scalar values. */
export type JsonPrimitive = string | number | boolean | null;

/** Values JSON cannot carry faithfully: they arrive in the handler as something else, or not at all. */
type NotJson =
  | bigint
  | symbol
  | undefined
  | Date
  | RegExp
  | Map<unknown, unknown>
  | Set<unknown>
  | ((...args: never[]) => unknown);

/** One property's value type, with what JSON cannot carry replaced by `never`. */
type JsonField<V> = V extends JsonPrimitive
  ? V
  : V extends NotJson
    ? never
    : V extends JsonValue
      ? V
      : JsonCompatible<V>;

/**
 * `T` with every part that is not JSON replaced by `never`, so `P extends JsonCompatible<P>`
 * holds exactly when every value of type `P` survives `JSON.stringify` → `JSON.parse` unchanged
 * (a Date would arrive as a string, a function or `undefined` not at all). Unlike
 * `P extends JsonValue` it accepts interfaces, which have no index signature. Optional properties
 * are fine (JSON drops an absent one); `unknown` is refused, `any` opts out. A mapped type at the
 * top (primitives map to themselves) so it can bound its own argument without a circular constraint.
 */
export type JsonCompatible<T> = { [K in keyof T]: JsonField<T[K]> };

/**
 * An instant as submit accepts it: a `Date`, epoch milliseconds, or an RFC 3339 string with an
 * offset (`2030-06-01T09:00:00Z`, `2030-06-01T09:00:00+02:00`). A string is checked at runtime.
 */
export type Instant = Date | number | string;

/** The options every job of a definition starts with; the fields a schedule's job may carry too. */
export interface JobDefaults {
  /** Named queue; default `default`. */
  queue?: string;
  /** Lower runs first within a queue; default 0. */
  priority?: number;
  /** Claims allowed before the job is parked; default 5. */
  maxAttempts?: number;
  /** Overrides of the default retry policy. */
  retry?: Partial<RetryPolicy>;
  /** Per-attempt time limit in ms. */
  timeoutMs?: number;
}

/** Per-submit options of a typed job: everything {@link SubmitInput} takes besides kind and payload. */
export type JobSubmitOptions = Omit<SubmitInput, 'kind' | 'payload' | 'runAt'> & {
  /** Earliest start; omit (with no delayMs) to run as soon as possible. */
  runAt?: Instant;
};

/** The `payload` field for payload type `P`: optional only when `P` admits null (stored for an absent payload). */
type PayloadField<P> = null extends P ? { payload?: P } : { payload: P };

/** A submit input whose kind and payload are checked against {@link DocketJobs} (any JSON payload while it is empty). */
export type KindSubmitInput<K extends string, P = PayloadOf<K>> = JobSubmitOptions & { kind: K } & PayloadField<P>;

/**
 * Any submit input checked by kind: a union over the declared kinds, so each element of a
 * `submitMany` array is checked against its own kind.
 */
export type AnyKindSubmitInput = { [K in DeclaredJobKind]: KindSubmitInput<K> }[DeclaredJobKind];

/**
 * While {@link DocketJobs} is empty: a submit input with any kind and a payload of any JSON type
 * `P` (inferred); once it has entries, nothing (inputs are then checked by kind).
 */
export type UntypedSubmitInput<P> = [DeclaredJobKind] extends [never] ? KindSubmitInput<string, P> : never;

/** Like {@link UntypedSubmitInput}, for a schedule's job. */
export type UntypedScheduleJob<P> = [DeclaredJobKind] extends [never] ? KindScheduleJob<string, P> : never;

/** While {@link DocketJobs} is empty, any kind name; once it has entries, nothing. */
export type UntypedKind = [DeclaredJobKind] extends [never] ? string : never;

/** One-off options a schedule decides itself (its slots and jitter), refused on its job. */
interface NoOneOffOptions {
  runAt?: never;
  delayMs?: never;
  idempotencyKey?: never;
  jitterMs?: never;
}

/** The job a schedule enqueues, checked by kind like {@link KindSubmitInput}. */
export type KindScheduleJob<K extends string, P = PayloadOf<K>> = JobDefaults & {
  kind: K;
} & PayloadField<P> &
  NoOneOffOptions;

/** The type-only mark of a {@link DefinedJob}; no value exists at runtime. */
export declare const definedJob: unique symbol;

/**
 * A submit input made by {@link JobDefinition.job}: its kind and payload were checked against the
 * definition. Accepted by `submit`, `submitMany` and (without per-submit options) as a schedule's job.
 */
export type DefinedJob<P, O extends JobSubmitOptions = Record<never, never>> = JobDefaults &
  O & {
    kind: string;
    payload: P;
    /** Type-only mark (absent at runtime): this input came from a definition. */
    readonly [definedJob]: P;
  };

/** A job made by a definition without per-submit options: valid as a schedule's job. */
export type DefinedScheduleJob = DefinedJob<unknown> & NoOneOffOptions;

const DEFAULT_FIELDS = ['queue', 'priority', 'maxAttempts', 'retry', 'timeoutMs'] as const;

/** A typed job kind: its name, its payload type and the options its jobs start with. See {@link defineJob}. */
export class JobDefinition<P = JsonValue> {
  /** Type-only: the payload type (absent at runtime). */
  declare readonly payloadType?: P;
  /** The handler kind every job of this definition has. */
  readonly kind: string;
  /** The options each job starts with; per-submit options override them. */
  readonly defaults: Readonly<JobDefaults>;

  /** Use {@link defineJob}. */
  constructor(kind: string, defaults: JobDefaults = {}) {
    this.kind = kind;
    this.defaults = Object.freeze({ ...defaults });
  }

  /**
   * One job of this kind, ready for `docket.submit`, `submitMany` or (without options) a
   * schedule's `job`: `{ kind, ...defaults, ...options, payload }`.
   */
  job<const O extends JobSubmitOptions = Record<never, never>>(payload: P, options?: O): DefinedJob<P, O> {
    return { kind: this.kind, ...this.defaults, ...(options ?? {}), payload } as DefinedJob<P, O>;
  }
}

/**
 * Defines a typed job kind. `Payload` must be JSON ({@link JsonCompatible}); `defaults` are the
 * queue, priority, attempts, retry and timeout its jobs start with. Checked when jobs are
 * submitted, like every other input.
 *
 * ```ts
 * const sendEmail = defineJob<{ to: string }>('email.send', { queue: 'mail', maxAttempts: 3 });
 * docket.handle(sendEmail, async ({ to }) => mailer.send(to));
 * await docket.submit(sendEmail.job({ to: 'ada@example.com' }, { delayMs: 60_000 }));
 * ```
 */
export function defineJob<Payload extends JsonCompatible<Payload> = JsonValue>(
  // A function type maps to `{}` above; refused here instead, where no circularity arises.
  kind: Payload extends (...args: never[]) => unknown ? never : string,
  defaults: JobDefaults = {},
): JobDefinition<Payload> {
  if (!isPlainObject(defaults)) throw new ValidationError('defaults', `must be an object, got ${describe(defaults)}`);
  rejectUnknownFields(defaults, new Set(DEFAULT_FIELDS), 'defaults.');
  // The same rules as every submit, now: a bad kind or default fails where it is defined.
  normalizeSubmit({ kind, ...defaults }, () => 0);
  return new JobDefinition<Payload>(kind, defaults);
}
