/**
 * A shard that did not answer while its sharded store was opened (docs/sharding.md, "A shard
 * down while a process starts"). Its number is known from the shard directory the other shards
 * keep (shard-identity.ts), so routing treats it as any shard that is down: keyless work goes to
 * the others, its ids and keys wait for it. Every call first opens the real store; while that
 * fails, the call fails at once with the connection error (which marks the shard down), at most
 * one open attempt runs at a time, and one starts at most every {@link DEFERRED_OPEN_RETRY_MS}.
 *
 * When the shard answers, its identity must be the one the directory promised (same number and
 * uuid); a different shard at that address (recreated, restored from another shard) is refused
 * for good with a ConfigurationError, because routing by its number would reach the wrong jobs.
 */
import { ConfigurationError } from '../../job/errors.js';
import type { ClaimedJob, Job } from '../../job/job.js';
import type { Schedule } from '../../schedule/schedule.js';
import { redactStoreUrl } from '../open-store.js';
import { isTransientConnectionError } from '../postgres/checked-out-client.js';
import { resolvePostgresConnectionOptions } from '../postgres/connection-options.js';
import type { PostgresStoreOptions } from '../postgres/postgres-store.js';
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
import { readShardIdentity, type ShardIdentity, type ShardLocation } from './shard-identity.js';

/** How often a deferred shard tries to open again while it stays unreachable, ms. */
export const DEFERRED_OPEN_RETRY_MS = 1000;

/** A shard's store that opens on first use; see the file header. */
export class DeferredShardStore implements Store {
  readonly capabilities: StoreCapabilities;
  private store: Store | undefined;
  private opening: Promise<Store> | undefined;
  private lastFailure: { error: unknown; at: number } | undefined;
  /** Set when the shard answered with another identity: every call fails with it, for good. */
  private refusal: ConfigurationError | undefined;
  private readonly listeners = new Set<(wakeUp: WakeUp) => void>();
  private unsubscribeReal: (() => Promise<void>) | undefined;
  private closed = false;
  /** Stops the wait of the attempt running now (close() must not wait out the connect timeout). */
  private abortOpening: AbortController | undefined;
  /** Called once the real store is open (the sharded store marks the shard up and wakes its claimers). */
  onOpened: (() => void) | undefined;

  /**
   * `firstAttempt`: the open that was already running when the sharded store gave up waiting for
   * it (it goes on in the background and becomes this store's first attempt), if any.
   */
  constructor(
    readonly location: ShardLocation,
    readonly expected: ShardIdentity,
    private readonly options: PostgresStoreOptions,
    firstAttempt?: { attempt: Promise<Store>; abort: AbortController },
    private readonly monotonicNow: () => number = () => performance.now(),
  ) {
    // What the real store would report: a LISTEN connection unless listenUrl is false.
    this.capabilities = Object.freeze({
      listenNotify: resolvePostgresConnectionOptions(options).listenUrl !== false,
      skipLocked: true,
      callerTransactions: true,
      reservableJobIds: true,
    });
    if (firstAttempt) {
      this.abortOpening = firstAttempt.abort;
      this.opening = this.adopt(firstAttempt.attempt);
    }
    // Nobody may be waiting for the first attempt; its failure is kept in lastFailure.
    this.opening?.catch(() => {});
  }

  /** Whether the real store is open. */
  get isOpen(): boolean {
    return this.store !== undefined;
  }

  isConnectionLoss(error: unknown): boolean {
    return this.store ? this.store.isConnectionLoss(error) : isTransientConnectionError(error);
  }

  /** The real store, opening it when due; throws the last connection error while it cannot. */
  private ready(): Promise<Store> {
    if (this.store) return Promise.resolve(this.store);
    if (this.refusal) return Promise.reject(this.refusal);
    if (this.closed) return Promise.reject(new ConfigurationError('the sharded store is closed'));
    const failure = this.lastFailure;
    // While an attempt runs (the first one retries for the whole connect timeout), or soon after
    // one failed, calls fail at once: the sharded store marks the shard down and asks the others.
    if (this.opening) return Promise.reject(failure?.error ?? this.notYetOpen());
    if (failure && this.monotonicNow() - failure.at < DEFERRED_OPEN_RETRY_MS) return Promise.reject(failure.error);
    this.abortOpening = new AbortController();
    const signal = this.abortOpening.signal;
    const attempt = import('../postgres/postgres-store.js').then(({ PostgresStore }) =>
      // One attempt, no retry loop: the caller learns at once that the shard is still away.
      PostgresStore.open(
        this.location.url,
        { ...this.options, schema: this.location.schema, connectTimeoutMs: 0 },
        signal,
      ),
    );
    this.opening = this.adopt(attempt);
    return this.opening;
  }

  /** A connection error (SQLSTATE 08001, which isConnectionLoss recognises) for a shard still opening. */
  private notYetOpen(): Error {
    return Object.assign(
      new Error(`shard ${redactStoreUrl(this.location.given)} is not reachable yet (still opening)`),
      {
        code: '08001',
      },
    );
  }

  /** Takes an opening store once its identity proves it is the shard the directory promised. */
  private async adopt(attempt: Promise<Store>): Promise<Store> {
    let opened: Store | undefined;
    try {
      opened = await attempt;
      const identity = await readShardIdentity(this.location);
      if (!identity || identity.shardNumber !== this.expected.shardNumber || identity.uuid !== this.expected.uuid) {
        this.refusal = new ConfigurationError(
          `shard ${redactStoreUrl(this.location.given)} answered as ${
            identity ? `shard number ${identity.shardNumber} (uuid ${identity.uuid})` : 'an unnumbered schema'
          }, but the shard directory records shard number ${this.expected.shardNumber} (uuid ${this.expected.uuid}) there; ` +
            'its jobs are not routed to it: check the shard list, or reopen with every shard reachable',
        );
        throw this.refusal;
      }
      if (this.closed) throw new ConfigurationError('the sharded store is closed');
      const store = opened;
      opened = undefined;
      this.store = store;
      if (this.listeners.size > 0) {
        this.unsubscribeReal = await store.subscribe((wakeUp) => this.tell(wakeUp));
      }
      this.onOpened?.();
      return store;
    } catch (error) {
      if (opened) await opened.close().catch(() => {});
      this.lastFailure = { error, at: this.monotonicNow() };
      throw error;
    } finally {
      this.opening = undefined;
    }
  }

  private async forward<T>(call: (store: Store) => Promise<T>): Promise<T> {
    return call(await this.ready());
  }

  private tell(wakeUp: WakeUp): void {
    for (const listener of [...this.listeners]) listener(wakeUp);
  }

  /** Listens now; the real LISTEN starts when the shard opens (which itself wakes the sharded store's listeners). */
  async subscribe(listener: (wakeUp: WakeUp) => void): Promise<() => Promise<void>> {
    this.listeners.add(listener);
    if (this.store && !this.unsubscribeReal) {
      this.unsubscribeReal = await this.store.subscribe((wakeUp) => this.tell(wakeUp));
    }
    return async () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0 && this.unsubscribeReal) {
        const unsubscribe = this.unsubscribeReal;
        this.unsubscribeReal = undefined;
        await unsubscribe();
      }
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.abortOpening?.abort();
    await this.opening?.catch(() => undefined);
    this.listeners.clear();
    await this.unsubscribeReal?.().catch(() => {});
    await this.store?.close();
  }

  now(): Promise<Date> {
    return this.forward((store) => store.now());
  }
  jobSubmit(params: JobSubmitParams): Promise<SubmitResult[]> {
    return this.forward((store) => store.jobSubmit(params));
  }
  jobReserveIds(params: JobReserveIdsParams): Promise<string[]> {
    return this.forward((store) => store.jobReserveIds(params));
  }
  jobClaim(params: JobClaimParams): Promise<ClaimedJob[]> {
    return this.forward((store) => store.jobClaim(params));
  }
  jobHeartbeat(params: JobHeartbeatParams): Promise<Date | null> {
    return this.forward((store) => store.jobHeartbeat(params));
  }
  jobHeartbeatMany(params: JobHeartbeatManyParams): Promise<(Date | null)[]> {
    return this.forward((store) => store.jobHeartbeatMany(params));
  }
  jobComplete(params: JobCompleteParams): Promise<CompleteOutcome> {
    return this.forward((store) => store.jobComplete(params));
  }
  jobCompleteMany(params: JobCompleteManyParams): Promise<CompleteOutcome[]> {
    return this.forward((store) => store.jobCompleteMany(params));
  }
  jobFail(params: JobFailParams): Promise<FailOutcome> {
    return this.forward((store) => store.jobFail(params));
  }
  jobRelease(params: JobReleaseParams): Promise<ReleaseOutcome> {
    return this.forward((store) => store.jobRelease(params));
  }
  jobReleaseByOwner(params: JobReleaseByOwnerParams): Promise<number> {
    return this.forward((store) => store.jobReleaseByOwner(params));
  }
  jobCancel(params: JobCancelParams): Promise<CancelOutcome> {
    return this.forward((store) => store.jobCancel(params));
  }
  jobGet(params: { id: string }): Promise<Job | null> {
    return this.forward((store) => store.jobGet(params));
  }
  jobList(params: JobListParams): Promise<Job[]> {
    return this.forward((store) => store.jobList(params));
  }
  jobPruneFinished(params: JobPruneParams): Promise<number> {
    return this.forward((store) => store.jobPruneFinished(params));
  }
  jobNextRunAt(params: NextRunAtParams): Promise<Date | null> {
    return this.forward((store) => store.jobNextRunAt(params));
  }
  deadLetterList(params: DeadLetterListParams): Promise<Job[]> {
    return this.forward((store) => store.deadLetterList(params));
  }
  deadLetterRetry(params: DeadLetterRetryParams): Promise<Job | null> {
    return this.forward((store) => store.deadLetterRetry(params));
  }
  deadLetterPurge(params: DeadLetterPurgeParams): Promise<number> {
    return this.forward((store) => store.deadLetterPurge(params));
  }
  queueStats(params?: AtTime): Promise<QueueStats[]> {
    return this.forward((store) => store.queueStats(params));
  }
  queuePause(params: QueueNameParams): Promise<QueueState> {
    return this.forward((store) => store.queuePause(params));
  }
  queueResume(params: QueueNameParams): Promise<QueueState> {
    return this.forward((store) => store.queueResume(params));
  }
  queueList(): Promise<QueueState[]> {
    return this.forward((store) => store.queueList());
  }
  scheduleUpsert(params: ScheduleUpsertParams): Promise<ScheduleUpsertResult> {
    return this.forward((store) => store.scheduleUpsert(params));
  }
  scheduleGet(params: { id: string }): Promise<Schedule | null> {
    return this.forward((store) => store.scheduleGet(params));
  }
  scheduleList(params: ScheduleListParams): Promise<Schedule[]> {
    return this.forward((store) => store.scheduleList(params));
  }
  schedulePause(params: ScheduleIdParams): Promise<Schedule | null> {
    return this.forward((store) => store.schedulePause(params));
  }
  scheduleResume(params: ScheduleIdParams): Promise<Schedule | null> {
    return this.forward((store) => store.scheduleResume(params));
  }
  scheduleDelete(params: { id: string }): Promise<boolean> {
    return this.forward((store) => store.scheduleDelete(params));
  }
  scheduleRepair(params?: ScheduleRepairParams): Promise<number> {
    return this.forward((store) => store.scheduleRepair(params));
  }
  workerRegister(params: WorkerRegisterParams): Promise<WorkerRecord> {
    return this.forward((store) => store.workerRegister(params));
  }
  workerDeregister(params: { id: string }): Promise<boolean> {
    return this.forward((store) => store.workerDeregister(params));
  }
  workerList(params?: AtTime): Promise<WorkerRecord[]> {
    return this.forward((store) => store.workerList(params));
  }
  jobDueCountsByKind(params?: DueCountsParams): Promise<DueKindCount[]> {
    return this.forward((store) => store.jobDueCountsByKind(params));
  }
  queueCounts(params?: QueueCountsParams): Promise<QueueCounts[]> {
    return this.forward((store) => store.queueCounts(params));
  }
  jobActivity(params: JobActivityParams): Promise<ActivityBucket[]> {
    return this.forward((store) => store.jobActivity(params));
  }
  jobCountMatching(params: JobCountParams): Promise<MatchCount> {
    return this.forward((store) => store.jobCountMatching(params));
  }
  jobBulkApply(params: JobBulkApplyParams): Promise<BulkBatchResult> {
    return this.forward((store) => store.jobBulkApply(params));
  }
}
