/**
 * A {@link Store} over N ordinary PostgreSQL stores ("shards"), nothing shared between them
 * (docs/sharding.md). Routing is pure (shard-routing.ts, shard-ids.ts); this file applies it:
 *
 * - By id (get, cancel, heartbeat, complete, fail, release, dead-letter retry): the id's shard
 *   number, no lookup. Batches of leases split by shard and are answered in input order.
 * - Submit: a job with an idempotency key goes to the shard its key's scope hashes to; a job
 *   without goes to the next healthy shard in round-robin (shards marked down after a connection
 *   loss are skipped until a probe finds them back). Reserved ids (the submit retry of
 *   src/submit/) come from a healthy shard; a job whose reserved id names another shard than the
 *   one it must go to is given an id reserved on that shard, remembered per reserved id, so a
 *   retry of the same submit writes under the same id again and never twice.
 * - Workers claim, heartbeat and complete each shard on its own, through {@link partitions}
 *   (one claim loop per shard, full-size claims, no shard waiting for another).
 * - This store's own jobClaim, for direct callers, asks every live shard at once, each for a
 *   share of the limit (at least one job), and waits for the slowest only
 *   {@link CLAIM_STRAGGLER_MS} after the first answer: a down or slow
 *   shard never holds up the others. An answer that arrives after the wait, and jobs beyond the
 *   limit, are kept leased in a small surplus handed to the next claim (with a wake-up to
 *   listeners), or released once they are {@link SURPLUS_MAX_AGE_MS} old: no claimed job is lost
 *   or left leased.
 * - Reads fan out and merge: lists by id (shard-major, so keyset pages are exact), counts summed.
 */

import type pg from 'pg';
import type { Clock, ClockTimer } from '../../clock/clock.js';
import { systemClock } from '../../clock/clock.js';
import { ConfigurationError, DocketError, IdempotencyConflictError, PartialBatchError } from '../../job/errors.js';
import type { ClaimedJob, Job } from '../../job/job.js';
import type { ListOrder } from '../../job/job-filter.js';
import type { JobSpec } from '../../job/job-spec.js';
import { normalizeScheduleSpec, type Schedule, type ScheduleSpec } from '../../schedule/schedule.js';
import { assertBatchKeysAgree, batchNeedsAtomicKeys, idempotencyField, idempotencyScope } from '../idempotency.js';
import type { OpenStoreOptions, ShardAdmin, ShardDescription } from '../open-store.js';
import { redactStoreUrl } from '../open-store.js';
import { isTransientConnectionError } from '../postgres/checked-out-client.js';
import { resolvePostgresConnectionOptions } from '../postgres/connection-options.js';
import type {
  ActivityBucket,
  BulkBatchResult,
  CancelOutcome,
  CompleteOutcome,
  DeadLetterListParams,
  DeadLetterPurgeParams,
  DeadLetterRetryParams,
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
  JobFailure,
  JobHeartbeatManyParams,
  JobHeartbeatParams,
  JobLease,
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
  StorePartition,
  StorePartitions,
  SubmitResult,
  WakeUp,
  WorkerRecord,
  WorkerRegisterParams,
} from '../store.js';
import { leaseOf, STALE_FAILURE } from '../store-params.js';
import { DeferredShardStore } from './deferred-shard-store.js';
import {
  assignShardNumber,
  connectShardClient,
  directoryKey,
  planShardNumbers,
  readShardDirectory,
  readShardIdentity,
  recordShardDirectory,
  type ShardDirectoryEntry,
  type ShardIdentity,
  type ShardLocation,
  setShardDraining,
  shardLocation,
  shardLocationKey,
} from './shard-identity.js';
import { shardNumberOfId } from './shard-ids.js';
import { RoundRobin, shardForKey, splitClaimLimit } from './shard-routing.js';

/** How long a claim waits for the other shards after the first one answered, ms. */
export const CLAIM_STRAGGLER_MS = 200;
/** A shard marked down is tried again (probed) at most this often, ms. */
export const SHARD_PROBE_INTERVAL_MS = 1000;
/** Surplus claimed jobs older than this are released instead of handed out, ms (capped by lease/6). */
export const SURPLUS_MAX_AGE_MS = 5000;
/**
 * How long opening waits for a shard that does not answer before it is opened in the background
 * instead (when a shard directory knows its number), ms.
 */
export const DEFERRED_SHARD_GRACE_MS = 2000;
/** How often a sharded store re-reads its shards' draining flags, ms. */
export const IDENTITY_REFRESH_MS = 5000;
/** How long a reserved id keeps the id it was exchanged for (covers the submit retry window), ms. */
const EXCHANGED_ID_TTL_MS = 120_000;
/** The application_name of a keyed cross-shard batch's connections (one per shard, per batch). */
export const CROSS_SHARD_BATCH_APPLICATION = 'docket-shard-batch';

/** Options of {@link ShardedStore.open}: every store option applies to each shard. */
export interface ShardedStoreOptions extends OpenStoreOptions {
  /** Health timers and surplus ages; default the system clock. */
  clock?: Clock | undefined;
  /** Uniform [0, 1): where this process's round-robin starts; seed it to replay a run. Default Math.random. */
  random?: (() => number) | undefined;
}

/** One shard as the sharded store tracks it. */
interface Shard {
  number: number;
  location: ShardLocation;
  store: Store;
  draining: boolean;
  /** Monotonic ms since when it is marked down (a connection loss), or null while healthy. */
  downSince: number | null;
  lastProbeAt: number;
  lastError: unknown;
}

/** Claimed jobs a caller did not take yet, still leased under their claim. */
interface SurplusJob {
  job: ClaimedJob;
  shard: Shard;
  at: number;
  maxAgeMs: number;
}

/** Refuses a shard list before anything connects. */
export function checkShardUrls(shards: unknown): string[] {
  if (!Array.isArray(shards) || shards.length === 0) {
    throw new ConfigurationError('shards must be a non-empty list of postgres:// URLs (one per shard)');
  }
  const seen = new Map<string, number>();
  for (const [index, url] of shards.entries()) {
    if (typeof url !== 'string' || url.trim() === '') {
      throw new ConfigurationError(`shards[${index}] must be a postgres:// URL, got ${JSON.stringify(url)}`);
    }
    if (/^sqlite:/i.test(url)) {
      throw new ConfigurationError(
        `shards[${index}] is a SQLite URL; shards must be PostgreSQL databases (postgres://…): an embedded file cannot be shared by workers of other hosts`,
      );
    }
    if (!/^postgres(ql)?:\/\//i.test(url)) {
      throw new ConfigurationError(
        `shards[${index}] must be a postgres:// URL, got ${JSON.stringify(redactStoreUrl(url))}`,
      );
    }
    const key = shardLocationKey(url);
    const earlier = seen.get(key);
    if (earlier !== undefined) {
      throw new ConfigurationError(
        `shards[${index}] repeats shards[${earlier}] (${redactStoreUrl(url)}); list each shard once`,
      );
    }
    seen.set(key, index);
  }
  return shards as string[];
}

/**
 * The identities the directories of the shards that opened record for the `missing` ones, in
 * `missing` order; shorter when some shard is unknown to every directory, or recorded with a
 * number or uuid that an opened shard holds (a stale entry: the list changed since).
 */
async function directoryIdentities(
  locations: readonly ShardLocation[],
  identities: readonly (ShardIdentity | null)[],
  missing: readonly number[],
): Promise<ShardIdentity[]> {
  const keys = missing.map((index) => directoryKey(locations[index]!));
  // Each answering shard's directory is read once, in list order, until every key is found.
  const recorded = new Map<string, ShardIdentity>();
  for (const [index, other] of locations.entries()) {
    if (missing.includes(index) || keys.every((key) => recorded.has(key))) continue;
    const directory = await readShardDirectory(other).catch(() => new Map<string, ShardIdentity>());
    for (const key of keys) {
      const identity = directory.get(key);
      if (identity && !recorded.has(key)) recorded.set(key, identity);
    }
  }
  const held = identities.filter((identity): identity is ShardIdentity => identity !== null);
  const found: ShardIdentity[] = [];
  const clash = (identity: ShardIdentity) =>
    [...held, ...found].some((each) => each.shardNumber === identity.shardNumber || each.uuid === identity.uuid);
  for (const key of keys) {
    const identity = recorded.get(key);
    if (!identity || clash(identity)) return found;
    found.push(identity);
  }
  return found;
}

/** Records `entries` in the directory of every shard in `shards` that is up (a shard down gets them next time). */
async function recordInDirectories(shards: readonly Shard[], entries: readonly ShardDirectoryEntry[]): Promise<void> {
  await Promise.all(
    shards
      .filter((shard) => shard.downSince === null)
      .map((shard) => recordShardDirectory(shard.location, entries).catch(() => {})),
  );
}

/** The store an open attempt gave: every shard whose attempt gave none was deferred, or open threw. */
function openedStore(outcome: { store: Store } | { error: unknown } | undefined): Store {
  if (outcome && 'store' in outcome) return outcome.store;
  throw new Error('docket: a shard neither opened nor was deferred (a bug in ShardedStore.open)');
}

/**
 * Real time, not the injected clock: this bounds a wait on the network at open, which a test's
 * manual clock would never end; unref'd, so an open that settled early does not hold the process.
 */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** A sharded store's error that names no single shard's failure (e.g. every shard down). */
export class ShardsUnavailableError extends DocketError {
  constructor(message: string, cause: unknown) {
    super('shards_unavailable', message, { cause });
  }
}

/** The {@link Store} over PostgreSQL shards; see the file header. */
export class ShardedStore implements Store, ShardAdmin {
  readonly capabilities: StoreCapabilities;
  private readonly byNumber = new Map<number, Shard>();
  private readonly roundRobin: RoundRobin;
  private readonly claimRotation: RoundRobin;
  private surplus: SurplusJob[] = [];
  private surplusTimer: ClockTimer | undefined;
  private readonly listeners = new Set<(wakeUp: WakeUp) => void>();
  /** Listeners of each shard's partition ({@link partitions}): told when their shard comes back. */
  private readonly shardListeners = new Map<Shard, Set<(wakeUp: WakeUp) => void>>();
  private partitionList: StorePartition[] | undefined;
  private readonly unsubscribes: (() => Promise<void>)[] = [];
  private subscribing: Promise<void> | undefined;
  /** Reserved id → the id it was exchanged for on the shard its job had to go to. */
  private readonly exchangedIds = new Map<string, { id: string; at: number }>();
  private closed = false;
  private refreshedAt: number;
  private refreshing: Promise<void> | undefined;

  private constructor(
    readonly shards: readonly Shard[],
    private readonly clock: Clock,
    random: () => number,
  ) {
    // Each process starts its round-robin at a random shard: many short-lived processes that
    // submit once each (CLI runs, serverless handlers) would otherwise all start on one shard.
    this.roundRobin = new RoundRobin(Math.floor(random() * shards.length));
    this.claimRotation = new RoundRobin(Math.floor(random() * shards.length));
    for (const shard of shards) this.byNumber.set(shard.number, shard);
    this.refreshedAt = clock.monotonic();
    this.capabilities = Object.freeze({
      listenNotify: shards.every((shard) => shard.store.capabilities.listenNotify),
      skipLocked: true,
      // A caller's transaction is one connection to one database; a sharded write spans several.
      callerTransactions: false,
      reservableJobIds: true,
      inProcess: false,
    });
  }

  /**
   * Opens (and migrates) every shard, reads or gives each its shard number, checks the list names
   * each shard once, and records the list in every shard's directory.
   *
   * A shard that does not answer within {@link DEFERRED_SHARD_GRACE_MS} (while the others do) is
   * opened later, in the background, when the directory of a shard that answered records its
   * number (any earlier process opened it with these shards): it starts as a shard that is down.
   * A shard no directory knows must answer, within the connect timeout, as before.
   */
  static async open(urls: readonly string[], options: ShardedStoreOptions = {}): Promise<ShardedStore> {
    const given = checkShardUrls(urls);
    const { clock = systemClock, random = Math.random, ...storeOptions } = options;
    const connection = resolvePostgresConnectionOptions(storeOptions);
    const locations = given.map((url) => shardLocation(url, storeOptions.schema, connection));
    const { PostgresStore } = await import('../postgres/postgres-store.js');
    // One abort per shard: a shard deferred below keeps its attempt running, and its store's
    // close() stops that attempt's wait instead of waiting out the connect timeout.
    const aborts = locations.map(() => new AbortController());
    const attempts: Promise<Store>[] = locations.map((location, index) =>
      PostgresStore.open(location.url, { ...storeOptions, schema: location.schema }, aborts[index]!.signal),
    );
    const outcomes: ({ store: Store } | { error: unknown } | undefined)[] = locations.map(() => undefined);
    const settled = Promise.all(
      attempts.map((attempt, index) =>
        attempt.then(
          (store) => {
            outcomes[index] = { store };
          },
          (error: unknown) => {
            outcomes[index] = { error };
          },
        ),
      ),
    );
    const deferred = new Set<number>();
    try {
      await Promise.race([settled, sleep(DEFERRED_SHARD_GRACE_MS)]);
      let identities: (ShardIdentity | null)[];
      for (;;) {
        const refused = outcomes.find(
          (outcome) => outcome && 'error' in outcome && !isTransientConnectionError(outcome.error),
        );
        if (refused && 'error' in refused) throw refused.error;
        const missing = outcomes.flatMap((outcome, index) => (outcome && 'store' in outcome ? [] : [index]));
        identities = await Promise.all(
          locations.map(async (location, index) => {
            if (missing.includes(index)) return null;
            try {
              return await readShardIdentity(location);
            } catch (error) {
              // Down again since it opened: it joins the missing ones (its open store is kept).
              if (!isTransientConnectionError(error)) throw error;
              missing.push(index);
              return null;
            }
          }),
        );
        missing.sort((a, b) => a - b);
        if (missing.length === 0) break;
        const known =
          missing.length < locations.length ? await directoryIdentities(locations, identities, missing) : [];
        if (known.length === missing.length) {
          for (const [position, index] of missing.entries()) {
            identities[index] = known[position]!;
            deferred.add(index);
          }
          break;
        }
        const allSettled = outcomes.every((outcome) => outcome !== undefined);
        if (allSettled) {
          const failed = outcomes.find((outcome) => outcome && 'error' in outcome);
          throw failed && 'error' in failed ? failed.error : new Error('docket: a shard did not open');
        }
        // A shard no directory knows: wait for every open attempt (each bounded by the connect timeout).
        await settled;
      }
      const numbers = planShardNumbers(locations, identities);
      const assigned = await Promise.all(
        locations.map((location, index) => identities[index] ?? assignShardNumber(location, numbers[index]!)),
      );
      // Two spellings of one fresh schema were both numbered above: the second found the first's row.
      planShardNumbers(locations, assigned);
      const startedAt = clock.monotonic();
      const shards: Shard[] = assigned.map((identity, index) => {
        const location = locations[index]!;
        const outcome = outcomes[index];
        const isDeferred = deferred.has(index);
        return {
          number: identity.shardNumber,
          location,
          store: isDeferred
            ? new DeferredShardStore(
                location,
                identity,
                { ...storeOptions, schema: location.schema },
                {
                  attempt: attempts[index]!,
                  abort: aborts[index]!,
                },
              )
            : openedStore(outcome),
          draining: identity.draining,
          downSince: isDeferred ? startedAt : null,
          lastProbeAt: 0,
          lastError: isDeferred && outcome && 'error' in outcome ? outcome.error : undefined,
        };
      });
      await recordInDirectories(
        shards,
        shards.map((shard, index) => ({ locationKey: directoryKey(shard.location), identity: assigned[index]! })),
      );
      const sharded = new ShardedStore(shards, clock, random);
      for (const shard of shards) {
        if (shard.store instanceof DeferredShardStore) {
          const store = shard.store;
          store.onOpened = () => sharded.markUp(shard);
        }
      }
      return sharded;
    } catch (error) {
      // Attempts still running stop waiting, and close their store if they opened one.
      for (const abort of aborts) abort.abort();
      for (const attempt of attempts) void attempt.then((store) => store.close()).catch(() => {});
      throw error;
    }
  }

  /**
   * Drains one shard (named by a URL of the list, matched as the duplicate check matches): marks
   * it draining in its own identity row, so every process that re-reads identities (every
   * {@link IDENTITY_REFRESH_MS}) stops routing new work to it, and moves its schedules to the
   * shards their ids now hash to. Its jobs stay and run; {@link shardLoad} says when none is left.
   * `draining: false` undoes it.
   */
  async setDraining(url: string, draining: boolean): Promise<{ number: number; schedulesMoved: number }> {
    const shard = this.shardByUrl(url);
    if (draining && this.shards.every((other) => other === shard || other.draining)) {
      throw new ConfigurationError('cannot drain the last shard that takes new work');
    }
    const identity = await setShardDraining(shard.location, draining);
    shard.draining = draining;
    if (identity) {
      // The directories too, so a process that opens the list while this shard is down routes as it should.
      await recordInDirectories(this.shards, [{ locationKey: directoryKey(shard.location), identity }]);
    }
    let schedulesMoved = 0;
    if (draining) {
      for (let afterId: string | undefined; ; ) {
        const page = await shard.store.scheduleList({ limit: 100, ...(afterId ? { afterId } : {}) });
        if (page.length === 0) break;
        for (const schedule of page) {
          // The schedule's own spec fields, re-created on its new shard (scheduleUpsert deletes the old copy).
          await this.scheduleUpsert({ spec: scheduleSpecOf(schedule) });
          schedulesMoved += 1;
        }
        afterId = page.at(-1)!.id;
      }
    }
    return { number: shard.number, schedulesMoved };
  }

  /** Live (pending or running) jobs and schedules a shard still holds: 0 and 0 means a drained shard can be removed. */
  async shardLoad(url: string): Promise<{ number: number; live: number; schedules: number; draining: boolean }> {
    const shard = this.shardByUrl(url);
    const stats = await this.onShard(shard, (store) => store.queueStats());
    const live = stats.reduce((sum, queue) => sum + queue.scheduled + queue.available + queue.running, 0);
    const schedules = (await this.onShard(shard, (store) => store.scheduleList({ limit: 1000 }))).length;
    return { number: shard.number, live, schedules, draining: shard.draining };
  }

  private shardByUrl(url: string): Shard {
    const key = shardLocationKey(url);
    const shard = this.shards.find((each) => shardLocationKey(each.location.given) === key);
    if (!shard) {
      throw new ConfigurationError(
        `${redactStoreUrl(url)} is not one of the shards (${this.shards.map((each) => redactStoreUrl(each.location.given)).join(', ')})`,
      );
    }
    return shard;
  }

  /** Re-reads every shard's draining flag (another process may have drained one), at most every {@link IDENTITY_REFRESH_MS}. */
  private refreshIdentitiesSoon(): void {
    const now = this.clock.monotonic();
    if (this.refreshing || now - this.refreshedAt < IDENTITY_REFRESH_MS) return;
    this.refreshedAt = now;
    this.refreshing = (async () => {
      for (const shard of this.shards) {
        if (shard.downSince !== null) continue;
        try {
          const identity = await readShardIdentity(shard.location);
          if (identity && identity.shardNumber === shard.number) shard.draining = identity.draining;
        } catch {
          // A shard that cannot answer keeps its last known flag; its health is the claims' business.
        }
      }
    })().finally(() => {
      this.refreshing = undefined;
    });
  }

  /** The shards, by number: for `docket shards` and tests. */
  describeShards(): ShardDescription[] {
    return [...this.shards]
      .sort((a, b) => a.number - b.number)
      .map((shard) => ({
        number: shard.number,
        url: redactStoreUrl(shard.location.given),
        schema: shard.location.schema,
        draining: shard.draining,
        down: shard.downSince !== null,
      }));
  }

  // ---- health ----

  private markDown(shard: Shard, error: unknown): void {
    shard.lastError = error;
    if (shard.downSince === null) shard.downSince = this.clock.monotonic();
    shard.lastProbeAt = this.clock.monotonic();
  }

  private markUp(shard: Shard): void {
    if (shard.downSince === null) return;
    shard.downSince = null;
    // Work may have waited on it (its own due jobs, jobs submitted while it was away).
    this.wake({ runAt: null });
    for (const listener of [...(this.shardListeners.get(shard) ?? [])]) {
      queueMicrotask(() => {
        try {
          listener({ runAt: null });
        } catch {
          // A wake-up is a hint; a listener's failure is its own.
        }
      });
    }
  }

  /** Runs `call` on a shard, keeping its health: a connection loss marks it down, an answer up. */
  private async onShard<T>(shard: Shard, call: (store: Store) => Promise<T>): Promise<T> {
    try {
      const result = await call(shard.store);
      this.markUp(shard);
      return result;
    } catch (error) {
      if (shard.store.isConnectionLoss(error)) this.markDown(shard, error);
      throw error;
    }
  }

  /** Shards a fan-out asks now: healthy ones, and down ones due for a probe. */
  private liveShards(): Shard[] {
    const now = this.clock.monotonic();
    return this.shards.filter((shard) => {
      if (shard.downSince === null) return true;
      if (now - shard.lastProbeAt < SHARD_PROBE_INTERVAL_MS) return false;
      shard.lastProbeAt = now;
      return true;
    });
  }

  /** Shards that take new keyless work, healthy first (down ones last, as a last resort). */
  private writableShards(): Shard[] {
    this.refreshIdentitiesSoon();
    const active = this.shards.filter((shard) => !shard.draining);
    if (active.length === 0) throw new ConfigurationError('every shard is draining: no shard accepts new jobs');
    const healthy = this.roundRobin.order(active.filter((shard) => shard.downSince === null));
    return [...healthy, ...active.filter((shard) => shard.downSince !== null)];
  }

  /** The shard numbers keys hash over: those not draining. */
  private keyShardNumbers(): number[] {
    this.refreshIdentitiesSoon();
    const numbers = this.shards.filter((shard) => !shard.draining).map((shard) => shard.number);
    if (numbers.length === 0) throw new ConfigurationError('every shard is draining: no shard accepts new jobs');
    return numbers;
  }

  private shardForKey(key: string): Shard {
    return this.byNumber.get(shardForKey(key, this.keyShardNumbers()))!;
  }

  /** The shard an id names; null for an id of no listed shard. Ids that are no job id go to the first shard, which answers them as any store does. */
  private shardOfId(id: unknown): Shard | null {
    const number = shardNumberOfId(id);
    if (number === null) return this.shards[0]!;
    return this.byNumber.get(number) ?? null;
  }

  private wake(wakeUp: WakeUp): void {
    for (const listener of [...this.listeners]) {
      queueMicrotask(() => {
        try {
          listener(wakeUp);
        } catch {
          // A wake-up is a hint; a listener's failure is its own.
        }
      });
    }
  }

  // ---- time, ids, submit ----

  async now(): Promise<Date> {
    return this.firstAnswer((store) => store.now());
  }

  /** The answer of the first shard (healthy first) that gives one. */
  private async firstAnswer<T>(call: (store: Store) => Promise<T>): Promise<T> {
    let lastError: unknown;
    const ordered = [...this.shards].sort((a, b) => Number(a.downSince !== null) - Number(b.downSince !== null));
    for (const shard of ordered) {
      try {
        return await this.onShard(shard, call);
      } catch (error) {
        if (!shard.store.isConnectionLoss(error)) throw error;
        lastError = error;
      }
    }
    throw lastError;
  }

  isConnectionLoss(error: unknown): boolean {
    return this.shards[0]!.store.isConnectionLoss(error);
  }

  /**
   * Reserves ids on every healthy shard that takes new work, an even share each, and hands them
   * out interleaved (one id of each shard in turn, the starting shard rotating), so consecutive
   * keyless submits spread round-robin over the shards. A shard whose reservation fails is marked
   * down and its share is reserved on the others: an outage never refuses new work.
   */
  async jobReserveIds(params: JobReserveIdsParams): Promise<string[]> {
    const count = params.count;
    if (!Number.isInteger(count) || count < 1) return this.shards[0]!.store.jobReserveIds(params);
    const candidates = this.writableShards();
    const healthy = candidates.filter((shard) => shard.downSince === null);
    let lastError: unknown;
    const blocks: string[][] = [];
    let missing = count;
    if (healthy.length > 0) {
      // splitClaimLimit gives every shard at least one; a count below the shard count asks only the first ones.
      const shares = splitClaimLimit(count, healthy.length).map((share, index) => (index < count ? share : 0));
      const settled = await Promise.allSettled(
        healthy.map((shard, index) =>
          shares[index]! > 0
            ? this.onShard(shard, (store) => store.jobReserveIds({ count: shares[index]! }))
            : Promise.resolve([]),
        ),
      );
      for (const [index, outcome] of settled.entries()) {
        if (outcome.status === 'fulfilled') {
          blocks.push(outcome.value);
          missing -= outcome.value.length;
        } else if (healthy[index]!.store.isConnectionLoss(outcome.reason)) lastError = outcome.reason;
        else throw outcome.reason;
      }
    }
    // Shares of shards that failed (or every shard marked down): one more try, shard by shard.
    for (const shard of candidates) {
      if (missing <= 0) break;
      try {
        const block = await this.onShard(shard, (store) => store.jobReserveIds({ count: missing }));
        blocks.push(block);
        missing -= block.length;
      } catch (error) {
        if (!shard.store.isConnectionLoss(error)) throw error;
        lastError = error;
      }
    }
    if (missing > 0) throw lastError;
    return interleave(blocks).slice(0, count);
  }

  async jobSubmit(params: JobSubmitParams): Promise<SubmitResult[]> {
    if (params.transaction !== undefined) {
      throw new ConfigurationError(
        'a sharded store cannot join a caller transaction (its jobs live in several databases); submit without transaction',
      );
    }
    const { jobs, ids } = params;
    if (ids !== undefined && ids.length !== jobs.length) {
      // The shard refuses it with its own message; send it to one so the reason is the same.
      return this.shards[0]!.store.jobSubmit(params);
    }
    assertBatchKeysAgree(jobs);
    const targets = ids === undefined ? this.targetsWithoutIds(jobs) : this.targetsForIds(jobs, ids);
    const givenIds = ids === undefined ? undefined : await this.exchangeIds(ids, targets);
    // Each reserved id is pinned to where it is sent: should the send's outcome be unknown, the
    // retry (same reserved ids) goes there again. Unpinned once answered, or when the shard
    // provably never received it (the connection was refused), so the retry may go elsewhere.
    const pin = (indexes: readonly number[]) => {
      if (ids === undefined || givenIds === undefined) return;
      const at = this.clock.monotonic();
      for (const index of indexes) this.exchangedIds.set(ids[index]!, { id: givenIds[index]!, at });
    };
    const unpin = (indexes: readonly number[]) => {
      if (ids !== undefined) for (const index of indexes) this.exchangedIds.delete(ids[index]!);
    };
    const sent = async <T>(indexes: readonly number[], send: () => Promise<T>): Promise<T> => {
      pin(indexes);
      try {
        const answer = await send();
        unpin(indexes);
        return answer;
      } catch (error) {
        if (neverReachedServer(error)) unpin(indexes);
        throw error;
      }
    };
    const groups = new Map<Shard, number[]>();
    for (const [index, shard] of targets.entries()) {
      const group = groups.get(shard) ?? [];
      group.push(index);
      groups.set(shard, group);
    }
    const results: SubmitResult[] = new Array(jobs.length);
    if (groups.size === 1) {
      const [[shard, indexes]] = [...groups.entries()] as [[Shard, number[]]];
      return sent(indexes, () =>
        this.onShard(shard, (store) =>
          store.jobSubmit({ jobs, ids: givenIds, ...(params.now ? { now: params.now } : {}) }),
        ),
      );
    }
    const parts = [...groups.entries()].map(([shard, indexes]) => ({
      shard,
      indexes,
      params: {
        jobs: indexes.map((index) => jobs[index]!),
        ids: givenIds === undefined ? undefined : indexes.map((index) => givenIds[index]!),
        ...(params.now ? { now: params.now } : {}),
      },
    }));
    const answers = batchNeedsAtomicKeys(jobs)
      ? await sent(
          jobs.map((_, index) => index),
          () => this.submitAcrossShardsAtomically(parts),
        ).catch((error: unknown) => {
          throw renumberConflict(error, parts, jobs.length);
        })
      : // Without keys nothing can half-conflict: each shard writes its part in one statement.
        await Promise.all(
          parts.map((part) =>
            sent(part.indexes, () => this.onShard(part.shard, (store) => store.jobSubmit(part.params))),
          ),
        );
    for (const [partIndex, part] of parts.entries()) {
      for (const [position, index] of part.indexes.entries()) results[index] = answers[partIndex]![position]!;
    }
    return results;
  }

  /**
   * A keyed batch over several shards: each part is written inside its own open transaction on
   * its shard, and all commit only when every part was written, so an idempotency conflict on one
   * shard rolls back every shard's part (nothing of the batch is written, as on one store). Not
   * two-phase: a commit lost between two shards' commits leaves the earlier part; the submit
   * retry sends the same ids again, and each part answers its jobs as already written.
   */
  private async submitAcrossShardsAtomically(
    parts: readonly { shard: Shard; params: JobSubmitParams }[],
  ): Promise<SubmitResult[][]> {
    const clients = await this.connectEach(parts.map((part) => part.shard));
    try {
      await Promise.all(clients.map((client) => client.query('BEGIN')));
      // Every part settles before anything is rolled back: a ROLLBACK sent while another part was
      // still on its way would end that part's transaction first, and its INSERT, sent after it,
      // would then commit on its own (a lone keyed job of the batch was found written that way).
      const settled = await Promise.allSettled(
        parts.map((part, index) =>
          this.onShard(part.shard, (store) => store.jobSubmit({ ...part.params, transaction: clients[index] })),
        ),
      );
      const answers: SubmitResult[][] = [];
      for (const outcome of settled) {
        if (outcome.status === 'rejected') throw outcome.reason;
        answers.push(outcome.value);
      }
      for (const client of clients) await client.query('COMMIT');
      return answers;
    } catch (error) {
      await Promise.all(clients.map((client) => client.query('ROLLBACK').catch(() => undefined)));
      throw error;
    } finally {
      await Promise.all(clients.map((client) => client.end().catch(() => undefined)));
    }
  }

  /**
   * One new connection to each shard ({@link connectShardClient}: the store's connection options).
   * When any connect fails, the others are closed before the first failure is thrown: a keyed batch retried through a shard's
   * outage must not leave a session open on every healthy shard at each attempt.
   */
  private async connectEach(shards: readonly Shard[]): Promise<pg.Client[]> {
    const attempts = await Promise.allSettled(
      shards.map((shard) => connectShardClient(shard.location, CROSS_SHARD_BATCH_APPLICATION)),
    );
    const clients = attempts.flatMap((attempt) => (attempt.status === 'fulfilled' ? [attempt.value] : []));
    const failed = attempts.find((attempt) => attempt.status === 'rejected');
    if (failed) {
      await Promise.all(clients.map((client) => client.end().catch(() => undefined)));
      throw failed.reason;
    }
    return clients;
  }

  /** A keyed job's shard: the one its idempotency scope hashes to. */
  private keyedShard(spec: JobSpec): Shard | null {
    // A schedule's run lives with its schedule (one (schedule, slot) key per shard).
    if (spec.scheduleId !== null && spec.scheduleId !== undefined)
      return this.shardForKey(`schedule:${spec.scheduleId}`);
    return spec.idempotencyKey === null ? null : this.shardForKey(idempotencyScope(spec));
  }

  /** Without ids: keyed jobs to their key's shard, the others together to the next healthy shard. */
  private targetsWithoutIds(jobs: readonly JobSpec[]): Shard[] {
    const keyed = jobs.map((spec) => this.keyedShard(spec));
    // Keyless jobs of a batch join its first keyed job's shard, so a batch of one key stays one statement.
    const keyless = keyed.find((shard) => shard !== null) ?? this.writableShards()[0]!;
    return keyed.map((shard) => shard ?? keyless);
  }

  /**
   * With reserved ids: a keyed job to its key's shard; a keyless one to the shard its id names,
   * unless that shard is down or draining and the id was never sent (then the next healthy one).
   * An id already exchanged keeps its exchange, so a retry goes where the first send went.
   */
  private targetsForIds(jobs: readonly JobSpec[], ids: readonly string[]): Shard[] {
    let fallback: Shard | undefined;
    return jobs.map((spec, index) => {
      const id = ids[index]!;
      const exchanged = this.exchangedIds.get(id);
      if (exchanged) return this.shardOfId(exchanged.id) ?? this.shards[0]!;
      const keyed = this.keyedShard(spec);
      if (keyed) return keyed;
      const own = this.shardOfId(id);
      if (own && own.downSince === null && !own.draining) return own;
      fallback ??= this.writableShards()[0]!;
      return fallback;
    });
  }

  /**
   * The id each job is written under: its reserved id when that names its target shard, else an
   * id reserved on the target, remembered so a retry of the same submit uses it again.
   */
  private async exchangeIds(ids: readonly string[], targets: readonly Shard[]): Promise<string[]> {
    const now = this.clock.monotonic();
    for (const [id, entry] of this.exchangedIds) if (now - entry.at > EXCHANGED_ID_TTL_MS) this.exchangedIds.delete(id);
    const needed = new Map<Shard, number[]>();
    const result = [...ids];
    for (const [index, id] of ids.entries()) {
      const exchanged = this.exchangedIds.get(id);
      if (exchanged) {
        result[index] = exchanged.id;
        continue;
      }
      if (shardNumberOfId(id) === null || this.shardOfId(id) === targets[index]) continue;
      const list = needed.get(targets[index]!) ?? [];
      list.push(index);
      needed.set(targets[index]!, list);
    }
    for (const [shard, indexes] of needed) {
      const fresh = await this.onShard(shard, (store) => store.jobReserveIds({ count: indexes.length }));
      for (const [position, index] of indexes.entries()) {
        result[index] = fresh[position]!;
        this.exchangedIds.set(ids[index]!, { id: fresh[position]!, at: now });
      }
    }
    return result;
  }

  // ---- claims ----

  /**
   * Claims from every live shard at once (see the file header), in rounds: a shard that filled
   * its share may hold more, so while the claim is short those shards are asked again for the
   * rest. The answer is sorted by priority, run_at, id, and what is beyond the limit stays leased
   * in the surplus for the next claim. Order is exact within a shard; across shards only within
   * what one claim collected (docs/sharding.md).
   */
  async jobClaim(params: JobClaimParams): Promise<ClaimedJob[]> {
    if (!Number.isInteger(params.limit) || params.limit <= 0) return this.shards[0]!.store.jobClaim(params);
    this.releaseAgedSurplus(params.now);
    const collected = this.takeSurplus(params);
    let shards = this.claimRotation.order(this.liveShards());
    if (shards.length === 0 && collected.length === 0) throw this.unavailable('claim');
    let firstRound = true;
    const errors: unknown[] = [];
    let answered = 0;
    while (shards.length > 0 && (firstRound || collected.length < params.limit)) {
      // Every shard is asked at least once per claim (one job at least), so none starves.
      const shares = splitClaimLimit(Math.max(0, params.limit - collected.length), shards.length);
      const round = await this.fanOutWithStragglers(
        shards.map((shard, index) => ({
          shard,
          call: (store: Store) => store.jobClaim({ ...params, limit: shares[index]! }),
        })),
        (shard, late: ClaimedJob[]) => this.keepSurplus(shard, late, params.leaseMs),
      );
      errors.push(...round.errors);
      answered += round.values.length;
      const full: Shard[] = [];
      for (const { shard, value } of round.values) {
        collected.push(...value);
        if (value.length >= shares[shards.indexOf(shard)]!) full.push(shard);
      }
      shards = full;
      firstRound = false;
    }
    if (collected.length === 0 && answered === 0 && errors.length > 0) throw errors[0];
    collected.sort(claimOrder);
    for (const job of collected.slice(params.limit)) {
      const shard = this.shardOfId(job.id);
      if (shard) this.keepSurplus(shard, [job], params.leaseMs, false);
    }
    return collected.slice(0, params.limit);
  }

  /**
   * Starts `calls` at once and waits for all of them, but no longer than
   * {@link CLAIM_STRAGGLER_MS} after the first answer. A call answering later hands its value to
   * `late`. Connection losses are collected (the shard is marked down); other errors are thrown
   * once every call that answered in time was accounted for, their values handed to `late`.
   */
  private async fanOutWithStragglers<T>(
    calls: { shard: Shard; call: (store: Store) => Promise<T> }[],
    late: (shard: Shard, value: T) => void,
  ): Promise<{ values: { shard: Shard; value: T }[]; errors: unknown[] }> {
    const values: { shard: Shard; value: T }[] = [];
    const errors: unknown[] = [];
    let failure: unknown;
    let done = false;
    let pending = calls.length;
    let release: () => void = () => {};
    const finished = new Promise<void>((resolve) => {
      release = resolve;
    });
    let timer: ClockTimer | undefined;
    const settle = () => {
      pending -= 1;
      if (pending === 0) release();
      else if (!timer) {
        timer = this.clock.setTimeout(release, CLAIM_STRAGGLER_MS);
        timer.unref();
      }
    };
    for (const { shard, call } of calls) {
      this.onShard(shard, call).then(
        (value) => {
          if (done) late(shard, value);
          else values.push({ shard, value });
          settle();
        },
        (error) => {
          if (!shard.store.isConnectionLoss(error)) failure ??= error;
          errors.push(error);
          settle();
        },
      );
    }
    await finished;
    done = true;
    if (timer) this.clock.clearTimeout(timer);
    if (failure !== undefined) {
      for (const { shard, value } of values) late(shard, value);
      throw failure;
    }
    return { values, errors };
  }

  private keepSurplus(shard: Shard, jobs: readonly ClaimedJob[], leaseMs: number, wake = true): void {
    if (jobs.length === 0) return;
    if (this.closed) {
      void this.releaseJobs(shard, jobs);
      return;
    }
    const at = this.clock.monotonic();
    const maxAgeMs = Math.min(SURPLUS_MAX_AGE_MS, Math.floor(leaseMs / 6));
    for (const job of jobs) this.surplus.push({ job, shard, at, maxAgeMs });
    this.armSurplusTimer();
    // Jobs that arrived after their claim gave up waiting: a claimer should come for them.
    if (wake) this.wake({ runAt: null });
  }

  /** Surplus jobs this claim may take (its queues and kinds), oldest first, up to its limit. */
  private takeSurplus(params: JobClaimParams): ClaimedJob[] {
    if (this.surplus.length === 0) return [];
    const taken: ClaimedJob[] = [];
    this.surplus = this.surplus.filter((entry) => {
      if (taken.length >= params.limit || !claimMatches(params, entry.job)) return true;
      taken.push(entry.job);
      return false;
    });
    return taken;
  }

  /**
   * Releases surplus jobs too old to hand out: older than their max age, or (with a pinned
   * database instant, as tests and simulations pin it) whose lease ends by then.
   */
  private releaseAgedSurplus(pinnedNow?: Date): void {
    const now = this.clock.monotonic();
    const aged = (entry: SurplusJob) =>
      now - entry.at > entry.maxAgeMs || (pinnedNow !== undefined && entry.job.leaseUntil <= pinnedNow);
    const old = this.surplus.filter(aged);
    if (old.length === 0) return;
    this.surplus = this.surplus.filter((entry) => !aged(entry));
    for (const entry of old) void this.releaseJobs(entry.shard, [entry.job]);
  }

  private armSurplusTimer(): void {
    if (this.surplusTimer || this.surplus.length === 0) return;
    const delay = Math.min(...this.surplus.map((entry) => entry.maxAgeMs)) + 1;
    this.surplusTimer = this.clock.setTimeout(() => {
      this.surplusTimer = undefined;
      this.releaseAgedSurplus();
      this.armSurplusTimer();
    }, delay);
    this.surplusTimer.unref();
  }

  /** Gives leases back; a failure leaves the lease to lapse (the job is due again after it). */
  private async releaseJobs(shard: Shard, jobs: readonly ClaimedJob[]): Promise<void> {
    await Promise.all(jobs.map((job) => shard.store.jobRelease(leaseOf(job)).catch(() => undefined)));
  }

  private unavailable(what: string): Error {
    const down = this.shards.find((shard) => shard.lastError !== undefined);
    if (down?.lastError instanceof Error) return down.lastError;
    return new ShardsUnavailableError(`no shard could ${what}: every shard is down`, undefined);
  }

  async jobNextRunAt(params: NextRunAtParams): Promise<Date | null> {
    const shards = this.liveShards();
    if (shards.length === 0) throw this.unavailable('answer next-run-at');
    let answered: Date | null = null;
    const answers = await this.fanOutWithStragglers(
      shards.map((shard) => ({ shard, call: (store: Store) => store.jobNextRunAt(params) })),
      (_shard, late: Date | null) => {
        // A late shard with earlier work than the answer given: tell the listeners.
        if (late !== null && (answered === null || late < answered)) this.wake({ runAt: late });
      },
    );
    if (answers.values.length === 0) throw answers.errors[0];
    for (const { value } of answers.values)
      if (value !== null && (answered === null || value < answered)) answered = value;
    return answered;
  }

  // ---- partitions: one per shard, for a worker's per-shard claim loops ----

  /**
   * Every shard as a partition a worker drives on its own (src/worker/: one claim loop, prefetch
   * buffer, heartbeat and completion batcher per shard). Calls go straight to that shard's store,
   * through the shard's health tracking (a connection loss marks it down, an answer up, so a
   * worker's claims are also the probes that bring a returning shard back for submits). Nothing
   * of the merged claim applies here: no share of a limit, no straggler wait, no surplus.
   */
  partitions(): StorePartitions {
    this.partitionList ??= this.shards.map((shard) => this.partitionOf(shard));
    return { parts: this.partitionList, partOfId: (id) => this.partIndexOfId(id) };
  }

  private partitionOf(shard: Shard): StorePartition {
    const on = <T>(call: (store: Store) => Promise<T>) => this.onShard(shard, call);
    return {
      now: () => on((store) => store.now()),
      jobClaim: (params) => on((store) => store.jobClaim(params)),
      jobNextRunAt: (params) => on((store) => store.jobNextRunAt(params)),
      jobReleaseByOwner: (params) => on((store) => store.jobReleaseByOwner(params)),
      jobHeartbeatMany: (params) => on((store) => store.jobHeartbeatMany(params)),
      jobCompleteMany: (params) => on((store) => store.jobCompleteMany(params)),
      jobFailMany: (params) => on((store) => store.jobFailMany(params)),
      // The shard's own wake-ups (its LISTEN), and one when the shard is marked up again, so a
      // claim loop backing off from it comes back at once.
      subscribe: async (listener) => {
        const own = await shard.store.subscribe(listener);
        const listeners = this.shardListeners.get(shard) ?? new Set();
        listeners.add(listener);
        this.shardListeners.set(shard, listeners);
        return async () => {
          listeners.delete(listener);
          await own();
        };
      },
      isConnectionLoss: (error) => shard.store.isConnectionLoss(error),
    };
  }

  /** The index in {@link shards} (and in {@link partitions}' parts) of the shard holding job `id`. */
  private partIndexOfId(id: string): number {
    const shard = this.shardOfId(id);
    return shard ? this.shards.indexOf(shard) : 0;
  }

  // ---- writes by id ----

  async jobHeartbeat(params: JobHeartbeatParams): Promise<Date | null> {
    const shard = this.shardOfId(params.id);
    return shard ? this.onShard(shard, (store) => store.jobHeartbeat(params)) : null;
  }

  async jobHeartbeatMany(params: JobHeartbeatManyParams): Promise<(Date | null)[]> {
    return this.splitLeases(params.leases, null, (store, leases) => store.jobHeartbeatMany({ ...params, leases }));
  }

  async jobComplete(params: JobCompleteParams): Promise<CompleteOutcome> {
    if (params.transaction !== undefined) {
      throw new ConfigurationError('a sharded store cannot join a caller transaction; complete without transaction');
    }
    const shard = this.shardOfId(params.id);
    return shard ? this.onShard(shard, (store) => store.jobComplete(params)) : 'stale';
  }

  async jobCompleteMany(params: JobCompleteManyParams): Promise<CompleteOutcome[]> {
    return this.splitLeases<JobLease, CompleteOutcome>(params.leases, 'stale', (store, leases) =>
      store.jobCompleteMany({ ...params, leases }),
    );
  }

  /**
   * Sends each shard its own leases in one call, answers in input order; leases of no listed
   * shard answer `unknown`. When some shards answered and the others lost their connection, the
   * answers given are not thrown away: a {@link PartialBatchError} carries them (undefined for the
   * unreachable shards' leases), so the worker keeps the other shards' leases and completions.
   */
  private async splitLeases<L extends JobLease, T>(
    leases: readonly L[],
    unknown: T,
    call: (store: Store, leases: L[]) => Promise<T[]>,
  ): Promise<T[]> {
    const groups = new Map<Shard, number[]>();
    const results: (T | undefined)[] = leases.map(() => unknown);
    for (const [index, lease] of leases.entries()) {
      const shard = this.shardOfId(lease.id);
      if (!shard) continue;
      const group = groups.get(shard) ?? [];
      group.push(index);
      groups.set(shard, group);
    }
    const settled = await Promise.allSettled(
      [...groups.entries()].map(async ([shard, indexes]) => {
        try {
          const answered = await this.onShard(shard, (store) =>
            call(
              store,
              indexes.map((index) => leases[index]!),
            ),
          );
          for (const [position, index] of indexes.entries()) results[index] = answered[position]!;
        } catch (error) {
          for (const index of indexes) results[index] = undefined;
          throw error;
        }
      }),
    );
    const failures = settled.filter((outcome) => outcome.status === 'rejected').map((outcome) => outcome.reason);
    if (failures.length === 0) return results as T[];
    const other = failures.find((error) => !this.isConnectionLoss(error));
    if (other !== undefined || failures.length === settled.length) throw other ?? failures[0];
    throw new PartialBatchError(
      `${failures.length} of ${settled.length} shards could not be reached; the others answered`,
      results,
      failures[0],
    );
  }

  async jobFail(params: JobFailParams): Promise<FailOutcome> {
    const shard = this.shardOfId(params.id);
    return shard ? this.onShard(shard, (store) => store.jobFail(params)) : { outcome: 'stale' };
  }

  async jobFailMany(params: JobFailManyParams): Promise<FailOutcome[]> {
    return this.splitLeases<JobFailure, FailOutcome>(params.failures, STALE_FAILURE, (store, failures) =>
      store.jobFailMany({ ...params, failures }),
    );
  }

  async jobRelease(params: JobReleaseParams): Promise<ReleaseOutcome> {
    const shard = this.shardOfId(params.id);
    return shard ? this.onShard(shard, (store) => store.jobRelease(params)) : 'stale';
  }

  async jobReleaseByOwner(params: JobReleaseByOwnerParams): Promise<number> {
    // Surplus of that claim is given back by the shards below: it must never be handed out after.
    this.surplus = this.surplus.filter((entry) => entry.job.leaseOwner !== params.owner);
    const counts = await this.everyShard((store) => store.jobReleaseByOwner(params));
    return counts.reduce((sum, count) => sum + count, 0);
  }

  async jobCancel(params: JobCancelParams): Promise<CancelOutcome> {
    const shard = this.shardOfId(params.id);
    return shard ? this.onShard(shard, (store) => store.jobCancel(params)) : 'not_found';
  }

  async jobGet(params: { id: string }): Promise<Job | null> {
    const shard = this.shardOfId(params.id);
    return shard ? this.onShard(shard, (store) => store.jobGet(params)) : null;
  }

  async deadLetterRetry(params: DeadLetterRetryParams): Promise<Job | null> {
    const shard = this.shardOfId(params.id);
    return shard ? this.onShard(shard, (store) => store.deadLetterRetry(params)) : null;
  }

  // ---- reads and admin across shards ----

  /** Calls every shard; any failure fails the call (a merged answer missing a shard would be wrong). */
  private everyShard<T>(call: (store: Store) => Promise<T>): Promise<T[]> {
    return Promise.all(this.shards.map((shard) => this.onShard(shard, call)));
  }

  async jobList(params: JobListParams): Promise<Job[]> {
    return mergeById(await this.everyShard((store) => store.jobList(params)), params.limit, params.order);
  }

  async deadLetterList(params: DeadLetterListParams): Promise<Job[]> {
    return mergeById(await this.everyShard((store) => store.deadLetterList(params)), params.limit, params.order);
  }

  /** Per-queue counts summed over the shards; a field estimated on any shard is estimated in the sum. */
  async queueCounts(params?: QueueCountsParams): Promise<QueueCounts[]> {
    const merged = new Map<string, QueueCounts>();
    for (const counts of await this.everyShard((store) => store.queueCounts(params))) {
      for (const queue of counts) {
        const into = merged.get(queue.queue);
        if (!into) {
          merged.set(queue.queue, { ...queue, estimated: [...queue.estimated] });
          continue;
        }
        addQueueStats(into, queue);
        for (const field of queue.estimated) if (!into.estimated.includes(field)) into.estimated.push(field);
      }
    }
    return [...merged.values()].sort((a, b) => compareText(a.queue, b.queue));
  }

  /** Every shard's buckets are the same epoch-aligned windows: summed bucket by bucket. */
  async jobActivity(params: JobActivityParams): Promise<ActivityBucket[]> {
    const perShard = await this.everyShard((store) => store.jobActivity(params));
    const [first, ...rest] = perShard;
    const merged = (first ?? []).map((bucket) => ({ ...bucket, latenessHistogram: [...bucket.latenessHistogram] }));
    for (const buckets of rest) {
      for (const [index, bucket] of buckets.entries()) {
        const into = merged[index];
        if (!into) continue;
        into.completed += bucket.completed;
        into.failed += bucket.failed;
        for (const [slot, count] of bucket.latenessHistogram.entries()) {
          into.latenessHistogram[slot] = (into.latenessHistogram[slot] ?? 0) + count;
        }
      }
    }
    return merged;
  }

  async jobCountMatching(params: JobCountParams): Promise<MatchCount> {
    const counts = await this.everyShard((store) => store.jobCountMatching(params));
    return {
      count: counts.reduce((sum, count) => sum + count.count, 0),
      estimated: counts.some((count) => count.estimated),
    };
  }

  /**
   * One batch of a bulk action walking ids in ascending order across shards, which is shard-major
   * (shard-ids.ts): the shard holding `afterId` first, then the higher-numbered shards, until the
   * batch is full, so "fewer than limit scanned" still means the whole walk is done.
   */
  async jobBulkApply(params: JobBulkApplyParams): Promise<BulkBatchResult> {
    const from = params.afterId === undefined ? 0 : shardNumberOfId(params.afterId);
    if (from === null || !Number.isInteger(params.limit) || params.limit < 1) {
      // Refused by the shard exactly as a single store refuses it.
      return this.shards[0]!.store.jobBulkApply(params);
    }
    const ordered = [...this.shards].filter((shard) => shard.number >= from).sort((a, b) => a.number - b.number);
    const result: BulkBatchResult = { scanned: 0, affected: 0, lastId: null };
    for (const shard of ordered) {
      const left = params.limit - result.scanned;
      if (left <= 0) break;
      const batch = await this.onShard(shard, (store) =>
        store.jobBulkApply({ ...params, limit: left, afterId: shard.number === from ? params.afterId : undefined }),
      );
      result.scanned += batch.scanned;
      result.affected += batch.affected;
      if (batch.lastId !== null) result.lastId = batch.lastId;
    }
    return result;
  }

  async deadLetterPurge(params: DeadLetterPurgeParams): Promise<number> {
    if (params.ids === undefined) {
      const counts = await this.everyShard((store) => store.deadLetterPurge(params));
      return counts.reduce((sum, count) => sum + count, 0);
    }
    // Invalid ids are refused by a shard exactly as a single store refuses them.
    if (params.ids.some((id) => shardNumberOfId(id) === null) || params.ids.length === 0) {
      return this.shards[0]!.store.deadLetterPurge(params);
    }
    const byShard = new Map<Shard, string[]>();
    for (const id of params.ids) {
      const shard = this.shardOfId(id);
      if (!shard) continue;
      byShard.set(shard, [...(byShard.get(shard) ?? []), id]);
    }
    const counts = await Promise.all(
      [...byShard.entries()].map(([shard, ids]) =>
        this.onShard(shard, (store) => store.deadLetterPurge({ ...params, ids })),
      ),
    );
    // parkedBefore with ids: shards not named still purge by date.
    if (params.parkedBefore !== undefined) {
      const others = this.shards.filter((shard) => !byShard.has(shard));
      const more = await Promise.all(
        others.map((shard) =>
          this.onShard(shard, (store) => store.deadLetterPurge({ parkedBefore: params.parkedBefore })),
        ),
      );
      counts.push(...more);
    }
    return counts.reduce((sum, count) => sum + count, 0);
  }

  async jobPruneFinished(params: JobPruneParams): Promise<number> {
    const counts = await this.everyShard((store) => store.jobPruneFinished(params));
    return counts.reduce((sum, count) => sum + count, 0);
  }

  async queueStats(params?: Parameters<Store['queueStats']>[0]): Promise<QueueStats[]> {
    const merged = new Map<string, QueueStats>();
    for (const stats of await this.everyShard((store) => store.queueStats(params))) {
      for (const queue of stats) {
        const into = merged.get(queue.queue);
        if (!into) {
          merged.set(queue.queue, { ...queue });
          continue;
        }
        addQueueStats(into, queue);
      }
    }
    return [...merged.values()].sort((a, b) => compareText(a.queue, b.queue));
  }

  async jobDueCountsByKind(params?: Parameters<Store['jobDueCountsByKind']>[0]): Promise<DueKindCount[]> {
    const merged = new Map<string, DueKindCount>();
    for (const counts of await this.everyShard((store) => store.jobDueCountsByKind(params))) {
      for (const count of counts) {
        const key = JSON.stringify([count.queue, count.kind]);
        const into = merged.get(key);
        if (into) into.count += count.count;
        else merged.set(key, { ...count });
      }
    }
    return [...merged.values()].sort((a, b) => compareText(a.queue, b.queue) || compareText(a.kind, b.kind));
  }

  /** Pauses on every shard (a queue spans them all); the answer is the first shard's. */
  async queuePause(params: QueueNameParams): Promise<QueueState> {
    const states = await this.everyShard((store) => store.queuePause(params));
    return earliestPause(states);
  }

  async queueResume(params: QueueNameParams): Promise<QueueState> {
    const states = await this.everyShard((store) => store.queueResume(params));
    return states[0]!;
  }

  async queueList(): Promise<QueueState[]> {
    const merged = new Map<string, QueueState[]>();
    for (const states of await this.everyShard((store) => store.queueList())) {
      for (const state of states) merged.set(state.name, [...(merged.get(state.name) ?? []), state]);
    }
    return [...merged.entries()]
      .sort(([a], [b]) => compareText(a, b))
      .map(([, states]) => (states.some((state) => state.paused) ? earliestPause(states) : states[0]!));
  }

  // ---- schedules: each lives on the shard of its id's hash ----

  /** The shard holding schedule `id` now, asking its hash's shard first; null when none has it. */
  private async scheduleHome(id: string): Promise<Shard | null> {
    const hashed = this.shardForKey(`schedule:${id}`);
    if (await this.onShard(hashed, (store) => store.scheduleGet({ id }))) return hashed;
    // A schedule created before a shard was added (or on a shard now draining) stays where it was.
    for (const shard of this.shards) {
      if (shard === hashed) continue;
      if (await this.onShard(shard, (store) => store.scheduleGet({ id }))) return shard;
    }
    return null;
  }

  async scheduleUpsert(params: ScheduleUpsertParams): Promise<ScheduleUpsertResult> {
    const id = params.spec.id;
    const home = typeof id === 'string' ? await this.scheduleHome(id) : null;
    if (home && !home.draining) return this.onShard(home, (store) => store.scheduleUpsert(params));
    const target = typeof id === 'string' ? this.shardForKey(`schedule:${id}`) : this.shards[0]!;
    const result = await this.onShard(target, (store) => store.scheduleUpsert(params));
    if (home) {
      // Moved off a draining shard: the old copy and its pending runs go.
      await this.onShard(home, (store) => store.scheduleDelete({ id }));
      return { ...result, created: false };
    }
    return result;
  }

  async scheduleGet(params: { id: string }): Promise<ScheduleUpsertResult['schedule'] | null> {
    const home = await this.scheduleHome(params.id);
    return home ? this.onShard(home, (store) => store.scheduleGet(params)) : null;
  }

  async scheduleList(params: ScheduleListParams): Promise<ScheduleUpsertResult['schedule'][]> {
    const lists = await this.everyShard((store) => store.scheduleList(params));
    const limit = params.limit ?? 100;
    return lists
      .flat()
      .sort((a, b) => compareText(a.id, b.id))
      .slice(0, limit);
  }

  private async onScheduleHome<T>(id: string, call: (store: Store) => Promise<T>, missing: T): Promise<T> {
    const home = await this.scheduleHome(id);
    return home ? this.onShard(home, call) : missing;
  }

  schedulePause(params: ScheduleIdParams): Promise<ScheduleUpsertResult['schedule'] | null> {
    return this.onScheduleHome(params.id, (store) => store.schedulePause(params), null);
  }

  scheduleResume(params: ScheduleIdParams): Promise<ScheduleUpsertResult['schedule'] | null> {
    return this.onScheduleHome(params.id, (store) => store.scheduleResume(params), null);
  }

  scheduleDelete(params: { id: string }): Promise<boolean> {
    return this.onScheduleHome(params.id, (store) => store.scheduleDelete(params), false);
  }

  async scheduleRepair(params?: ScheduleRepairParams): Promise<number> {
    const counts = await Promise.all(
      this.liveShards().map((shard) => this.onShard(shard, (store) => store.scheduleRepair(params)).catch(() => 0)),
    );
    return counts.reduce((sum, count) => sum + count, 0);
  }

  // ---- wake-ups ----

  async subscribe(listener: (wakeUp: WakeUp) => void): Promise<() => Promise<void>> {
    if (this.closed) throw new ConfigurationError('ShardedStore.subscribe: the store is closed');
    this.listeners.add(listener);
    // Every shard at once: an unreachable shard's listener retries in the background (its first
    // attempt is bounded by the connect timeout) and must not hold up the others' wake-ups.
    this.subscribing ??= (async () => {
      const unsubscribes = await Promise.all(
        this.shards.map((shard) => shard.store.subscribe((wakeUp) => this.wake(wakeUp))),
      );
      this.unsubscribes.push(...unsubscribes);
    })();
    await this.subscribing;
    let subscribed = true;
    return async () => {
      if (!subscribed) return;
      subscribed = false;
      this.listeners.delete(listener);
    };
  }

  // ---- worker registry: every live shard holds a copy, so any one shard answers ----

  async workerRegister(params: WorkerRegisterParams): Promise<WorkerRecord> {
    const shards = this.liveShards();
    const settled = await Promise.allSettled(
      shards.map((shard) => this.onShard(shard, (store) => store.workerRegister(params))),
    );
    const recorded = settled.find((outcome) => outcome.status === 'fulfilled');
    if (recorded) return recorded.value;
    const failed = settled.find((outcome) => outcome.status === 'rejected');
    throw failed ? failed.reason : this.unavailable('register a worker');
  }

  async workerDeregister(params: { id: string }): Promise<boolean> {
    const settled = await Promise.allSettled(
      this.shards.map((shard) => this.onShard(shard, (store) => store.workerDeregister(params))),
    );
    const answered = settled.filter((outcome) => outcome.status === 'fulfilled');
    if (answered.length === 0) throw (settled[0] as PromiseRejectedResult).reason;
    return answered.some((outcome) => outcome.value);
  }

  async workerList(params?: Parameters<Store['workerList']>[0]): Promise<WorkerRecord[]> {
    const settled = await Promise.allSettled(
      this.liveShards().map((shard) => this.onShard(shard, (store) => store.workerList(params))),
    );
    const answered = settled.filter((outcome) => outcome.status === 'fulfilled');
    if (answered.length === 0) {
      const failed = settled.find((outcome) => outcome.status === 'rejected');
      throw failed ? failed.reason : this.unavailable('list workers');
    }
    const latest = new Map<string, WorkerRecord>();
    for (const outcome of answered) {
      for (const record of outcome.value) {
        const seen = latest.get(record.id);
        if (!seen || record.lastSeenAt > seen.lastSeenAt) latest.set(record.id, record);
      }
    }
    return [...latest.values()].sort((a, b) => compareText(a.id, b.id));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.surplusTimer) this.clock.clearTimeout(this.surplusTimer);
    const surplus = this.surplus;
    this.surplus = [];
    await Promise.all(surplus.map((entry) => this.releaseJobs(entry.shard, [entry.job])));
    this.listeners.clear();
    this.shardListeners.clear();
    await Promise.all(this.unsubscribes.map((unsubscribe) => unsubscribe().catch(() => {})));
    await Promise.all(this.shards.map((shard) => shard.store.close()));
  }
}

/** A stored schedule as the spec that re-creates it (a record read back is a valid input). */
function scheduleSpecOf(schedule: Schedule): ScheduleSpec {
  const { id, cron, timeZone, job, jitterMs, jitterMode, misfire, paused } = schedule;
  // A record says "no time limit" as null; an input says it by leaving timeoutMs out.
  const { timeoutMs, ...jobFields } = job;
  const jobInput = timeoutMs === null ? jobFields : { ...jobFields, timeoutMs };
  // The window and run cap are stored for every policy but accepted only with catch_up.
  const misfireInput = misfire.policy === 'catch_up' ? misfire : { policy: misfire.policy };
  return normalizeScheduleSpec({
    id,
    cron,
    timeZone,
    job: jobInput,
    jitterMs,
    jitterMode,
    misfire: misfireInput,
    paused,
  });
}

/** A single store's claim order: priority (lower first), then run_at, then id. */
function claimOrder(a: ClaimedJob, b: ClaimedJob): number {
  return a.priority - b.priority || a.runAt.getTime() - b.runAt.getTime() || Number(a.id) - Number(b.id);
}

/** Whether a claim with these filters could have claimed `job`. */
function claimMatches(params: JobClaimParams, job: ClaimedJob): boolean {
  if (params.queues !== undefined && !params.queues.includes(job.queue)) return false;
  if (params.kinds !== undefined && !params.kinds.includes(job.kind)) return false;
  if (params.excludeKinds?.includes(job.kind)) return false;
  return true;
}

/** Shard lists merged in id order (numeric, either way), cut to the page size. */
function mergeById(lists: readonly Job[][], limit: number | undefined, order: ListOrder | undefined): Job[] {
  const sign = order === 'desc' ? -1 : 1;
  return lists
    .flat()
    .sort((a, b) => sign * (Number(a.id) - Number(b.id)))
    .slice(0, limit ?? 100);
}

/** Adds one shard's counts of a queue into the merged ones. */
function addQueueStats(into: QueueStats, queue: QueueStats): void {
  into.scheduled += queue.scheduled;
  into.available += queue.available;
  into.running += queue.running;
  into.done += queue.done;
  into.cancelled += queue.cancelled;
  into.dead += queue.dead;
  into.unhandled += queue.unhandled;
  if (queue.paused) into.paused = true;
}

/** Bytewise text order, as the stores order names (PostgreSQL "C"-like for ASCII). */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A queue paused on several shards: paused since the earliest of them. */
function earliestPause(states: readonly QueueState[]): QueueState {
  const paused = states.filter((state) => state.paused && state.pausedAt !== null);
  if (paused.length === 0) return states[0]!;
  return paused.reduce((a, b) => (a.pausedAt! <= b.pausedAt! ? a : b));
}

/**
 * A part's idempotency conflict names the job's position in that part; the caller sent the whole
 * batch, so the error names its position there (`jobs[i].idempotencyKey`), as one store would.
 */
function renumberConflict(
  error: unknown,
  parts: readonly { indexes: readonly number[]; params: JobSubmitParams }[],
  batchSize: number,
): unknown {
  if (!(error instanceof IdempotencyConflictError)) return error;
  const local = /^jobs\[(\d+)\]\.idempotencyKey$/.exec(error.field);
  const localIndex = local ? Number(local[1]) : error.field === 'idempotencyKey' ? 0 : null;
  if (localIndex === null) return error;
  const part = parts.find((each) => {
    const spec = each.params.jobs[localIndex];
    return spec !== undefined && error.message.includes(JSON.stringify(spec.idempotencyKey));
  });
  const index = part?.indexes[localIndex];
  if (index === undefined) return error;
  const reason = error.message.slice(error.field.length + 2);
  return new IdempotencyConflictError(idempotencyField(index, batchSize), error.existingId, reason);
}

/**
 * Whether a connection error happened before anything reached the server (refused, unresolvable,
 * unreachable, timed out connecting, or refused at startup): then nothing was written, for sure.
 * Any other loss (a connection dropped mid-statement) leaves the outcome unknown.
 */
function neverReachedServer(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (
    typeof code === 'string' &&
    ['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', '57P03'].includes(code)
  ) {
    return true;
  }
  const message = error instanceof Error ? error.message : '';
  return /timeout exceeded when trying to connect|Connection terminated due to connection timeout/i.test(message);
}

/** One item of each list in turn: [[a1, a2], [b1]] → [a1, b1, a2]. */
function interleave(lists: readonly string[][]): string[] {
  const out: string[] = [];
  const longest = Math.max(0, ...lists.map((list) => list.length));
  for (let index = 0; index < longest; index += 1) {
    for (const list of lists) if (index < list.length) out.push(list[index]!);
  }
  return out;
}
