/**
 * What a handler is given and what it promises. A handler returns to complete its job and throws
 * to fail it; it must stop when `ctx.signal` aborts, since from then on nothing it returns is
 * written (another worker may already own the job). Delivery is at-least-once: key side effects on
 * `ctx.jobId` (or check `ctx.token`) so a second run is harmless.
 */
import { DocketError } from '../job/errors.js';
import type { JsonValue } from '../job/job.js';
import type { Logger } from './logger.js';

/** Everything a handler knows about the attempt it is running. */
export interface JobContext {
  jobId: string;
  kind: string;
  queue: string;
  /** This attempt's number, 1-based (attempts are counted at claim). */
  attempt: number;
  maxAttempts: number;
  /** The fencing token of this claim; a newer claim of the same job carries a larger one. */
  token: number;
  /** The instant the job became due (by the database clock). */
  runAt: Date;
  /** Aborts when the lease is lost, the job is cancelled, its timeout passes or the worker shuts down. */
  signal: AbortSignal;
  /** The worker's logger with jobId, kind and attempt attached. */
  logger: Logger;
  /**
   * Completes this job inside your own open transaction (PostgreSQL: the `pg` client you ran
   * BEGIN on), fenced by this attempt's token, so your writes and the completion commit or roll
   * back together. Call it last in the transaction, then COMMIT; the worker then writes no
   * completion of its own. Throws {@link StaleLeaseError} when the token is no longer current
   * (the job was taken over, cancelled or already completed): let it roll your transaction back.
   * If you roll back or the COMMIT fails, the job is not done and runs again (at-least-once).
   * Throws ConfigurationError on a store without `capabilities.callerTransactions` (SQLite).
   */
  completeInTransaction(transaction: unknown): Promise<void>;
}

/** A function that runs jobs of one kind; `P` is the payload type the submitter promised. */
export type JobHandler<P = JsonValue> = (payload: P, ctx: JobContext) => unknown;

/** Why a handler's signal aborted; `signal.reason` is a {@link JobAbortError} carrying it. */
export type AbortReason = 'lease_lost' | 'timeout' | 'shutdown';

/**
 * Thrown by {@link JobContext.completeInTransaction} when this attempt's lease is no longer the
 * job's current one: roll the transaction back, since another attempt owns (or finished) the job.
 */
export class StaleLeaseError extends DocketError {
  readonly jobId: string;
  readonly token: number;

  constructor(jobId: string, token: number, message: string) {
    super('stale_lease', `job ${jobId} (token ${token}): ${message}`);
    this.jobId = jobId;
    this.token = token;
  }
}

/** The reason given to a handler's AbortSignal (code `job_aborted`); `reason` says why it was cut off. */
export class JobAbortError extends DocketError {
  readonly reason: AbortReason;

  constructor(reason: AbortReason, message: string) {
    super('job_aborted', message);
    this.reason = reason;
  }
}
