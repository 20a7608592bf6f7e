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
import { redactStoreUrl } from '../open-store.js';
import { isTransientConnectionError } from '../postgres/checked-out-client.js';
import { resolvePostgresConnectionOptions } from '../postgres/connection-options.js';
import type { PostgresStoreOptions } from '../postgres/postgres-store.js';
import type { Store, StoreCapabilities, WakeUp } from '../store.js';
import { readShardIdentity, type ShardIdentity, type ShardLocation } from './shard-identity.js';

/** How often a deferred shard tries to open again while it stays unreachable, ms. */
export const DEFERRED_OPEN_RETRY_MS = 1000;

/**
 * The Store methods a deferred shard hands to the real store once it is open: every one but
 * those written out in the class (they must work before it opens) and the optional partitions,
 * which a single shard does not offer. Checked by the compiler both ways: a method added to Store
 * without a line here fails to compile, and so does a line naming no Store method.
 */
type ForwardedMethod = Exclude<keyof Store, 'capabilities' | 'subscribe' | 'close' | 'isConnectionLoss' | 'partitions'>;
const FORWARDED_METHODS = Object.keys({
  now: true,
  jobSubmit: true,
  jobReserveIds: true,
  jobClaim: true,
  jobHeartbeat: true,
  jobHeartbeatMany: true,
  jobComplete: true,
  jobCompleteMany: true,
  jobFail: true,
  jobFailMany: true,
  jobRelease: true,
  jobReleaseByOwner: true,
  jobCancel: true,
  jobGet: true,
  jobList: true,
  jobPruneFinished: true,
  jobNextRunAt: true,
  deadLetterList: true,
  deadLetterRetry: true,
  deadLetterPurge: true,
  queueStats: true,
  queuePause: true,
  queueResume: true,
  queueList: true,
  scheduleUpsert: true,
  scheduleGet: true,
  scheduleList: true,
  schedulePause: true,
  scheduleResume: true,
  scheduleDelete: true,
  scheduleRepair: true,
  workerRegister: true,
  workerDeregister: true,
  workerList: true,
  jobDueCountsByKind: true,
  queueCounts: true,
  jobActivity: true,
  jobCountMatching: true,
  jobBulkApply: true,
} as const satisfies Record<ForwardedMethod, true>) as ForwardedMethod[];

// The forwarded methods are defined on the prototype by the class's static block, one per name
// in FORWARDED_METHODS; this declaration gives them their Store types.
export interface DeferredShardStore extends Pick<Store, ForwardedMethod> {}

/** A shard's store that opens on first use; see the file header. */
// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the interface above types the members the static block installs
export class DeferredShardStore implements Store {
  static {
    for (const method of FORWARDED_METHODS) {
      Object.defineProperty(DeferredShardStore.prototype, method, {
        value(this: DeferredShardStore, ...args: unknown[]): Promise<unknown> {
          return this.ready().then((store) => (store[method] as (...params: unknown[]) => Promise<unknown>)(...args));
        },
        writable: true,
        configurable: true,
      });
    }
  }

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
      inProcess: false,
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
}
