/**
 * The composition root: `Docket.open()` wires a store, handlers, workers, events and pruning into
 * the one object applications, the CLI and the HTTP API use. Admin operations here are the only
 * way those faces touch jobs; none of them writes its own SQL.
 */
import { ConfigurationError, ValidationError } from './job/errors.js';
import type { Job } from './job/job.js';
import {
  type AnyKindSubmitInput,
  type DefinedJob,
  type DefinedScheduleJob,
  JobDefinition,
  type JobKind,
  type JobSubmitOptions,
  type JsonCompatible,
  type KindScheduleJob,
  type KindSubmitInput,
  type PayloadOf,
  type UntypedKind,
  type UntypedScheduleJob,
  type UntypedSubmitInput,
} from './job/job-definition.js';
import { checkJobFilter, listOrder } from './job/job-filter.js';
import type { JobSpec } from './job/job-spec.js';
import { describe, normalizeSubmit, validateKind } from './job/job-spec.js';
import { afterJobId, jobId, listStates, pageSize, purgeIds } from './job/list-params.js';
import type { Random } from './retry/random.js';
import { countsByQueue, unhandledCounts } from './routing/routing.js';
import {
  normalizeRemoteRegistration,
  type RemoteWorkerRegistration,
  validateRegistryTtlMs,
} from './routing/worker-registration.js';
import {
  normalizeScheduleSpec,
  type Schedule,
  type ScheduleInputWith,
  validateScheduleId,
} from './schedule/schedule.js';
import type { OpenStoreOptions } from './store/open-store.js';
import { openStore } from './store/open-store.js';
import type {
  ActivityBucket,
  BulkBatchResult,
  CancelOutcome,
  DeadLetterListParams,
  DeadLetterPurgeParams,
  DueKindCount,
  JobBulkApplyParams,
  JobCountParams,
  JobListParams,
  MatchCount,
  QueueCounts,
  QueueState,
  QueueStats,
  ScheduleListParams,
  ScheduleUpsertResult,
  Store,
  SubmitResult,
  WorkerRecord,
} from './store/store.js';
import { SubmitBatcher } from './submit/submit-batcher.js';
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
  /**
   * How long done and cancelled records are kept before pruning, ms; default 7 days. 0 keeps no
   * done records: a worker deletes a job's row in the statement that completes it (as
   * graphile-worker does), so `getJob` answers null once it is done; cancelled rows go at the next prune.
   */
  retentionMs?: number | undefined;
  /** How often running workers' Docket prunes finished records, ms; default 10 minutes. */
  pruneIntervalMs?: number | undefined;
  /**
   * Opt-in: running workers park a due job that no live worker has served (no registered worker
   * claims its queue and kind) for longer than this, ms, with a reason saying so. Off by default:
   * such a job waits, pending and counted by {@link Docket.unhandledJobs}, for a worker with its handler.
   */
  unhandledAfterMs?: number | undefined;
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

/**
 * Every store option, checked against {@link OpenStoreOptions} by the compiler: adding a store
 * option without listing it here fails to compile, so `Docket.open` can never again accept an
 * option and silently drop it on the way to the store.
 */
const STORE_OPTION_NAMES = Object.keys({
  shards: true,
  schema: true,
  poolSize: true,
  connectTimeoutMs: true,
  connectAttemptTimeoutMs: true,
  statementTimeoutMs: true,
  idleInTransactionTimeoutMs: true,
  keepAliveDelayMs: true,
  listenUrl: true,
  wakeHorizonMs: true,
  busyTimeoutMs: true,
  synchronous: true,
} as const satisfies Record<keyof OpenStoreOptions, true>) as (keyof OpenStoreOptions)[];

/** The options Docket itself reads, checked likewise against {@link DocketOptions}. */
const DOCKET_OWN_OPTION_NAMES = Object.keys({
  url: true,
  store: true,
  random: true,
  logger: true,
  retentionMs: true,
  pruneIntervalMs: true,
  unhandledAfterMs: true,
} as const satisfies Record<Exclude<keyof DocketOptions, keyof OpenStoreOptions>, true>);

const OPTION_NAMES = new Set<string>([...DOCKET_OWN_OPTION_NAMES, ...STORE_OPTION_NAMES]);

/** The store options set in `options` (undefined ones left out), to pass on unchanged. */
function storeOptionsOf(options: DocketOptions): OpenStoreOptions {
  const picked: Record<string, unknown> = {};
  for (const name of STORE_OPTION_NAMES) if (options[name] !== undefined) picked[name] = options[name];
  return picked as OpenStoreOptions;
}

/** A Docket: submit jobs, register handlers, run workers, administer queues. */
export class Docket {
  /** The store this Docket uses (contract in src/store/store.ts). */
  readonly store: Store;
  /** Lifecycle events for metrics and logs. */
  readonly events: DocketEvents;
  /** How long finished records are kept, ms. */
  readonly retentionMs: number;

  /**
   * Whether a completion deletes the job's row instead of keeping a done record (`retentionMs: 0`,
   * decision 0022): the one place that rule is read, for local workers and remote ones alike.
   */
  get deletesDoneRecords(): boolean {
    return this.retentionMs === 0;
  }

  private readonly handlers = new Map<string, JobHandler<never>>();
  private readonly workers = new Set<Worker>();
  private readonly runningWorkers = new Set<Worker>();
  private readonly random: Random;
  private readonly logger: Logger;
  private readonly ownsStore: boolean;
  private readonly pruneIntervalMs: number;
  private readonly unhandledAfterMs: number | undefined;
  private readonly submits: SubmitBatcher;
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
    this.unhandledAfterMs = options.unhandledAfterMs;
    this.submits = new SubmitBatcher({
      store,
      random: this.random,
      onRetry: ({ attempt, delayMs, jobs, error }) =>
        this.logger.warn(
          { operation: 'submit', attempt, delayMs, jobs, ...errorFields(error) },
          'docket: submit lost its database connection; sending it again under the same job ids',
        ),
    });
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
    for (const name of ['pruneIntervalMs', 'unhandledAfterMs'] as const) {
      const value = options[name];
      if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
        throw new ConfigurationError(`Docket option ${name} must be a positive integer, got ${describe(value)}`);
      }
    }
    const retention = options.retentionMs;
    if (retention !== undefined && (!Number.isInteger(retention) || retention < 0)) {
      throw new ConfigurationError(
        `Docket option retentionMs must be an integer of 0 or more (0: a job's row is deleted as it completes), got ${describe(retention)}`,
      );
    }
    if (options.random !== undefined && typeof options.random !== 'function') {
      throw new ConfigurationError('Docket option random must be a function returning a number in [0, 1)');
    }
    const storeOptions = storeOptionsOf(options);
    if (options.store) {
      // An open store was configured when it was opened; these would be silently ignored.
      const ignored = Object.keys(storeOptions);
      if (ignored.length > 0) {
        throw new ConfigurationError(
          `Docket option${ignored.length > 1 ? 's' : ''} ${ignored.join(', ')} cannot be applied to an already-open store; ` +
            'pass them when opening the store, or give url instead of store',
        );
      }
      return new Docket(options.store, false, options);
    }
    if (options.url === undefined && options.shards === undefined) {
      throw new ConfigurationError('Docket.open needs a url (postgres://… or sqlite:…), shards or an open store');
    }
    const store = await openStore(options.url, storeOptions);
    return new Docket(store, true, options);
  }

  /**
   * Submits one job; resolves once it is durable, or with `options.transaction` once it is written
   * into your transaction (it exists when you commit). Bad input throws {@link ValidationError},
   * writing nothing.
   */
  submit<P>(input: DefinedJob<P, JobSubmitOptions>, options?: SubmitOptions): Promise<SubmitResult>;
  /** Typed by {@link DocketJobs}: the kind must be declared there and the payload of its type. */
  submit<const K extends JobKind>(input: KindSubmitInput<K>, options?: SubmitOptions): Promise<SubmitResult>;
  /** While {@link DocketJobs} is empty: any kind, with a payload of any JSON type. */
  submit<P extends JsonCompatible<P>>(input: UntypedSubmitInput<P>, options?: SubmitOptions): Promise<SubmitResult>;
  async submit(input: object, options: SubmitOptions = {}): Promise<SubmitResult> {
    const transaction = this.submitTransaction(options);
    const spec = normalizeSubmit(input, this.random);
    let result: SubmitResult | undefined;
    if (transaction !== undefined) {
      // The caller's transaction is one connection of theirs: nothing to share, nothing to retry.
      [result] = await this.store.jobSubmit({ jobs: [spec], transaction });
    } else {
      // Validated above, so bad input never reaches a batch; the batch commits before this resolves.
      result = await this.submits.submit(spec);
    }
    if (!result) throw new Error('docket: the store returned no result for a submitted job');
    this.emitSubmitted([spec], [result]);
    return result;
  }

  /**
   * Submits many jobs in one round trip. Every input is validated first: one bad input throws a
   * {@link ValidationError} naming it (`jobs[3].runAt`) and nothing is written. With
   * `options.transaction` the batch joins your transaction, as in {@link submit}.
   */
  submitMany(
    // Plain inputs are checked by kind once DocketJobs is declared; before that their payloads
    // are checked at runtime only (one type parameter cannot describe each element's payload).
    inputs: readonly (DefinedJob<unknown, JobSubmitOptions> | AnyKindSubmitInput | UntypedSubmitInput<unknown>)[],
    options?: SubmitOptions,
  ): Promise<SubmitResult[]>;
  async submitMany(inputs: readonly object[], options: SubmitOptions = {}): Promise<SubmitResult[]> {
    const transaction = this.submitTransaction(options);
    if (!Array.isArray(inputs)) throw new ValidationError('jobs', `must be an array, got ${describe(inputs)}`);
    const specs = inputs.map((input, i) => {
      if (typeof input !== 'object' || input === null || Array.isArray(input)) {
        throw new ValidationError(`jobs[${i}]`, `must be an object, got ${describe(input)}`);
      }
      return normalizeSubmit(input, this.random, `jobs[${i}].`);
    });
    if (specs.length === 0) return [];
    const results =
      transaction === undefined
        ? await this.submits.submitBatch(specs)
        : await this.store.jobSubmit({ jobs: specs, transaction });
    this.emitSubmitted(specs, results);
    return results;
  }

  /** Registers the handler for a {@link defineJob} definition; it receives that definition's payload type. */
  handle<P>(definition: JobDefinition<P>, handler: JobHandler<P>): this;
  /** Registers the handler for `kind`; with {@link DocketJobs} declared, a declared kind and its payload type. */
  handle<const K extends JobKind>(kind: K, handler: JobHandler<PayloadOf<K>>): this;
  /** While {@link DocketJobs} is empty: `P` is the payload type its submitters send (JSON only). */
  handle<P extends JsonCompatible<P>>(kind: UntypedKind, handler: JobHandler<P>): this;
  handle(kindOrDefinition: string | JobDefinition<unknown>, handler: JobHandler<never>): this {
    const kind = kindOrDefinition instanceof JobDefinition ? kindOrDefinition.kind : kindOrDefinition;
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
        unhandledAfterMs: this.unhandledAfterMs,
        deleteDoneRecords: this.deletesDoneRecords,
        onStart: (w) => this.workerStarted(w),
        onStop: (w) => this.workerStopped(w),
      },
      options,
    );
    this.workers.add(worker);
    return worker;
  }

  /** Any job by id, in any state; null when unknown or pruned. */
  async getJob(id: string): Promise<Job | null> {
    return this.store.jobGet({ id: validateId(id) });
  }

  /**
   * Jobs by state, queue and kind, ordered by id, paged by `afterId` (`limit` 1 to 1000, default
   * 100). A bad id, limit or state, or an unknown parameter, rejects with {@link ValidationError}.
   */
  async listJobs(params: JobListParams = {}): Promise<Job[]> {
    return this.store.jobList(validateListParams(params, JOB_LIST_PARAMS));
  }

  /** Cancels a live job; a running one loses its lease and its handler's signal aborts at the next heartbeat. */
  async cancelJob(id: string): Promise<CancelOutcome> {
    return this.store.jobCancel({ id: validateId(id) });
  }

  /** Parked jobs, ordered by id, paged as {@link listJobs} is. */
  async listDeadLetters(params: DeadLetterListParams = {}): Promise<Job[]> {
    return this.store.deadLetterList(validateListParams(params, DEAD_LETTER_LIST_PARAMS));
  }

  /** Moves a parked job back to pending with fresh attempts, due now; null when it is not parked. */
  async retryDeadLetter(id: string): Promise<Job | null> {
    return this.store.deadLetterRetry({ id: validateId(id) });
  }

  /** Deletes parked jobs by id (1 to 10 000 job ids) or parked before an instant; returns how many. */
  async purgeDeadLetters(params: DeadLetterPurgeParams): Promise<number> {
    checkParamKeys(params, PURGE_PARAMS);
    return this.store.deadLetterPurge({ ...params, ids: purgeIds(params.ids) });
  }

  /**
   * Job counts by queue and state; `unhandled` counts the available jobs of each queue that no
   * live worker in the registry serves (see {@link unhandledJobs}).
   */
  async queueStats(): Promise<QueueStats[]> {
    const [stats, unhandled] = await Promise.all([this.store.queueStats(), this.unhandledJobs()]);
    const byQueue = countsByQueue(unhandled);
    return stats.map((entry) => ({ ...entry, unhandled: byQueue.get(entry.queue) ?? 0 }));
  }

  /**
   * Due, pending jobs that no live worker serves, counted by queue and kind: no registered worker
   * claims from their queue, has their kind (or is a catch-all) and does not exclude it. They wait,
   * pending, until a worker with their handler starts; they are never parked for want of one.
   */
  async unhandledJobs(): Promise<DueKindCount[]> {
    const [due, workers] = await Promise.all([this.store.jobDueCountsByKind(), this.store.workerList()]);
    return unhandledCounts(due, workers);
  }

  /** The live workers of every process sharing this store (local and remote), ordered by id. */
  listWorkers(): Promise<WorkerRecord[]> {
    return this.store.workerList();
  }

  /** The kinds this Docket has handlers for, sorted: what its workers claim by default. */
  handledKinds(): string[] {
    return [...this.handlers.keys()].sort();
  }

  /**
   * Records (or refreshes) a remote HTTP worker in the registry, for `ttlMs` (default 30 s):
   * the HTTP face calls it on each claim, so a remote worker is listed while it polls. Built-in
   * kinds are always excluded (remote workers never get them). Bad input throws
   * {@link ValidationError} naming the field, writing nothing.
   */
  async registerRemoteWorker(registration: RemoteWorkerRegistration, ttlMs?: number): Promise<WorkerRecord> {
    const worker = normalizeRemoteRegistration(registration);
    return this.store.workerRegister({ worker, ttlMs: validateRegistryTtlMs(ttlMs) });
  }

  /**
   * Creates or replaces a recurring schedule and enqueues its next run. Bad input (an invalid
   * cron, an unknown time zone, a negative or NaN jitter, a too-long id…) throws a
   * {@link ValidationError} naming the field, and nothing is stored.
   */
  schedule(input: ScheduleInputWith<DefinedScheduleJob>): Promise<ScheduleUpsertResult>;
  /** Typed by {@link DocketJobs}: the job's kind must be declared there and its payload of its type. */
  schedule<const K extends JobKind>(input: ScheduleInputWith<KindScheduleJob<K>>): Promise<ScheduleUpsertResult>;
  /** While {@link DocketJobs} is empty: any kind, with a payload of any JSON type. */
  schedule<P extends JsonCompatible<P>>(input: ScheduleInputWith<UntypedScheduleJob<P>>): Promise<ScheduleUpsertResult>;
  async schedule(input: object): Promise<ScheduleUpsertResult> {
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

  /**
   * The dashboard's counts by queue and state: bounded (each count exact up to 1 000, beyond
   * that an estimate, named in `estimated`), with `unhandled` from the
   * worker registry as in {@link queueStats}.
   */
  async queueCounts(): Promise<QueueCounts[]> {
    const [counts, due, workers] = await Promise.all([
      this.store.queueCounts({ exactUpTo: DASHBOARD_EXACT_COUNT }),
      this.store.jobDueCountsByKind({ exactUpTo: DASHBOARD_EXACT_DUE_COUNT }),
      this.store.workerList(),
    ]);
    // A due count at the bound is a lower bound, so the unhandled count built from it is flagged.
    const boundedQueues = new Set(due.filter((d) => d.count >= DASHBOARD_EXACT_DUE_COUNT).map((d) => d.queue));
    const byQueue = countsByQueue(unhandledCounts(due, workers));
    return counts.map((entry) => {
      const unhandled = byQueue.get(entry.queue) ?? 0;
      const estimated: QueueCounts['estimated'] =
        unhandled > 0 && boundedQueues.has(entry.queue) ? [...entry.estimated, 'unhandled'] : entry.estimated;
      return { ...entry, unhandled, estimated };
    });
  }

  /**
   * Completions, parkings and start lateness per minute over the last `minutes` (1 to 1440)
   * up to the database's now, every minute present.
   */
  async activity(minutes: number): Promise<{ from: Date; to: Date; buckets: ActivityBucket[] }> {
    if (!Number.isInteger(minutes) || minutes < 1 || minutes > 1440) {
      throw new ValidationError('minutes', `must be an integer from 1 to 1440, got ${describe(minutes)}`);
    }
    const to = await this.store.now();
    // Whole minutes: the window starts on the minute `minutes - 1` minutes back, so the last bucket is the current minute.
    const from = new Date(Math.floor(to.getTime() / 60_000) * 60_000 - (minutes - 1) * 60_000);
    const buckets = await this.store.jobActivity({ from, to: new Date(to.getTime() + 1), bucketMs: 60_000 });
    return { from, to, buckets };
  }

  /** How many jobs a bulk action would touch now (the filter within the action's states). */
  countMatching(params: JobCountParams): Promise<MatchCount> {
    return this.store.jobCountMatching(params);
  }

  /** One batch of a bulk action (see Store.jobBulkApply); callers walk on from `lastId`. */
  bulkApplyBatch(params: JobBulkApplyParams): Promise<BulkBatchResult> {
    return this.store.jobBulkApply(params);
  }

  /**
   * Enqueues one run of a schedule's job template now, as a one-off job: it has no slot, so it
   * never takes a planned run's place and the schedule's own timing is unchanged. Null when the
   * schedule is unknown.
   */
  async runScheduleNow(id: string): Promise<SubmitResult | null> {
    const schedule = await this.store.scheduleGet({ id: validateScheduleId(id) });
    if (!schedule) return null;
    const { job } = schedule;
    // The template was validated when the schedule was stored; its kind and payload are whatever
    // the schedule holds, not the caller's declared DocketJobs types, hence the untyped call.
    const input: object = {
      kind: job.kind,
      queue: job.queue,
      payload: job.payload,
      priority: job.priority,
      maxAttempts: job.maxAttempts,
      retry: job.retry,
      ...(job.timeoutMs === null || job.timeoutMs === undefined ? {} : { timeoutMs: job.timeoutMs }),
    };
    return this.submit(input as never);
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
    // Submits already accepted get their answer before the store goes away.
    await this.submits.drain();
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
          if (count > 0) this.logger.info({ count, retentionMs: this.retentionMs }, 'docket: pruned finished jobs');
        })
        .catch((error: unknown) => {
          this.logger.warn({ operation: 'prune', ...errorFields(error) }, 'docket: prune failed');
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

/** A job id argument, by the one job-id rule every face applies (src/job/list-params.ts). */
function validateId(id: unknown): string {
  return jobId(id, 'id');
}

/**
 * Counts up to this many per queue and state are exact on the dashboard; beyond, estimates
 * (flagged). Each refresh reads at most about this many index entries per queue and state,
 * which keeps it near 50 ms at a million rows per state.
 */
const DASHBOARD_EXACT_COUNT = 1_000;
/**
 * Due counts per (queue, kind, priority), for the unhandled column, are exact up to this many:
 * they are read for every kind (handled or not), so their bound is lower to keep a refresh short.
 */
const DASHBOARD_EXACT_DUE_COUNT = 1_000;

/** The parameters each list takes; any other key is refused rather than silently ignored. */
const FILTER_PARAMS = ['queue', 'kind', 'idFrom', 'idTo', 'runAtFrom', 'runAtTo', 'payload'];
const JOB_LIST_PARAMS = new Set<string>(['states', ...FILTER_PARAMS, 'limit', 'afterId', 'order']);
const DEAD_LETTER_LIST_PARAMS = new Set<string>([...FILTER_PARAMS, 'limit', 'afterId', 'order']);
const PURGE_PARAMS = new Set<string>(['ids', 'parkedBefore']);

/** Refuses a non-object or an unknown key (a misspelt `after` would otherwise page from the start). */
function checkParamKeys(params: unknown, known: ReadonlySet<string>): void {
  if (typeof params !== 'object' || params === null || Array.isArray(params)) {
    throw new ValidationError('params', `must be an object, got ${describe(params)}`);
  }
  for (const key of Object.keys(params)) {
    if (!known.has(key)) throw new ValidationError(key, `is not a parameter here (known: ${[...known].join(', ')})`);
  }
}

/**
 * Checks a list's parameters by the shared rules before the store is asked, so the library
 * refuses exactly what the CLI and HTTP refuse (the stores apply the same rules again).
 */
function validateListParams<P extends JobListParams>(params: P, known: ReadonlySet<string>): P {
  checkParamKeys(params, known);
  if (params.states !== undefined) listStates(params.states);
  checkJobFilter(params);
  pageSize(params.limit);
  afterJobId(params.afterId);
  listOrder(params.order);
  return params;
}
