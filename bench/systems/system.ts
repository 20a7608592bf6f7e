/**
 * The one small interface every benchmarked system implements, so a workload never knows which
 * scheduler it drives.
 *
 * A system has two faces. The parent process (the harness) opens a {@link BenchStore}: it creates a
 * fresh database (or Redis key prefix), inserts jobs and counts what is left. Worker child processes
 * call {@link SystemModule.startWorker}, whose handler reports each job's bench index the moment it
 * starts; the harness turns those reports into exactly-once checks, throughput and latency.
 *
 * Every job carries the payload `{ i }`, its index in the run (0..n-1), because the systems' own ids
 * differ in kind and are assigned at insert.
 */

/** The systems the harness knows. */
export const SYSTEM_NAMES = [
  'docket',
  'docket-lean',
  'docket-sqlite',
  'docket-baseline',
  'docket-sqlite-baseline',
  'docket-sharded',
  'graphile-worker',
  'pg-boss',
  'bullmq',
  'raw-sql',
  'graphile-worker-latest',
  'pg-boss-latest',
  'bullmq-latest',
] as const;

/** One of {@link SYSTEM_NAMES}. */
export type SystemName = (typeof SYSTEM_NAMES)[number];

/** `default`: the library's defaults; `tuned`: its best published configuration. */
export type Variant = 'default' | 'tuned';

/** Everything a store or a worker needs to reach its system; serialisable, so it crosses to children. */
export interface SystemConfig {
  system: SystemName;
  variant: Variant;
  /** Jobs one worker process runs at once (each system's own notion of it; see the variant text). */
  concurrency: number;
  /** PostgreSQL URL of this system's own scratch database, or a SQLite file URL for docket-sqlite. */
  databaseUrl: string;
  /** BullMQ only: the Redis URL and the key prefix this run owns (flushed, nothing else). */
  redisUrl: string;
  redisPrefix: string;
  /** docket-sharded only: one PostgreSQL URL per shard cluster. */
  shards?: readonly string[] | undefined;
  /** docket-sharded only: one sharded store (`store`, the default) or one Docket per cluster (`independent`). */
  shardLayout?: 'store' | 'independent' | undefined;
  /** The Node binary its worker processes run on (the peers' latest releases: Node 24); absent = the harness's. */
  nodePath?: string | undefined;
  /**
   * The `neighbours` workload: this worker belongs to another service sharing the store, in the
   * same configuration but claiming work the bench never submits: Docket a worker with
   * `queues: [NEIGHBOUR_QUEUE]` (the bench's kind, another queue), pg-boss `work()` and BullMQ a
   * `Worker` on that queue, graphile-worker a task list holding only that task identifier (it has
   * no per-worker queue filter). A driver that cannot make one throws ({@link NEIGHBOUR_SYSTEMS}).
   */
  neighbour?: boolean | undefined;
  /**
   * The `kinds` workload: how many job kinds the run's jobs are spread over (job i has kind
   * i % kinds, {@link BenchJob.kind}), every one handled by each worker; 1 when absent. Each
   * driver names kind k by {@link benchKindName} in its own unit of routing: Docket's kind,
   * graphile-worker's task identifier, BullMQ's job name. A driver that cannot route kinds within
   * one queue refuses more than one ({@link KINDS_SYSTEMS}).
   */
  kinds?: number | undefined;
}

/** The systems whose drivers spread jobs over {@link SystemConfig.kinds} kinds. */
export const KINDS_SYSTEMS: readonly SystemName[] = [
  'docket',
  'docket-lean',
  'docket-sqlite',
  'docket-baseline',
  'docket-sqlite-baseline',
  'graphile-worker',
  'graphile-worker-latest',
  'bullmq',
  'bullmq-latest',
];

/**
 * The name of kind `k` of a run, built on the driver's one-kind name (`base`): the base itself for
 * kind 0, so a one-kind run is unchanged, and `<base>_<k>` for the others.
 */
export function benchKindName(base: string, k: number): string {
  return k === 0 ? base : `${base}_${k}`;
}

/** The kinds a worker of `config` handles: every kind of the run, by {@link benchKindName}. */
export function benchKindNames(base: string, config: SystemConfig): string[] {
  return Array.from({ length: config.kinds ?? 1 }, (_, k) => benchKindName(base, k));
}

/**
 * Refuses a config with more than one kind in a driver that does not route kinds
 * ({@link KINDS_SYSTEMS}): its jobs would all be one kind, and the run would measure nothing new.
 */
export function refuseKinds(config: SystemConfig, why: string): void {
  if ((config.kinds ?? 1) > 1) throw new Error(`${config.system} does not take more than one kind: ${why}`);
}

/**
 * The queue (graphile-worker: the task identifier) a neighbour worker claims from, which no bench
 * job is ever submitted to; a name every system accepts.
 */
export const NEIGHBOUR_QUEUE = 'bench_neighbour';

/** One job to insert: its bench index, and a run time when it must not start at once. */
export interface BenchJob {
  i: number;
  runAt?: Date | undefined;
  /**
   * The `outage` workload: the job's first attempt throws (a downstream answering 503) and its
   * retry is an hour away, so a run measures how fast failed attempts are recorded. Only Docket's
   * drivers take it ({@link OUTAGE_SYSTEMS}); others refuse it.
   */
  failFirstAttempt?: boolean | undefined;
  /** The `kinds` workload: the index of the job's kind, 0 to {@link SystemConfig.kinds} − 1 (0 when absent). */
  kind?: number | undefined;
}

/** The systems whose drivers take {@link BenchJob.failFirstAttempt}. */
export const OUTAGE_SYSTEMS: readonly SystemName[] = ['docket', 'docket-lean', 'docket-baseline'];

/** How far off a failed first attempt's retry is: never within a run. */
export const OUTAGE_RETRY_DELAY_MS = 3_600_000;

/**
 * The systems whose stores take {@link BenchStore.scheduleAt}: the `schedule-spike` workload's
 * recurring schedules are Docket's API (the peers' cron features are per-process crontabs or
 * per-minute polls with no comparable one-schedule-per-tenant call). Not `docket-lean`: its
 * retention changes completions, not the claims and plans a schedule spike measures.
 */
export const SCHEDULE_SYSTEMS: readonly SystemName[] = [
  'docket',
  'docket-sqlite',
  'docket-baseline',
  'docket-sqlite-baseline',
];

/**
 * The systems whose stores take {@link BenchStore.submitOneAt} (the `delayed` workload): each has a
 * run-time option on its single-job call. Not the raw-SQL reference, whose submit is a bare
 * `INSERT` due now (it refuses a run time).
 */
export const DELAYED_SYSTEMS: readonly SystemName[] = SYSTEM_NAMES.filter((name) => name !== 'raw-sql');

/**
 * The systems whose drivers start a {@link SystemConfig.neighbour} worker (the `neighbours`
 * workload). Not the raw-SQL reference: its worker claims Docket's one queue and kind, with no
 * notion of another.
 */
export const NEIGHBOUR_SYSTEMS: readonly SystemName[] = SYSTEM_NAMES.filter((name) => name !== 'raw-sql');

/** The harness's side of a system: setup, bulk insert, counting, teardown. */
export interface BenchStore {
  /** Inserts jobs in one call (or as few as the system allows), committed before it resolves. */
  insert(jobs: readonly BenchJob[]): Promise<void>;
  /**
   * Submits one job due now through the system's single-job call with its defaults, as a web
   * request would (many of these run concurrently); committed before it resolves. With `key`, the
   * call carries it through the system's own "deduplicate by the caller's key" option (Docket
   * `idempotencyKey`, BullMQ `jobId`, graphile-worker `jobKey`, pg-boss `singletonKey`), as an API
   * taking a client's request id would; callers pass a key never used before, so every call still
   * leaves one job. The raw-SQL reference has no such option and refuses a key.
   */
  submitOne(i: number, key?: string): Promise<void>;
  /**
   * Submits one job due at `runAtMs` (epoch ms on this host's wall clock, `Date.now()`'s; the
   * `delayed` workload passes `Date.now() + delayMs` read just before the call) through the same
   * single-job call as {@link submitOne}, with the system's own run-time option and otherwise its
   * defaults: Docket `runAt` (the number as given), graphile-worker `runAt` and pg-boss
   * `startAfter` (`new Date(runAtMs)`), BullMQ `delay` (`runAtMs - Date.now()` read in the driver,
   * at least 0, which BullMQ adds to its own `Date.now()`). Committed before it resolves. A system
   * without such an option (the raw-SQL reference; see {@link DELAYED_SYSTEMS}) throws.
   */
  submitOneAt(i: number, runAtMs: number): Promise<void>;
  /**
   * The `schedule-spike` workload ({@link SCHEDULE_SYSTEMS} only): one recurring schedule per job,
   * each due at `dueAt` (a whole second) and next a year later, whose runs carry `{ i }`; each
   * schedule's first run is planned, and committed, before it resolves.
   */
  scheduleAt?(indices: readonly number[], dueAt: Date): Promise<void>;
  /** Live jobs that are due now and not finished (waiting or running); future-dated ones excluded. */
  remainingDue(): Promise<number>;
  /** Releases this process's connections; the data stays. */
  close(): Promise<void>;
}

/** A worker running inside a child process. */
export interface RunningWorker {
  /** Graceful stop: stop fetching, let in-flight handlers finish, flush completions. */
  stop(): Promise<void>;
}

/** Called by a handler as its first act, with the job's bench index. */
export type OnJobStart = (i: number) => void;

/** What each driver module exports. */
export interface SystemModule {
  readonly name: SystemName;
  /** Whether this system offers a tuned configuration distinct from its default. */
  readonly variants: readonly Variant[];
  /** Human-readable configuration of a variant, quoted in RESULTS.md. */
  describe(variant: Variant, concurrency: number): string;
  /** Drops whatever this system left before and creates a fresh, migrated, empty store. */
  reset(config: SystemConfig): Promise<void>;
  /** Opens the harness's handle on an existing store (after {@link reset}). */
  openStore(config: SystemConfig): Promise<BenchStore>;
  /** Starts one worker (in the calling process) whose handler calls `onStart` and returns at once. */
  startWorker(config: SystemConfig, onStart: OnJobStart): Promise<RunningWorker>;
  /** Removes the scratch database or keys for good. */
  destroy(config: SystemConfig): Promise<void>;
}

/** Loads a driver module by name (dynamic, so a broken driver only breaks its own runs). */
export async function loadSystem(name: SystemName): Promise<SystemModule> {
  switch (name) {
    case 'docket':
    case 'docket-lean':
    case 'docket-sqlite':
    case 'docket-baseline':
    case 'docket-sqlite-baseline': {
      const module = await import('./docket.js');
      if (name === 'docket-baseline') return module.docketBaselineSystem;
      if (name === 'docket-sqlite-baseline') return module.docketSqliteBaselineSystem;
      if (name === 'docket-lean') return module.docketLeanSystem;
      return name === 'docket' ? module.docketSystem : module.docketSqliteSystem;
    }
    case 'docket-sharded':
      return (await import('./docket-sharded.js')).docketShardedSystem;
    case 'graphile-worker':
      return (await import('./graphile-worker.js')).graphileWorkerSystem;
    case 'pg-boss':
      return (await import('./pg-boss.js')).pgBossSystem;
    case 'bullmq':
      return (await import('./bullmq.js')).bullmqSystem;
    case 'raw-sql':
      return (await import('./raw-sql.js')).rawSqlSystem;
    case 'graphile-worker-latest':
    case 'pg-boss-latest':
    case 'bullmq-latest':
      return (await import('../peers-latest/latest.js')).loadLatestSystem(name);
  }
}

/** Reads the bench index out of a payload, refusing anything else so a stray job cannot count. */
export function benchIndexOf(payload: unknown): number {
  const i = (payload as { i?: unknown } | null)?.i;
  if (typeof i !== 'number' || !Number.isInteger(i) || i < 0) {
    throw new Error(`bench job without an integer payload.i: ${JSON.stringify(payload)}`);
  }
  return i;
}
