/**
 * The PostgreSQL store: wiring only. A `pg` pool (every checkout guarded: checked-out-client.ts),
 * migrations on open (migrations.ts), and one query object per entity, each holding its SQL:
 * jobs (job-queries.ts, rows in job-row.ts), the claim (claim-queries.ts), schedules and queues
 * (schedule-queries.ts), workers (worker-queries.ts), caller transactions (transaction-queries.ts);
 * LISTEN/NOTIFY wake-ups in wake-up-listener.ts. Parameter rules (store-params.ts) and schedule
 * decisions (schedule-plan.ts) are pure and shared with the SQLite store, which has the same
 * files. Claims use `FOR UPDATE SKIP LOCKED` in one short statement, so many workers claim
 * different rows without waiting on each other and no lock outlives the call.
 *
 * Durability: the pool keeps PostgreSQL's default `synchronous_commit = on`, and every write is a
 * single autocommitted statement or one explicit transaction, so a resolved call means a
 * committed (WAL-flushed) row.
 *
 * Recurring runs: a claim that hands out a schedule's latest run inserts the next run in the same
 * transaction. The common claim stays one autocommitted statement: it claims nothing when a
 * recurring run is among its candidates, and only then is the claim repeated inside
 * BEGIN … COMMIT with the schedule rows locked and planned (see {@link PostgresStore.jobClaim}).
 */
import pg from 'pg';
import { ConfigurationError, ValidationError } from '../../job/errors.js';
import type { ClaimedJob, Job } from '../../job/job.js';
import { validateQueue } from '../../job/job-spec.js';
import type { Schedule } from '../../schedule/schedule.js';
import { checkDeadLetterListParams, checkExactUpTo, checkListParams } from '../dashboard-params.js';
import { batchNeedsAtomicKeys, batchRepeatsKey } from '../idempotency.js';
import type { OpenStoreOptions } from '../open-store.js';
import {
  advanceSchedule,
  assertPlannableSpec,
  claimedScheduleIds,
  planClaimedRuns,
  plannedThroughSlotAt,
  planUpsert,
} from '../schedule-plan.js';
import type {
  ActivityBucket,
  AtTime,
  BulkBatchResult,
  CancelOutcome,
  CompleteOutcome,
  DeadLetterListParams,
  DeadLetterPurgeParams,
  DeadLetterRetryParams,
  DueCountsParams,
  DueKindCount,
  FailOutcome,
  JobActivityParams,
  JobBulkApplyParams,
  JobCancelParams,
  JobClaimParams,
  JobCompleteManyParams,
  JobCompleteParams,
  JobCountParams,
  JobFailManyParams,
  JobFailParams,
  JobHeartbeatManyParams,
  JobHeartbeatParams,
  JobListParams,
  JobPruneParams,
  JobReleaseByOwnerParams,
  JobReleaseParams,
  JobReserveIdsParams,
  JobSubmitParams,
  MatchCount,
  NextRunAtParams,
  QueueCounts,
  QueueCountsParams,
  QueueNameParams,
  QueueState,
  QueueStats,
  ReleaseOutcome,
  ScheduleIdParams,
  ScheduleListParams,
  ScheduleRepairParams,
  ScheduleUpsertParams,
  ScheduleUpsertResult,
  Store,
  StoreCapabilities,
  SubmitResult,
  WakeUp,
  WorkerRecord,
  WorkerRegisterParams,
} from '../store.js';
import { claimLimit, earliestRetry, leaseOf, positiveMs, reserveIdCount, STALE_FAILURE } from '../store-params.js';
import { validateWorkerId, validateWorkerRegister } from '../worker-registry.js';
import {
  type ConnectionHealth,
  inClientTransaction,
  isTransientConnectionError,
  withCheckedOutClient,
} from './checked-out-client.js';
import { PostgresClaimQueries } from './claim-queries.js';
import {
  DEFAULT_CONNECT_TIMEOUT_MS,
  postgresClientConfig,
  resolvePostgresConnectionOptions,
} from './connection-options.js';
import { PostgresDashboardQueries } from './dashboard-queries.js';
import { PostgresJobQueries } from './job-queries.js';
import { runPostgresMigrations } from './migrations.js';
import { PostgresScheduleQueries } from './schedule-queries.js';
import { type Queryable, wakeChannel } from './sql-fragments.js';
import type { StoredStatement } from './stored-statements.js';
import { explainPoolerRefusal } from './transaction-pooler.js';
import { callerTransaction, PostgresTransactionQueries } from './transaction-queries.js';
import { WakeUpListener } from './wake-up-listener.js';
import { PostgresWorkerQueries } from './worker-queries.js';

/** Options for {@link PostgresStore.open}, beyond the shared store options. */
export interface PostgresStoreOptions extends OpenStoreOptions {
  /**
   * A submit notifies listeners only when one of its jobs is due within this many ms (default
   * 5000); jobs further out are found by the workers' ordinary next-run-at sleep.
   */
  wakeHorizonMs?: number | undefined;
}

/** The schema used when neither the options nor the URL name one. */
export const DEFAULT_POSTGRES_SCHEMA = 'docket';

/** Schema names: a plain SQL identifier, short enough that the NOTIFY channel fits in 63 bytes. */
const SCHEMA_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/;

/** The statements a store on `schema` calls as functions (stored-statements.ts), for `docket migrate --sql`. */
export function postgresStoredStatements(schema: string): StoredStatement[] {
  return storedStatementsOf(new PostgresClaimQueries(schema), new PostgresJobQueries(schema));
}

function storedStatementsOf(claims: PostgresClaimQueries, queries: PostgresJobQueries): StoredStatement[] {
  return [...claims.storedStatements, ...queries.storedStatements];
}

/** Splits a `?schema=` parameter off a PostgreSQL URL; pg would otherwise pass it to the server. */
export function splitSchemaFromUrl(url: string): { url: string; schema: string | null } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ValidationError('url', 'is not a valid PostgreSQL URL');
  }
  const schema = parsed.searchParams.get('schema');
  if (schema === null) return { url, schema: null };
  parsed.searchParams.delete('schema');
  return { url: parsed.toString(), schema };
}

/** Checks a schema name is a safe identifier (it is interpolated into SQL, quoted). */
export function validateSchemaName(name: string): string {
  if (typeof name !== 'string' || !SCHEMA_NAME_PATTERN.test(name)) {
    throw new ValidationError(
      'schema',
      `must be an SQL identifier (a letter or _, then letters, digits or _; at most 48 characters), got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/**
 * Runs `fn` inside a savepoint of the caller's open transaction: rolled back to the savepoint if
 * `fn` throws (their transaction stays usable, with none of `fn`'s writes), released otherwise.
 */
async function inSavepoint<T>(client: Queryable, fn: () => Promise<T>): Promise<T> {
  await client.query('SAVEPOINT docket_submit');
  let result: T;
  try {
    result = await fn();
  } catch (error) {
    await client.query('ROLLBACK TO SAVEPOINT docket_submit');
    await client.query('RELEASE SAVEPOINT docket_submit');
    throw error;
  }
  await client.query('RELEASE SAVEPOINT docket_submit');
  return result;
}

/** The open retry window's default and whether an error opening the store is worth retrying (for open-store and tests). */
export { DEFAULT_CONNECT_TIMEOUT_MS, isTransientConnectionError };

/** The {@link Store} on PostgreSQL. */
export class PostgresStore implements Store {
  readonly capabilities: StoreCapabilities;

  /** The schema holding this store's tables. */
  readonly schema: string;

  private readonly pool: pg.Pool;
  /** One connection at most, open only while a migration or a prune runs (no statement timeout), closed after. */
  private readonly maintenancePool: pg.Pool;
  /** The LISTEN connection's settings; null when `listenUrl: false` (workers poll). */
  private readonly listenConnection: pg.ClientConfig | null;
  private readonly queries: PostgresJobQueries;
  private readonly dashboard: PostgresDashboardQueries;
  private readonly claims: PostgresClaimQueries;
  private readonly schedules: PostgresScheduleQueries;
  private readonly transactions: PostgresTransactionQueries;
  private readonly workers: PostgresWorkerQueries;
  private readonly wakeHorizonMs: number;
  /**
   * Set when a claim found recurring runs among its candidates, cleared by a claim that found
   * none: while set, claims go straight to the transaction that plans schedules. Without it every
   * claim of a schedule spike (all its candidates recurring runs) first sent the one-statement
   * claim, which chose, locked and then declined its rows: a round trip and a walk of the claim
   * index for nothing. A wrong guess costs one claim in a transaction, which claims the same jobs.
   */
  private recurringRunsLikely = false;
  /**
   * Set when a keyed submit met a key a live job already holds, cleared by one that created every
   * job: while set, keyed submits go straight to the statement that answers held keys. A submit
   * with reserved ids first tries the plain insert (insertReserved: one stored statement, no
   * transaction), which a held key aborts; callers that resubmit the same keys (retries,
   * deduplicating producers) would otherwise pay that aborted insert on every flush.
   */
  private heldKeysLikely = false;
  private readonly listeners = new Set<(wakeUp: WakeUp) => void>();
  private listener: WakeUpListener | null = null;
  private listenerStarting: Promise<void> | null = null;
  private closed = false;

  private constructor(parts: {
    pool: pg.Pool;
    maintenancePool: pg.Pool;
    listenConnection: pg.ClientConfig | null;
    schema: string;
    wakeHorizonMs: number;
    claims: PostgresClaimQueries;
    queries: PostgresJobQueries;
  }) {
    this.pool = parts.pool;
    this.maintenancePool = parts.maintenancePool;
    this.listenConnection = parts.listenConnection;
    this.schema = parts.schema;
    this.capabilities = Object.freeze({
      // Without a LISTEN connection no other process's submit wakes this one's workers: they
      // learn it from the capability and poll at the short local interval instead.
      listenNotify: parts.listenConnection !== null,
      skipLocked: true,
      callerTransactions: true,
      reservableJobIds: true,
      inProcess: false,
    });
    this.queries = parts.queries;
    this.dashboard = new PostgresDashboardQueries(parts.schema, wakeChannel(parts.schema));
    this.claims = parts.claims;
    this.schedules = new PostgresScheduleQueries(parts.schema, wakeChannel(parts.schema));
    this.transactions = new PostgresTransactionQueries(parts.schema);
    this.workers = new PostgresWorkerQueries(parts.schema);
    this.wakeHorizonMs = parts.wakeHorizonMs;
  }

  /**
   * Connects, creates the schema if missing and runs pending migrations under an advisory lock.
   * The schema comes from `options.schema`, else the URL's `?schema=`, else `docket`. Every
   * option is checked before anything connects.
   */
  static async open(
    url: string,
    options: PostgresStoreOptions = {},
    /** Stops the wait for a database that is not up yet (a sharded store closed while a shard was away). */
    signal?: AbortSignal,
  ): Promise<PostgresStore> {
    const split = splitSchemaFromUrl(url);
    const schema = validateSchemaName(options.schema ?? split.schema ?? DEFAULT_POSTGRES_SCHEMA);
    const poolSize = options.poolSize ?? 10;
    if (!Number.isInteger(poolSize) || poolSize < 1) {
      throw new ConfigurationError(`poolSize must be a positive integer, got ${poolSize}`);
    }
    const wakeHorizonMs = options.wakeHorizonMs ?? 5000;
    if (!Number.isFinite(wakeHorizonMs) || wakeHorizonMs < 0) {
      throw new ConfigurationError(`wakeHorizonMs must be a non-negative number, got ${wakeHorizonMs}`);
    }
    const settings = resolvePostgresConnectionOptions(options);
    // A listen URL's own ?schema= would reach the server as a startup parameter; the store's schema rules.
    const listenConnection =
      settings.listenUrl === false
        ? null
        : postgresClientConfig(
            settings.listenUrl === undefined ? split.url : splitSchemaFromUrl(settings.listenUrl).url,
            settings,
            'listen',
          );
    // One pooled connection stays open however long the store is idle (pg-pool closes idle ones
    // after 10 s): the first submit or claim after a quiet spell would otherwise wait for a new
    // server process, its startup, and the first plan of each stored statement on it (a submit after
    // 12 s idle took about 30 ms against 10 ms). Idle connections do not keep the process alive
    // (`allowExitOnIdle`), so a script that submits and never closes Docket still exits.
    const pool = new pg.Pool({
      ...postgresClientConfig(split.url, settings, 'pool'),
      max: poolSize,
      min: 1,
      allowExitOnIdle: true,
    });
    const maintenancePool = new pg.Pool({ ...postgresClientConfig(split.url, settings, 'maintenance'), max: 1 });
    // An idle pooled client whose server connection dies emits 'error' on its pool; unhandled,
    // that event would crash the process. The next query simply gets a fresh connection.
    // (A checked-out client has no such guard from pg-pool: see withCheckedOutClient.)
    pool.on('error', () => {});
    maintenancePool.on('error', () => {});
    // Built once: the migration run creates the functions these queries call.
    const claims = new PostgresClaimQueries(schema);
    const queries = new PostgresJobQueries(schema);
    const giveUpAt = Date.now() + settings.connectTimeoutMs;
    for (let attempt = 1; ; attempt += 1) {
      try {
        await withCheckedOutClient(
          maintenancePool,
          (client, health) => runPostgresMigrations(client, schema, health, storedStatementsOf(claims, queries)),
          { closeAfter: true },
        );
        // One round trip on the pool itself: its settings (statement timeout, keepalives) are
        // proven accepted at open, so a server or pooler that refuses one fails here, once,
        // instead of failing every later call; and the first claim finds a warm connection.
        await pool.query('SELECT 1');
        break;
      } catch (error) {
        // A worker started while PostgreSQL restarts (57P03 "starting up", a refused or dropped
        // connection) would otherwise exit; wait for it with capped, jittered backoff instead.
        const delayMs = Math.min(2000, 100 * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
        if (!isTransientConnectionError(error) || Date.now() + delayMs > giveUpAt || signal?.aborted) {
          await Promise.all([pool.end().catch(() => {}), maintenancePool.end().catch(() => {})]);
          throw explainPoolerRefusal(error);
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, delayMs);
          function done() {
            clearTimeout(timer);
            signal?.removeEventListener('abort', done);
            resolve();
          }
          signal?.addEventListener('abort', done, { once: true });
        });
      }
    }
    return new PostgresStore({ pool, maintenancePool, listenConnection, schema, wakeHorizonMs, claims, queries });
  }

  /** The pool, for tests and for callers that share it. */
  get db(): Queryable {
    return this.pool;
  }

  /** The query layer; every method takes the {@link Queryable} to run on. */
  get jobQueries(): PostgresJobQueries {
    return this.queries;
  }

  /** The claim statements (for EXPLAIN and SQL-level tests); every method takes the {@link Queryable}. */
  get claimQueries(): PostgresClaimQueries {
    return this.claims;
  }

  now(): Promise<Date> {
    return this.queries.now(this.pool);
  }

  /**
   * Submits on the pool, or with `params.transaction` on the caller's client inside their
   * transaction: the same statement, so the rows and their NOTIFY appear only if they commit.
   *
   * One round trip, except for a batch of more than one job with an idempotency key: one of its
   * keys may conflict (IdempotencyConflictError) after the others were inserted, so that batch
   * runs in its own transaction (inside a caller's transaction: a savepoint) and is rolled back
   * whole on a conflict. A single job's conflict inserts nothing (ON CONFLICT DO NOTHING).
   *
   * A submit with reserved ids (every group-committed flush and `submitMany`) first sends the
   * plain insert ({@link PostgresJobQueries.insertReserved}), keys and all, unless a key repeats
   * within it or keys were lately found held ({@link heldKeysLikely}): when every key is new, as
   * nearly always, that one stored statement is the whole submit, with no transaction. A key a
   * live job holds aborts it, writing nothing, and the batch goes the way above.
   */
  async jobSubmit(params: JobSubmitParams): Promise<SubmitResult[]> {
    const atomic = batchNeedsAtomicKeys(params.jobs);
    if (params.transaction !== undefined) {
      const client = callerTransaction(params.transaction, 'jobSubmit');
      if (!atomic) return this.queries.submit(client, params, this.wakeHorizonMs);
      return inSavepoint(client, () => this.queries.submit(client, params, this.wakeHorizonMs));
    }
    const keyed = params.jobs.some((spec) => spec.idempotencyKey !== null);
    if (params.ids !== undefined && (!keyed || (!this.heldKeysLikely && !batchRepeatsKey(params.jobs)))) {
      // Every row new: one stored statement, no transaction (a held key or a stored id aborts it
      // whole, and the full statement below answers the batch).
      const inserted = await this.queries.insertReserved(this.pool, params, this.wakeHorizonMs);
      if (inserted !== undefined) {
        this.wakeLocallyForSubmits(inserted);
        return inserted;
      }
    }
    const results = atomic
      ? await this.inTransaction((client) => this.queries.submit(client, params, this.wakeHorizonMs))
      : await this.queries.submit(this.pool, params, this.wakeHorizonMs);
    if (keyed) this.heldKeysLikely = results.some((result) => !result.created);
    this.wakeLocallyForSubmits(results);
    return results;
  }

  /** Draws ids from the job sequence (one round trip, nothing written); see {@link Store.jobReserveIds}. */
  async jobReserveIds(params: JobReserveIdsParams): Promise<string[]> {
    return this.queries.reserveIds(this.pool, reserveIdCount(params.count));
  }

  /** A dropped, refused or timed-out connection, or a server shutting down or starting up. */
  isConnectionLoss(error: unknown): boolean {
    return isTransientConnectionError(error);
  }

  /**
   * Claims in one statement unless a recurring run is among the candidates; then claims again in
   * a transaction that also locks those runs' schedules (in id order), plans each schedule whose
   * latest run was claimed with the database's now, inserts the next runs and commits, so the
   * claim and the next run are one atomic step. A repeated plan inserts nothing (unique key).
   * After a claim that found recurring runs, the next claim starts in that transaction at once
   * ({@link recurringRunsLikely}), until one finds none.
   */
  async jobClaim(params: JobClaimParams): Promise<ClaimedJob[]> {
    if (claimLimit(params.limit) === 0) return [];
    positiveMs('leaseMs', params.leaseMs);
    // One statement, a stored function whether or not it looks for lapsed leases (its plan uses
    // plain index scans only: decisions 0011 and 0013). Only a claim that chose a recurring run
    // takes the transaction below, which plans the schedules' next runs.
    if (!this.recurringRunsLikely) {
      const fast = await this.claims.claimOrDefer(this.pool, params);
      if (!fast.needsTransaction) return fast.jobs;
      this.recurringRunsLikely = true;
    }
    return this.inTransaction(async (client) => {
      await this.claims.planClaimInTransaction(client);
      const jobs = await this.claims.claimInTransaction(client, params);
      const scheduleIds = claimedScheduleIds(jobs);
      this.recurringRunsLikely = scheduleIds.length > 0;
      if (scheduleIds.length === 0) return jobs;
      const locked = await this.schedules.lock(client, scheduleIds);
      const schedules = new Map<string, Schedule | null>(scheduleIds.map((id) => [id, null]));
      for (const schedule of locked) schedules.set(schedule.id, schedule);
      const now = await this.schedules.now(client, params.now);
      const { advances, dropped } = planClaimedRuns(jobs, schedules, now);
      await this.schedules.applyQuietly(client, advances, now, this.wakeHorizonMs);
      await this.schedules.deleteJobs(client, [...dropped]);
      return jobs.filter((job) => !dropped.has(job.id));
    });
  }

  async jobHeartbeat(params: JobHeartbeatParams): Promise<Date | null> {
    positiveMs('leaseMs', params.leaseMs);
    const [leaseUntil] = await this.queries.heartbeatMany(this.pool, {
      now: params.now,
      leaseMs: params.leaseMs,
      leases: [leaseOf(params)],
    });
    return leaseUntil ?? null;
  }

  async jobHeartbeatMany(params: JobHeartbeatManyParams): Promise<(Date | null)[]> {
    if (params.leases.length === 0) return [];
    positiveMs('leaseMs', params.leaseMs);
    return this.queries.heartbeatMany(this.pool, params);
  }

  /**
   * Completes on the pool (idempotent: a job already done under this token answers `done`), or
   * with `params.transaction` inside the caller's transaction, where only the running → done
   * transition answers `done`: their writes must commit with exactly one accepted completion.
   */
  async jobComplete(params: JobCompleteParams): Promise<CompleteOutcome> {
    const leases = [leaseOf(params)];
    const many = { now: params.now, leases, deleteRecord: params.deleteRecord };
    if (params.transaction !== undefined) {
      const client = callerTransaction(params.transaction, 'jobComplete');
      const [outcome] = await this.queries.completeMany(client, many);
      return outcome ?? 'stale';
    }
    const [outcome] = await this.jobCompleteMany(many);
    return outcome ?? 'stale';
  }

  async jobCompleteMany(params: JobCompleteManyParams): Promise<CompleteOutcome[]> {
    const outcomes = await this.queries.completeMany(this.pool, params);
    // A deleted row keeps no token to recognise a repeated completion by: those stay stale.
    if (params.deleteRecord === true) return outcomes;
    return this.transactions.acceptRepeatedCompletions(this.pool, params.leases, outcomes);
  }

  async jobFail(params: JobFailParams): Promise<FailOutcome> {
    const [outcome] = await this.jobFailMany({ now: params.now, failures: [params] });
    return outcome ?? STALE_FAILURE;
  }

  async jobFailMany(params: JobFailManyParams): Promise<FailOutcome[]> {
    const outcomes = await this.queries.failMany(this.pool, params);
    const retryAt = earliestRetry(outcomes);
    if (retryAt !== null) this.wakeLocally({ runAt: retryAt });
    return outcomes;
  }

  async jobRelease(params: JobReleaseParams): Promise<ReleaseOutcome> {
    const outcome = await this.queries.release(this.pool, params);
    if (outcome === 'released') this.wakeLocally({ runAt: null });
    return outcome;
  }

  async jobReleaseByOwner(params: JobReleaseByOwnerParams): Promise<number> {
    const released = await this.queries.releaseByOwner(this.pool, params);
    if (released > 0) this.wakeLocally({ runAt: null });
    return released;
  }

  jobCancel(params: JobCancelParams): Promise<CancelOutcome> {
    return this.queries.cancel(this.pool, params);
  }

  jobGet(params: { id: string }): Promise<Job | null> {
    return this.queries.get(this.pool, params.id);
  }

  /**
   * Runs dashboard statements in one transaction without JIT: their LIMITed subqueries look
   * expensive to the planner (it cannot see the bound), which would otherwise JIT-compile
   * them, about 40 ms of compiling for a statement that runs in a few. One transaction also
   * gives the counts and their estimates one snapshot.
   */
  private withoutJit<T>(fn: (client: Queryable) => Promise<T>): Promise<T> {
    return this.inTransaction(async (client) => {
      await client.query('SET LOCAL jit = off');
      return fn(client);
    });
  }

  async queueCounts(params: QueueCountsParams = {}): Promise<QueueCounts[]> {
    return this.withoutJit((client) => this.dashboard.queueCounts(client, params.now, params.exactUpTo));
  }

  async jobActivity(params: JobActivityParams): Promise<ActivityBucket[]> {
    return this.withoutJit((client) => this.dashboard.activity(client, params));
  }

  async jobCountMatching(params: JobCountParams): Promise<MatchCount> {
    return this.withoutJit((client) => this.dashboard.countMatching(client, params));
  }

  async jobBulkApply(params: JobBulkApplyParams): Promise<BulkBatchResult> {
    const { woke, ...result } = await this.withoutJit((client) => this.dashboard.bulkApply(client, params));
    if (woke) this.wakeLocally({ runAt: null });
    return result;
  }

  async jobList(params: JobListParams): Promise<Job[]> {
    // One statement on the pool: a LIMITed page costs too little for the planner to JIT it.
    return this.dashboard.list(this.pool, checkListParams(params));
  }

  /** On the maintenance connection: one DELETE of a week of finished records may outlast the statement timeout. */
  jobPruneFinished(params: JobPruneParams): Promise<number> {
    return withCheckedOutClient(this.maintenancePool, (client) => this.queries.pruneFinished(client, params), {
      closeAfter: true,
    });
  }

  jobNextRunAt(params: NextRunAtParams): Promise<Date | null> {
    return this.queries.nextRunAt(this.pool, params);
  }

  async deadLetterList(params: DeadLetterListParams): Promise<Job[]> {
    return this.dashboard.list(this.pool, checkDeadLetterListParams(params));
  }

  async deadLetterRetry(params: DeadLetterRetryParams): Promise<Job | null> {
    const job = await this.queries.deadLetterRetry(this.pool, params);
    if (job !== null) this.wakeLocally({ runAt: job.runAt });
    return job;
  }

  deadLetterPurge(params: DeadLetterPurgeParams): Promise<number> {
    return this.queries.deadLetterPurge(this.pool, params);
  }

  queueStats(params?: AtTime): Promise<QueueStats[]> {
    return this.queries.queueStats(this.pool, params?.now);
  }

  jobDueCountsByKind(params?: DueCountsParams): Promise<DueKindCount[]> {
    if (params?.exactUpTo !== undefined) {
      const cap = checkExactUpTo(params.exactUpTo);
      return this.withoutJit((client) => this.dashboard.boundedDueCounts(client, params.now, cap));
    }
    return this.queries.dueCountsByKind(this.pool, params?.now);
  }

  async workerRegister(params: WorkerRegisterParams): Promise<WorkerRecord> {
    const { worker, ttlMs } = validateWorkerRegister(params);
    return this.workers.register(this.pool, worker, ttlMs, params.now);
  }

  async workerDeregister(params: { id: string }): Promise<boolean> {
    return this.workers.deregister(this.pool, validateWorkerId(params.id));
  }

  workerList(params?: AtTime): Promise<WorkerRecord[]> {
    return this.workers.list(this.pool, params?.now);
  }

  async queuePause(params: QueueNameParams): Promise<QueueState> {
    return this.schedules.queuePause(this.pool, validateQueue(params.name, 'name'), params.now);
  }

  async queueResume(params: QueueNameParams): Promise<QueueState> {
    return this.schedules.queueResume(this.pool, validateQueue(params.name, 'name'));
  }

  queueList(): Promise<QueueState[]> {
    return this.schedules.queueList(this.pool);
  }

  async scheduleUpsert(params: ScheduleUpsertParams): Promise<ScheduleUpsertResult> {
    const { spec } = params;
    // Before any SQL: a bad spec writes nothing.
    assertPlannableSpec(spec);
    return this.inTransaction(async (client) => {
      const now = await this.schedules.now(client, params.now);
      // Insert-or-lock: a schedule deleted between the two steps by another caller is retried once.
      for (let round = 0; round < 2; round++) {
        let before: Schedule | null = null;
        let written = await this.schedules.insert(client, spec, now);
        if (written === null) {
          [before = null] = await this.schedules.lock(client, [spec.id]);
          if (before === null) continue;
          written = (await this.schedules.replace(client, spec, now)) as Schedule;
        }
        const created = before === null;
        const plan = planUpsert(before, spec, now);
        if (plan.deleteUnstartedRuns) await this.schedules.deleteUnstartedRuns(client, spec.id);
        if (plan.pause) {
          return { schedule: (await this.schedules.setPaused(client, spec.id, true, now)) ?? written, created };
        }
        if (plan.advance === null) return { schedule: written, created };
        const [planned] = await this.schedules.apply(client, [plan.advance], now, this.wakeHorizonMs);
        return { schedule: planned ?? written, created };
      }
      throw new Error(`scheduleUpsert(${spec.id}): the schedule was deleted and re-created concurrently; try again`);
    });
  }

  scheduleGet(params: { id: string }): Promise<Schedule | null> {
    return this.schedules.get(this.pool, params.id);
  }

  scheduleList(params: ScheduleListParams): Promise<Schedule[]> {
    return this.schedules.list(this.pool, params);
  }

  schedulePause(params: ScheduleIdParams): Promise<Schedule | null> {
    return this.inTransaction(async (client) => {
      const [schedule] = await this.schedules.lock(client, [params.id]);
      if (!schedule || schedule.paused) return schedule ?? null;
      const now = await this.schedules.now(client, params.now);
      await this.schedules.deleteUnstartedRuns(client, params.id);
      return this.schedules.setPaused(client, params.id, true, now);
    });
  }

  scheduleResume(params: ScheduleIdParams): Promise<Schedule | null> {
    return this.inTransaction(async (client) => {
      const [schedule] = await this.schedules.lock(client, [params.id]);
      if (!schedule?.paused) return schedule ?? null;
      const now = await this.schedules.now(client, params.now);
      const resumed = (await this.schedules.setPaused(client, params.id, false, now)) as Schedule;
      // Planned from now: slots that passed while paused are not misfires and never run.
      const [planned] = await this.schedules.apply(
        client,
        [advanceSchedule(resumed, now, now, false)],
        now,
        this.wakeHorizonMs,
      );
      return planned ?? resumed;
    });
  }

  scheduleDelete(params: { id: string }): Promise<boolean> {
    return this.inTransaction(async (client) => {
      if (!(await this.schedules.delete(client, params.id))) return false;
      await this.schedules.deleteUnstartedRuns(client, params.id);
      return true;
    });
  }

  scheduleRepair(params: ScheduleRepairParams = {}): Promise<number> {
    const limit = params.limit ?? 100;
    return this.inTransaction(async (client) => {
      const candidates = await this.schedules.lockBroken(client, limit);
      if (candidates.length === 0) return 0;
      const broken = await this.schedules.stillBroken(
        client,
        candidates.map((schedule) => schedule.id),
      );
      const now = await this.schedules.now(client, params.now);
      const advances = candidates
        .filter((schedule) => broken.has(schedule.id))
        // From the last slot: the slots since are misfires, which the schedule's policy decides.
        .map((schedule) => advanceSchedule(schedule, plannedThroughSlotAt(schedule) as Date, now, false));
      await this.schedules.applyQuietly(client, advances, now, this.wakeHorizonMs);
      return advances.filter((advance) => advance.runs.length > 0).length;
    });
  }

  /**
   * Runs `fn` on one pooled client inside BEGIN … COMMIT; rolls back on any error, except on a
   * connection known lost (the server already ended that transaction). A lost or broken
   * connection is destroyed, never returned to the pool; the caller gets the connection error.
   */
  private inTransaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return withCheckedOutClient(this.pool, (client, health: ConnectionHealth) =>
      inClientTransaction(client, health, () => fn(client)),
    );
  }

  /**
   * Adds a wake-up listener. All subscribers of one store share a single LISTEN connection,
   * opened with the first subscription and closed with the last.
   */
  async subscribe(listener: (wakeUp: WakeUp) => void): Promise<() => Promise<void>> {
    if (this.closed) throw new ConfigurationError('PostgresStore.subscribe: the store is closed');
    this.listeners.add(listener);
    // listenUrl: false: nothing to listen on; the subscriber is told only what polling finds.
    if (this.listenConnection === null) return this.unsubscriberOf(listener);
    if (!this.listener) {
      this.listener = new WakeUpListener({
        connection: this.listenConnection,
        channel: wakeChannel(this.schema),
        onWakeUp: (wakeUp) => {
          for (const each of [...this.listeners]) each(wakeUp);
        },
      });
      this.listenerStarting = this.listener.start();
    }
    await this.listenerStarting;
    return this.unsubscriberOf(listener);
  }

  private unsubscriberOf(listener: (wakeUp: WakeUp) => void): () => Promise<void> {
    let subscribed = true;
    return async () => {
      if (!subscribed) return;
      subscribed = false;
      this.listeners.delete(listener);
      if (this.listeners.size === 0) await this.stopListener();
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.listeners.clear();
    await this.stopListener();
    await Promise.all([this.pool.end(), this.maintenancePool.end()]);
  }

  /**
   * With `listenUrl: false` nothing LISTENs, so the NOTIFY a write sends reaches nobody; this
   * store's own subscribers (its workers, the HTTP claim waiter) are then told in-process after the
   * write committed, as the Store contract promises ("in this process"). Other processes' writes
   * are found by polling. With LISTEN on, the NOTIFY already comes back and this does nothing.
   * Writes inside a caller's transaction are not announced: their commit is not ours to see.
   */
  private wakeLocally(wakeUp: WakeUp): void {
    if (this.listenConnection !== null || this.listeners.size === 0) return;
    for (const listener of [...this.listeners]) {
      // After the caller's await resumes: a listener that claims at once must see the new rows,
      // and a throwing listener must not fail a write that already committed.
      queueMicrotask(() => {
        try {
          listener(wakeUp);
        } catch {
          // A listener's failure is its own; a wake-up is a hint by contract.
        }
      });
    }
  }

  /**
   * The in-process wake-up for a submit: the earliest new job, if it is due within the wake
   * horizon (the same rule the NOTIFY follows). Judged on this machine's clock: it only decides
   * whether to send a hint, and the woken claimer asks the database what is due.
   */
  private wakeLocallyForSubmits(results: SubmitResult[]): void {
    if (this.listenConnection !== null) return;
    let earliest: Date | null = null;
    for (const result of results) {
      if (result.created && (earliest === null || result.runAt < earliest)) earliest = result.runAt;
    }
    if (earliest !== null && earliest.getTime() <= Date.now() + this.wakeHorizonMs)
      this.wakeLocally({ runAt: earliest });
  }

  private async stopListener(): Promise<void> {
    const listener = this.listener;
    this.listener = null;
    this.listenerStarting = null;
    if (listener) await listener.close();
  }
}
