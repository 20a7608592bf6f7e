/**
 * What a worker tells the world: its counters, log lines and events, kept apart from the logic
 * that decides them. Every failed attempt, park, lost lease and stale write is logged (warn, or
 * error for a park), as are the store connection's loss and recovery as the worker sees them.
 */
import type { Clock } from '../clock/clock.js';
import type { AttemptError, ClaimedJob } from '../job/job.js';
import type { DocketEvents, ParkedJob, StaleEvent } from './docket-events.js';
import type { LeaseLossReason } from './lease-renewer.js';
import type { Logger } from './logger.js';
import { errorFields, silentLogger } from './logger.js';

/** Counters since the worker was created. */
export interface WorkerStats {
  claimed: number;
  completed: number;
  /** Failed attempts recorded (retried or parked; a snooze is one too). */
  failed: number;
  parked: number;
  /** Fenced writes the store refused (heartbeat, complete, fail, release). */
  stale: number;
  leaseLost: number;
  timedOut: number;
  /** Leases given back on shutdown. */
  released: number;
  /** Handler results dropped because the lease was lost, the job timed out or shutdown aborted it. */
  discarded: number;
  errors: number;
}

/** The fields every job log line carries. */
export function jobFields(job: ClaimedJob): Record<string, unknown> {
  return { jobId: job.id, kind: job.kind, queue: job.queue, attempt: job.attempts, token: job.token };
}

/** Error-event operations that are not a store round trip: they say nothing about the connection. */
const NON_STORE_OPERATIONS = new Set(['internal', 'dispatch']);

/**
 * After a logged recovery, store failures within this long are calls sent before it (stuck in the
 * outage, answered only now), not a new outage: they are logged at debug and do not log the
 * connection as lost again. Measured after a healed partition: such stragglers fail 25-330 ms
 * after the first success. A real new outage keeps failing and is logged once this has passed.
 */
export const RECOVERY_SETTLE_MS = 1000;

/** Counts, logs and emits on behalf of one worker. */
export class WorkerReporter {
  /** Mutable counters; the worker's `stats` hands out copies. */
  readonly counters: WorkerStats = {
    claimed: 0,
    completed: 0,
    failed: 0,
    parked: 0,
    stale: 0,
    leaseLost: 0,
    timedOut: 0,
    released: 0,
    discarded: 0,
    errors: 0,
  };
  /** Whether the last store round trip this worker saw succeeded; flips are logged once each way. */
  private storeReachable = true;
  private storeLostAt = 0;
  /** When the last recovery was logged (monotonic ms); -Infinity before any. */
  private recoveredAt = Number.NEGATIVE_INFINITY;
  /** Operations whose failure was logged during the current outage: their retries log at debug. */
  private readonly failedDuringOutage = new Set<string>();

  constructor(
    private readonly workerId: string,
    private readonly logger: Logger,
    private readonly events: DocketEvents,
    private readonly clock: Clock,
  ) {}

  /** Counts an accepted completion and tells listeners how long the handler ran. */
  completed(job: ClaimedJob, durationMs: number): void {
    this.counters.completed += 1;
    if (this.events.has('completed')) this.events.emit('completed', { job, workerId: this.workerId, durationMs });
  }

  /** Counts, logs and announces a recorded failed attempt (retried at `retryAt`, or parked when null). */
  failed(
    job: ClaimedJob,
    error: Pick<AttemptError, 'message' | 'kind' | 'detail'>,
    durationMs: number,
    retryAt: Date | null,
  ): void {
    this.counters.failed += 1;
    // A downstream outage fails every job: no fields are built for a logger that drops them.
    if (this.logger !== silentLogger)
      this.logger.warn(
        {
          ...jobFields(job),
          maxAttempts: job.maxAttempts,
          error: error.message,
          errorKind: error.kind,
          durationMs: Math.round(durationMs),
          retryAt: retryAt?.toISOString() ?? null,
        },
        retryAt ? 'docket: attempt failed; retrying' : 'docket: attempt failed; no retry left',
      );
    this.events.emit('failed', { job, workerId: this.workerId, error, durationMs, retryAt });
  }

  /** Counts, logs and announces a job parked after its failed attempt. */
  parked(job: ClaimedJob, error: Pick<AttemptError, 'message' | 'kind' | 'detail'>): void {
    this.counters.parked += 1;
    this.logger.error(
      { ...jobFields(job), maxAttempts: job.maxAttempts, error: error.message, errorKind: error.kind },
      'docket: job parked in the dead-letter table (docket dead list / retryDeadLetter)',
    );
    // The event carries the job as it now is: parked, no longer running under a lease.
    const parked: ParkedJob = { ...job, state: 'dead', leaseUntil: null };
    this.events.emit('parked', { job: parked, workerId: this.workerId, error });
  }

  /** Counts, logs and announces a job the unhandled sweep parked (its handler was never run). */
  unhandledParked(job: ClaimedJob, message: string, unhandledAfterMs: number | undefined): void {
    this.counters.parked += 1;
    this.logger.error({ ...jobFields(job), unhandledAfterMs }, `docket: ${message}`);
    const parked: ParkedJob = { ...job, state: 'dead', leaseUntil: null };
    this.events.emit('parked', {
      job: parked,
      workerId: this.workerId,
      error: { kind: 'thrown', message, detail: undefined },
    });
  }

  /** Counts, logs and announces a lost lease (the job was running or prefetched here). */
  leaseLost(job: ClaimedJob | undefined, reason: LeaseLossReason): void {
    this.counters.leaseLost += 1;
    if (!job) return;
    if (reason === 'heartbeat_refused') this.stale(job, 'heartbeat');
    this.logger.warn(
      { ...jobFields(job), reason },
      reason === 'heartbeat_refused'
        ? 'docket: lease lost: the database refused the heartbeat (the lease lapsed, was taken over or the job was cancelled); the handler is aborted'
        : 'docket: lease lost: no heartbeat reached the database before the lease would lapse; the handler is aborted',
    );
    this.events.emit('leaseLost', { job, workerId: this.workerId, reason });
  }

  /** Counts, logs and announces a fenced write the store refused: the lease had passed on. */
  stale(job: ClaimedJob, operation: StaleEvent['operation']): void {
    this.counters.stale += 1;
    this.logger.warn(
      { ...jobFields(job), operation },
      `docket: stale ${operation} refused: this worker no longer holds the job's lease (taken over, cancelled or finished); nothing was written`,
    );
    this.events.emit('stale', { job, workerId: this.workerId, operation });
  }

  /** Counts, logs and emits an error; a store operation's first error also logs the connection as lost. */
  error(error: unknown, operation: string): void {
    this.counters.errors += 1;
    const storeOperation = !NON_STORE_OPERATIONS.has(operation);
    if (storeOperation && this.storeReachable && this.clock.monotonic() - this.recoveredAt < RECOVERY_SETTLE_MS) {
      this.logger.debug(
        { operation, ...errorFields(error) },
        `docket: ${operation} failed just after the store connection recovered (a call from the outage)`,
      );
      this.events.emit('error', { error, operation, workerId: this.workerId });
      return;
    }
    if (storeOperation && this.storeReachable) {
      this.storeReachable = false;
      this.storeLostAt = this.clock.monotonic();
      this.logger.warn(
        { operation, ...errorFields(error) },
        'docket: store connection lost; claims back off and outcome writes are retried while leases last',
      );
    }
    // During an outage each operation's failure is logged once; its retries (a claim every
    // second, a heartbeat every lease/10) go to debug, so an outage costs a few lines, not one
    // per retry. Counters and 'error' events still see every one.
    const repeated = storeOperation && this.failedDuringOutage.has(operation);
    if (storeOperation) this.failedDuringOutage.add(operation);
    if (repeated) this.logger.debug({ operation, ...errorFields(error) }, `docket: ${operation} failed again`);
    else this.logger.warn({ operation, ...errorFields(error) }, `docket: ${operation} failed`);
    this.events.emit('error', { error, operation, workerId: this.workerId });
  }

  /** A store round trip succeeded: logs the recovery once if the connection had been lost. */
  storeAnswered(): void {
    if (this.storeReachable) return;
    this.storeReachable = true;
    this.recoveredAt = this.clock.monotonic();
    this.failedDuringOutage.clear();
    this.logger.info(
      { downMs: Math.round(this.clock.monotonic() - this.storeLostAt) },
      'docket: store connection recovered',
    );
  }
}
