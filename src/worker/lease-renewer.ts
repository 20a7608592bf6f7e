/**
 * Keeps this worker's leases alive: one batched heartbeat (`jobHeartbeatMany`) for every lease it
 * holds, every `intervalMs`.
 *
 * Who decides a lease is gone: the database, by its own clock. A heartbeat answered `null` means
 * the lease lapsed, passed to a newer claim or the job was cancelled, and the lease is reported
 * lost at once. The worker clock decides only one thing: when heartbeats cannot reach the database
 * (an outage, a hung connection, heartbeats paused by a test), a lease not confirmed within
 * `leaseMs` of its last confirmed renewal is presumed lost, because by then another worker may
 * hold it. Local deadlines use the monotonic clock, measured from when the confirming request was
 * sent, so they err towards "lost" rather than towards two live owners.
 */
import type { Clock, ClockTimer } from '../clock/clock.js';
import { systemClock } from '../clock/clock.js';
import { PartialBatchError } from '../job/errors.js';
import type { JobLease, Store } from '../store/store.js';
import { IntrusiveList, type ListLinks } from './intrusive-list.js';

/** Why a lease was given up. */
export type LeaseLossReason = 'heartbeat_refused' | 'lease_unconfirmed';

/**
 * A lease this worker holds, as its renewer keeps it: the claim's fencing triple (it is a
 * {@link JobLease}) plus the renewer's bookkeeping. {@link LeaseRenewer.add} makes one per claimed
 * job, and the worker passes it wherever that job's lease is needed, so adding, removing and
 * asking after a lease are a flag and two links. A map keyed by `<id>:<token>` strings made a
 * string and a hash per job and rebuilt its table as it churned; without it a worker's own CPU per
 * job fell from 6.13 to 5.02 µs (bench/worker-bookkeeping.ts, 200,000 jobs, 12 of 12 rounds lower).
 */
export class HeldLease implements JobLease, ListLinks<HeldLease> {
  /** Whether its renewer still holds (and renews) it. */
  held = true;
  /** The renewer's list of held leases runs through these. */
  previous: HeldLease | undefined = undefined;
  next: HeldLease | undefined = undefined;

  constructor(
    readonly id: string,
    readonly token: number,
    readonly leaseOwner: string | undefined,
    /** Monotonic ms until which the database has confirmed the lease (request send time + leaseMs). */
    public confirmedUntil: number,
    /** The renewer that holds it. */
    readonly renewer: LeaseRenewer,
  ) {}
}

/** How the renewer reports what it learns. */
export interface LeaseRenewerEvents {
  onLost(lease: JobLease, reason: LeaseLossReason): void;
  onError(error: unknown): void;
}

/** Most leases per heartbeat round trip; bounds statement size for very large workers. */
const HEARTBEAT_CHUNK = 1000;

/** Batches heartbeats for all leases a worker holds. */
export class LeaseRenewer {
  /** The held leases, oldest first. */
  private readonly held = new IntrusiveList<HeldLease>();
  private timer: ClockTimer | undefined;
  private inFlight: Promise<void> | undefined;
  private running = false;
  private paused = false;

  constructor(
    private readonly store: Pick<Store, 'jobHeartbeatMany'>,
    private readonly leaseMs: number,
    private readonly intervalMs: number,
    private readonly events: LeaseRenewerEvents,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Starts beating; leases can be added before or after. */
  start(): void {
    this.running = true;
    this.schedule(this.intervalMs);
  }

  /** Stops beating and waits (at most leaseMs) for a heartbeat in flight; held leases are simply forgotten. */
  async stop(): Promise<void> {
    this.running = false;
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    if (this.inFlight) {
      let bound: ClockTimer | undefined;
      await Promise.race([
        this.inFlight,
        new Promise((resolve) => {
          bound = this.clock.setTimeout(() => resolve(undefined), this.leaseMs);
        }),
      ]);
      this.clock.clearTimeout(bound);
    }
    for (let lease = this.held.first; lease; lease = this.held.first) this.unlink(lease);
  }

  /**
   * Starts renewing a lease the database confirmed at `confirmedAt` (the clock's monotonic ms when
   * the claim was sent) and returns it as held here: pass that {@link HeldLease} on as the job's
   * lease, since {@link remove} and {@link holds} know a lease by it (a job claimed again by this
   * worker is a different lease). `lease` may be the claimed job itself: only its id, token and
   * owner are read.
   */
  add(lease: JobLease, confirmedAt: number): HeldLease {
    const held = new HeldLease(lease.id, lease.token, lease.leaseOwner, confirmedAt + this.leaseMs, this);
    this.held.append(held);
    return held;
  }

  /** Stops renewing a lease (its job finished, failed or was released); a lease not held here is ignored. */
  remove(lease: JobLease): void {
    if (this.holds(lease)) this.unlink(lease as HeldLease);
  }

  /** Whether the lease is one this renewer added and still holds. */
  holds(lease: JobLease): boolean {
    return lease instanceof HeldLease && lease.renewer === this && lease.held;
  }

  /** How many leases are being renewed. */
  get size(): number {
    return this.held.size;
  }

  /**
   * Fault injection for tests: while paused no heartbeat is sent, exactly as if the worker were
   * frozen, so leases lapse in the database and are then presumed lost here.
   */
  setPaused(paused: boolean): void {
    this.paused = paused;
  }

  private schedule(delayMs: number): void {
    if (!this.running) return;
    this.clock.clearTimeout(this.timer);
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      if (this.inFlight) {
        // The last heartbeat has not come back (a hung connection): it confirms nothing, so leases
        // whose confirmation has run out are presumed lost rather than left running unowned.
        this.expireUnconfirmed();
        this.schedule(this.untilNextExpiryMs());
        return;
      }
      this.inFlight = this.beat().finally(() => {
        this.inFlight = undefined;
      });
      // While that heartbeat is out, keep a timer armed: if it hangs (a network partition, a
      // half-open connection) its own completion would be the only thing left to schedule the next
      // check, and a lease could then stay "held", its handler running, long after it lapsed in the
      // database. beat() rearms the timer itself when it returns.
      if (!this.timer) this.schedule(this.untilNextExpiryMs());
    }, delayMs);
  }

  /**
   * Delay until the next check while a heartbeat is out: the earliest held confirmation's end, so
   * a lease is presumed lost as soon as it could have lapsed in the database, never an interval later.
   * A confirmation that had already run out when the heartbeat was sent (the worker was frozen, or
   * its event loop stalled) waits up to one interval for that heartbeat's answer instead, as before:
   * the database may still hold the lease, or it refuses it, which is then reported as stale.
   */
  private untilNextExpiryMs(): number {
    let earliest = Number.POSITIVE_INFINITY;
    for (let entry = this.held.first; entry; entry = entry.next) earliest = Math.min(earliest, entry.confirmedUntil);
    const untilMs = Math.ceil(earliest - this.clock.monotonic());
    return untilMs <= 0 ? this.intervalMs : Math.min(this.intervalMs, untilMs);
  }

  private async beat(): Promise<void> {
    let nextDelayMs = this.intervalMs;
    try {
      if (this.held.size === 0) return;
      if (this.paused) {
        this.expireUnconfirmed();
        return;
      }
      const entries = this.held.toArray();
      for (let i = 0; i < entries.length; i += HEARTBEAT_CHUNK) {
        const chunk = entries.slice(i, i + HEARTBEAT_CHUNK);
        const sentAt = this.clock.monotonic();
        let results: (Date | null)[];
        try {
          results = await this.store.jobHeartbeatMany({
            leases: chunk,
            leaseMs: this.leaseMs,
          });
        } catch (error) {
          this.events.onError(error);
          // Keep trying well inside the lease: a brief outage must not cost healthy jobs their leases.
          nextDelayMs = Math.max(10, Math.min(this.intervalMs, Math.floor(this.leaseMs / 10)));
          // Part of the batch answered (a sharded store with one shard down): those answers count.
          if (error instanceof PartialBatchError)
            this.apply(chunk, error.results as (Date | null | undefined)[], sentAt);
          this.expireUnconfirmed();
          continue;
        }
        this.apply(chunk, results, sentAt);
      }
    } catch (error) {
      this.events.onError(error);
    } finally {
      this.schedule(nextDelayMs);
    }
  }

  /** Applies heartbeat answers; `undefined` (its database did not answer) leaves the entry unconfirmed. */
  private apply(chunk: readonly HeldLease[], results: readonly (Date | null | undefined)[], sentAt: number): void {
    chunk.forEach((entry, index) => {
      // The job may have finished while the heartbeat was in flight; it is no longer ours to judge.
      if (!entry.held) return;
      const result = results[index];
      if (result === undefined) return;
      if (result) {
        entry.confirmedUntil = sentAt + this.leaseMs;
      } else {
        this.unlink(entry);
        this.events.onLost(entry, 'heartbeat_refused');
      }
    });
  }

  private expireUnconfirmed(): void {
    const now = this.clock.monotonic();
    // Over a copy: a report may end other leases, which must neither cut the walk short nor be reported.
    for (const entry of this.held.toArray()) {
      if (entry.confirmedUntil > now) continue;
      if (!entry.held) continue;
      this.unlink(entry);
      this.events.onLost(entry, 'lease_unconfirmed');
    }
  }

  /** Takes a held lease off the list; it is no longer held. */
  private unlink(entry: HeldLease): void {
    this.held.remove(entry);
    entry.held = false;
  }
}
