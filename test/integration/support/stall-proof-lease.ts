/**
 * Worker options for tests that count runs, attempts, tokens, errors, stale writes or log lines
 * but are not about leases. Their short test leases (600 ms - 2 s) keep the lease tests fast, but a
 * stall of a loaded CI machine (1-2 s) can outlast one: the lease lapses, the job is taken back and
 * runs again (at-least-once, as designed), and the counts those tests check change.
 */
import type { WorkerOptions } from '../../../src/index.js';

/** `options` with a lease no stall outlasts (10 s), heartbeats at a tenth of it. */
export function withStallProofLease(options: WorkerOptions): WorkerOptions {
  return { ...options, leaseMs: 10_000, heartbeatIntervalMs: 1000 };
}
