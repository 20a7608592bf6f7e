/**
 * Heartbeats over a store's partitions (a sharded store's shards): one {@link LeaseRenewer} per
 * partition, each with its own timer and heartbeat in flight. A heartbeat hung on one partition
 * (its database frozen, a half-open connection) then leaves every other partition's leases
 * confirmed on time; one batch over all of them would confirm nothing until the slowest answered,
 * and after `leaseMs` the worker would presume the healthy partitions' leases lost too.
 */
import type { Clock } from '../clock/clock.js';
import type { JobLease, StorePartitions } from '../store/store.js';
import { HeldLease, LeaseRenewer, type LeaseRenewerEvents } from './lease-renewer.js';

/** One lease renewer per partition, a lease routed to its job's partition. */
export class PartitionedRenewer {
  private readonly renewers: LeaseRenewer[];

  constructor(
    private readonly partitions: StorePartitions,
    leaseMs: number,
    intervalMs: number,
    events: LeaseRenewerEvents,
    clock: Clock,
  ) {
    this.renewers = partitions.parts.map((part) => new LeaseRenewer(part, leaseMs, intervalMs, events, clock));
  }

  /** Starts beating on every partition. */
  start(): void {
    for (const renewer of this.renewers) renewer.start();
  }

  /** Stops every partition's heartbeats (see {@link LeaseRenewer.stop}). */
  async stop(): Promise<void> {
    await Promise.all(this.renewers.map((renewer) => renewer.stop()));
  }

  /** Starts renewing a lease on its job's partition and returns it as held (see {@link LeaseRenewer.add}). */
  add(lease: JobLease, confirmedAt: number): HeldLease {
    return (this.renewers[this.partitions.partOfId(lease.id)] ?? this.renewers[0]!).add(lease, confirmedAt);
  }

  /** Stops renewing a lease {@link add} returned; any other is ignored. */
  remove(lease: JobLease): void {
    if (lease instanceof HeldLease) lease.renewer.remove(lease);
  }

  /** Whether a lease {@link add} returned is still held and renewed. */
  holds(lease: JobLease): boolean {
    return lease instanceof HeldLease && lease.renewer.holds(lease);
  }

  /** Fault injection for tests: pauses (or resumes) every partition's heartbeats. */
  setPaused(paused: boolean): void {
    for (const renewer of this.renewers) renewer.setPaused(paused);
  }
}
