/**
 * The composition root: `Docket.open()` wires a store, handlers, workers, events and pruning into
 * the one object applications, the CLI and the HTTP API use. Admin operations here are the only
 * way those faces touch jobs; none of them writes its own SQL.
 */
import { ConfigurationError, ValidationError } from './job/errors.js';
import type { Job, JsonValue } from './job/job.js';
import type { JobSpec, SubmitInput } from './job/job-spec.js';
import { describe, normalizeSubmit, validateKind } from './job/job-spec.js';
import type { Random } from './retry/random.js';
import { normalizeScheduleSpec, type Schedule, type ScheduleInput, validateScheduleId } from './schedule/schedule.js';
import type { OpenStoreOptions } from './store/open-store.js';
import { openStore } from './store/open-store.js';
import type {
  CancelOutcome,
  DeadLetterListParams,
  DeadLetterPurgeParams,
  JobListParams,
  QueueState,
  QueueStats,
  ScheduleListParams,
  ScheduleUpsertResult,
  Store,
  SubmitResult,
} from './store/store.js';
import { DocketEvents } from './worker/docket-events.js';
import type { JobHandler } from './worker/job-handler.js';
import type { Logger } from './worker/logger.js';
import { errorFields, silentLogger } from './worker/logger.js';
import { Worker } from './worker/worker.js';
import type { WorkerOptions } from './worker/worker-options.js';

/** Options for {@link Docket.open}. */
export interface DocketOptions extends OpenStoreOptions {
  /** Where the jobs live: `postgres://…`, `sqlite:path/to/file.db` or `sqlite::memory:`. Required unless `store` is given. */
  url?: string | undefined;
  /** An already-open store to use instead of `url`; the Docket does not close it. */
  store?: Store | undefined;
  /** Uniform [0, 1) source for retry jitter and spike jitter; seed it to replay a run. Default Math.random. */
  random?: Random | undefined;
  /** Where Docket logs; silent by default. */
  logger?: Logger | undefined;
  /** How long done and cancelled records are kept before pruning, ms; default 7 days. */
  retentionMs?: number | undefined;
  /** How often running workers' Docket prunes finished records, ms; default 10 minutes. */
  pruneIntervalMs?: number | undefined;
}

/** Options of {@link Docket.submit} and {@link Docket.submitMany}. */
export interface SubmitOptions {
  /**
   * Your own open transaction (PostgreSQL: the `pg` client you ran BEGIN on, never a pool). The
   * jobs are written in it, so they exist exactly when it commits, together with your own writes;
   * their wake-up is sent at commit, and a rollback leaves no trace. The call resolves once the
   * rows are written into the transaction, not when it commits. Needs a store with
   * `capabilities.callerTransactions` (PostgreSQL); others throw ConfigurationError.
   */
  transaction?: unknown;
}

const SUBMIT_OPTION_NAMES = new Set<string>(['transaction']);

/** Default retention of done and cancelled records: a week. */
export const DEFAULT_RETENTION_MS = 7 * 24 * 3600_000;
/** Default time between prunes while a worker runs. */
export const DEFAULT_PRUNE_INTERVAL_MS = 10 * 60_000;

const OPTION_NAMES = new Set<string>([
  'url',
  'store',
  'random',
  'logger',
  'retentionMs',
  'pruneIntervalMs',
  'schema',
  'poolSize',
  'busyTimeoutMs',
  'wakeHorizonMs',
  'synchronous',
  'connectTimeoutMs',
]);

/** A Docket: submit jobs, register handlers, run workers, administer queues. */
export class Docket {
  /** The store this Docket uses (contract in src/store/store.ts). */
  readonly store: Store;
  /** Lifecycle events for metrics and logs. */
  readonly events: DocketEvents;
  /** How long finished records are kept, ms. */
  readonly retentionMs: number;

  private readonly handlers = new Map<string, JobHandler<never>>();
  private readonly workers = new Set<Worker>();
  private readonly runningWorkers = new Set<Worker>();
  private readonly random: Random;
  private readonly logger: Logger;
  private readonly ownsStore: boolean;
  private readonly pruneIntervalMs: number;
  private pruneTimer: NodeJS.Timeout | undefined;
  private pruning: Promise<unknown> | undefined;
  private closing: Promise<void> | undefined;

  private constructor(store: Store, ownsStore: boolean, options: DocketOptions) {
    this.store = store;
    this.ownsStore = ownsStore;
    this.random = options.random ?? Math.random;
    this.logger = options.logger ?? silentLogger;
    this.events = new DocketEvents(this.logger);
    this.retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.pruneIntervalMs = options.pruneIntervalMs ?? DEFAULT_PRUNE_INTERVAL_MS;
  }

  /** Opens (and migrates) the store named by `options.url`, or wraps `options.store`. */
  static async open(options: DocketOptions): Promise<Docket> {
    if (typeof options !== 'object' || options === null) {
      throw new ConfigurationError(`Docket.open needs an options object, got ${describe(options)}`);
    }
    for (const key of Object.keys(options)) {
      if (!OPTION_NAMES.has(key)) {
        throw new ConfigurationError(`unknown Docket option ${key} (known: ${[...OPTION_NAMES].join(', ')})`);
      }
    }
    for (const name of ['retentionMs', 'pruneIntervalMs'] as const) {
      const value = options[name];
      if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
        throw new ConfigurationError(`Docket option ${name} must be a positive integer, got ${describe(value)}`);
      }
    }
    if (options.random !== undefined && typeof options.random !== 'function') {
      throw new ConfigurationError('Docket option random must be a function returning a number in [0, 1)');
    }
    if (options.store) return new Docket(options.store, false, options);
    if (options.url === undefined) {
      throw new ConfigurationError('Docket.open needs a url (postgres://… or sqlite:…) or an open store');
    }
    const store = await openStore(options.url, {
      schema: options.schema,
      poolSize: options.poolSize,
      busyTimeoutMs: options.busyTimeoutMs,
    });
    return new Docket(store, true, options);
  }

  /**
   * Submits one job; resolves once it is durable, or with `options.transaction` once it is written
   * into your transaction (it exists when you commit). Bad input throws {@link ValidationError},
   * writing nothing.
   */
  async submit<P = JsonValue>(input: SubmitInput<P>, options: SubmitOptions = {}): Promise<SubmitResult> {
    const transaction = this.submitTransaction(options);
    const spec = normalizeSubmit(input, this.random);
    const [result] = await this.store.jobSubmit({ jobs: [spec], transaction });
    if (!result) throw new Error('docket: the store returned no result for a submitted job');
    this.emitSubmitted([spec], [result]);
    return result;
  }

  /**
   * Submits many jobs in one round trip. Every input is validated first: one bad input throws a
   * {@link ValidationError} naming it (`jobs[3].runAt`) and nothing is written. With
   * `options.transaction` the batch joins your transaction, as in {@link submit}.
   */
  async submitMany<P = JsonValue>(
    inputs: readonly SubmitInput<P>[],
    options: SubmitOptions = {},
  ): Promise<SubmitResult[]> {
    const transaction = this.submitTransaction(options);
    if (!Array.isArray(inputs)) throw new ValidationError('jobs', `must be an array, got ${describe(inputs)}`);
    const specs = inputs.map((input, i) => {
      if (typeof input !== 'object' || input === null || Array.isArray(input)) {
        throw new ValidationError(`jobs[${i}]`, `must be an object, got ${describe(input)}`);
      }
      return normalizeSubmit(input, this.random, `jobs[${i}].`);
    });
    if (specs.length === 0) return [];
    const results = await this.store.jobSubmit({ jobs: specs, transaction });
    this.emitSubmitted(specs, results);
    return results;
  }

  /** Registers the handler for `kind`; `P` is the payload type its submitters send. */
  handle<P = JsonValue>(kind: string, handler: JobHandler<P>): this {
    validateKind(kind);
    if (typeof handler !== 'function') {
      throw new ValidationError('handler', `must be a function, got ${describe(handler)}`);
    }
    if (this.handlers.has(kind)) {
      throw new ConfigurationError(`a handler for kind "${kind}" is already registered`);
    }
    this.handlers.set(kind, handler as JobHandler<never>);
    return this;
  }

  /** Creates a worker (validating its options; throws ConfigurationError); call `start()` on it. */
  worker(options: WorkerOptions = {}): Worker {
    if (this.closing) throw new ConfigurationError('this Docket is closed');
    const worker = new Worker(
      {
        store: this.store,
        handlers: this.handlers,
        events: this.events,
        logger: this.logger,
        random: this.random,
        onStart: (w) => this.workerStarted(w),
        onStop: (w) => this.workerStopped(w),
      },
      options,
    );
    this.workers.add(worker);
    return worker;
  }

  /** Any job by id, in any state; null when unknown or pruned. */
  getJob(id: string): Promise<Job | null> {
    return this.store.jobGet({ id: validateId(id) });
  }

  /** Jobs by state, queue and kind, ordered by id, paged by `afterId`. */
  listJobs(params: JobListParams = {}): Promise<Job[]> {
    return this.store.jobList(params);
  }

  /** Cancels a live job; a running one loses its lease and its handler's signal aborts at the next heartbeat. */
  cancelJob(id: string): Promise<CancelOutcome> {
    return this.store.jobCancel({ id: validateId(id) });
  }

  /** Parked jobs, ordered by id. */
  listDeadLetters(params: DeadLetterListParams = {}): Promise<Job[]> {
    return this.store.deadLetterList(params);
  }

  /** Moves a parked job back to pending with fresh attempts, due now; null when it is not parked. */
  retryDeadLetter(id: string): Promise<Job | null> {
    return this.store.deadLetterRetry({ id: validateId(id) });
  }

  /** Deletes parked jobs by id or parked before an instant; returns how many. */
  purgeDeadLetters(params: DeadLetterPurgeParams): Promise<number> {
    return this.store.deadLetterPurge(params);
  }

  /** Job counts by queue and state. */
  queueStats(): Promise<QueueStats[]> {
    return this.store.queueStats();
  }

  /**
   * Creates or replaces a recurring schedule and enqueues its next run. Bad input (an invalid
   * cron, an unknown time zone, a negative or NaN jitter, a too-long id…) throws a
   * {@link ValidationError} naming the field, and nothing is stored.
   */
  async schedule<P = JsonValue>(input: ScheduleInput<P>): Promise<ScheduleUpsertResult> {
    return this.store.scheduleUpsert({ spec: normalizeScheduleSpec(input) });
  }

  /** A schedule with its last and next slot and next run time; null when unknown. */
  async getSchedule(id: string): Promise<Schedule | null> {
    return this.store.scheduleGet({ id: validateScheduleId(id) });
  }

  /** Schedules ordered by id, each with its next run time, paged by `afterId`. */
  async listSchedules(params: ScheduleListParams = {}): Promise<Schedule[]> {
    return this.store.scheduleList(params);
  }

  /** Pauses a schedule: its pending run is removed and nothing more is enqueued; null when unknown. */
  async pauseSchedule(id: string): Promise<Schedule | null> {
    return this.store.schedulePause({ id: validateScheduleId(id) });
  }

  /** Resumes a schedule from now (slots passed while paused never run); null when unknown. */
  async resumeSchedule(id: string): Promise<Schedule | null> {
    return this.store.scheduleResume({ id: validateScheduleId(id) });
  }

  /** Deletes a schedule and its pending run (a running one finishes); false when unknown. */
  async deleteSchedule(id: string): Promise<boolean> {
    return this.store.scheduleDelete({ id: validateScheduleId(id) });
  }

  /** Pauses a queue: claims skip it and its jobs wait, nothing is lost. */
  async pauseQueue(name: string): Promise<QueueState> {
    return this.store.queuePause({ name });
  }

  /** Resumes a paused queue: its due jobs are claimable at once. */
  async resumeQueue(name: string): Promise<QueueState> {
    return this.store.queueResume({ name });
  }

  /** Queues that were ever paused or resumed, with their state. */
  async listQueues(): Promise<QueueState[]> {
    return this.store.queueList();
  }

  /** Deletes done and cancelled records older than the retention (by the database clock); returns how many. */
  async pruneFinished(): Promise<number> {
    const now = await this.store.now();
    return this.store.jobPruneFinished({ finishedBefore: new Date(now.getTime() - this.retentionMs) });
  }

  /** Stops every worker (gracefully), stops pruning and closes the store if this Docket opened it. */
  close(): Promise<void> {
    if (!this.closing) this.closing = this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    await Promise.all([...this.workers].map((worker) => worker.stop()));
    this.stopPruning();
    await this.pruning;
    if (this.ownsStore) await this.store.close();
    this.events.clear();
  }

  /**
   * Checks submit options; the transaction, if any, when this store can join one. Checked here
   * as well as in the store, so a store that ignored the option could never autocommit a job
   * the caller meant to tie to their transaction.
   */
  private submitTransaction(options: SubmitOptions): unknown {
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new ValidationError('options', `must be an object, got ${describe(options)}`);
    }
    for (const key of Object.keys(options)) {
      if (!SUBMIT_OPTION_NAMES.has(key)) {
        throw new ValidationError(
          `options.${key}`,
          `is not a submit option (known: ${[...SUBMIT_OPTION_NAMES].join(', ')})`,
        );
      }
    }
    if (options.transaction === undefined) return undefined;
    if (!this.store.capabilities.callerTransactions) {
      throw new ConfigurationError(
        "submit with a transaction needs a store that can join the caller's transaction (capabilities.callerTransactions: " +
          'PostgreSQL); this store cannot. Leave out the transaction option to submit on its own.',
      );
    }
    return options.transaction;
  }

  private emitSubmitted(specs: JobSpec[], results: SubmitResult[]): void {
    if (!this.events.has('submitted')) return;
    results.forEach((result, i) => {
      const spec = specs[i];
      if (!spec) return;
      this.events.emit('submitted', {
        id: result.id,
        kind: spec.kind,
        queue: spec.queue,
        runAt: result.runAt,
        created: result.created,
      });
    });
  }

  private workerStarted(worker: Worker): void {
    this.runningWorkers.add(worker);
    if (this.pruneTimer || this.closing) return;
    // Prune only while workers run: a Docket opened just to submit (the CLI) keeps no timers.
    this.schedulePrune();
  }

  private workerStopped(worker: Worker): void {
    this.runningWorkers.delete(worker);
    if (this.runningWorkers.size === 0) this.stopPruning();
  }

  private schedulePrune(): void {
    this.pruneTimer = setTimeout(() => {
      this.pruning = this.pruneFinished()
        .then((count) => {
          if (count > 0) this.logger.info('docket: pruned finished jobs', { count, retentionMs: this.retentionMs });
        })
        .catch((error: unknown) => {
          this.logger.warn('docket: prune failed', errorFields(error));
          this.events.emit('error', { error, operation: 'prune' });
        })
        .finally(() => {
          this.pruning = undefined;
          if (this.pruneTimer && this.runningWorkers.size > 0 && !this.closing) this.schedulePrune();
        });
    }, this.pruneIntervalMs);
    // Pruning alone is no reason to keep a process alive; the workers' own timers do that.
    this.pruneTimer.unref();
  }

  private stopPruning(): void {
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
    this.pruneTimer = undefined;
  }
}

function validateId(id: unknown): string {
  if (typeof id !== 'string' || !/^[0-9]{1,20}$/.test(id)) {
    throw new ValidationError('id', `must be a job id (a string of digits), got ${describe(id)}`);
  }
  return id;
}
