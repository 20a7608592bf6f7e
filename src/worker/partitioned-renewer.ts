/**
 * Heartbeats over a store's partitions (a sharded store's shards): one {@link LeaseRenewer} per
 * partition, each with its own timer and heartbeat in flight. A heartbeat hung on one partition
 * (its database frozen, a half-open connection) then leaves every other partition's leases
 * confirmed on time; one batch over all of them would confirm nothing until the slowest answered,
 * and after `leaseMs` the worker would presume the healthy partitions' leases lost too.
 */
import type { Clock } from '../clock/clock.js';
import type { JobLease, StorePartitions } from '../store/store.js';
import { LeaseRenewer, type LeaseRenewerEvents } from './lease-renewer.js';

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

  /** Starts renewing a lease on its job's partition (see {@link LeaseRenewer.add}). */
  add(lease: JobLease, confirmedAt: number, key: string = LeaseRenewer.key(lease)): void {
    this.of(lease).add(lease, confirmedAt, key);
  }

  /** Stops renewing a lease. */
  remove(lease: JobLease, key: string = LeaseRenewer.key(lease)): void {
    this.of(lease).remove(lease, key);
  }

  /** Whether the lease is still held and renewed. */
  holds(lease: JobLease, key: string = LeaseRenewer.key(lease)): boolean {
    return this.of(lease).holds(lease, key);
  }

  /** Fault injection for tests: pauses (or resumes) every partition's heartbeats. */
  setPaused(paused: boolean): void {
    for (const renewer of this.renewers) renewer.setPaused(paused);
  }

  private of(lease: JobLease): LeaseRenewer {
    return this.renewers[this.partitions.partOfId(lease.id)] ?? this.renewers[0]!;
  }
}
