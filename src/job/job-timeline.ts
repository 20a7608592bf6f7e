/**
 * A job's history as the job page shows it: one entry per attempt (each recorded error, then the
 * current attempt) and the same facts as a timeline of events. Pure: derived from the stored
 * record alone (its errors carry each attempt's claim start and owner, the row its latest claim).
 */
import type { AttemptError, Job } from './job.js';

/** How an attempt ended, or `running` for the one in progress. */
export type AttemptOutcome = 'failed' | 'lease_expired' | 'timeout' | 'running' | 'done' | 'cancelled' | 'dead';

/** One attempt (one claim) of a job. */
export interface JobAttempt {
  attempt: number;
  /** When its claim started; null for attempts recorded before claim starts were stored. */
  startedAt: Date | null;
  /** When it ended; null while it runs. */
  endedAt: Date | null;
  outcome: AttemptOutcome;
  error: Pick<AttemptError, 'message' | 'kind' | 'detail'> | null;
  /** The claim's lease owner, when known. */
  owner: string | null;
}

/** One event of a job's timeline. */
export interface TimelineEvent {
  at: Date;
  event: 'created' | 'claimed' | 'failed' | 'lease_expired' | 'timeout' | 'done' | 'cancelled' | 'dead';
  attempt: number | null;
  detail: string | null;
}

function errorOutcome(error: AttemptError): AttemptOutcome {
  return error.kind === 'thrown' ? 'failed' : error.kind;
}

/**
 * The attempts of `job`, oldest first: one per recorded error, then the latest claim unless an
 * error already ended it (a retried or parked job's last attempt is its last error).
 */
export function jobAttempts(job: Job): JobAttempt[] {
  const attempts: JobAttempt[] = job.errors.map((error) => ({
    attempt: error.attempt,
    startedAt: error.startedAt ?? null,
    endedAt: error.at,
    outcome: errorOutcome(error),
    error: {
      message: error.message,
      kind: error.kind,
      ...(error.detail === undefined ? {} : { detail: error.detail }),
    },
    owner: error.owner ?? null,
  }));
  const lastError = job.errors.at(-1);
  // The latest claim is an attempt of its own unless it is the one the last error ended.
  const latestClaimOpen = job.attempts > 0 && (lastError === undefined || lastError.attempt < job.attempts);
  if (latestClaimOpen && (job.state === 'running' || job.state === 'done' || job.state === 'cancelled')) {
    attempts.push({
      attempt: job.attempts,
      startedAt: job.startedAt ?? null,
      endedAt: job.state === 'running' ? null : job.finishedAt,
      outcome: job.state,
      error: null,
      owner: job.leaseOwner,
    });
  }
  return attempts;
}

/** The timeline of `job`, in time order: created, each claim and how it ended, the final state. */
export function jobTimeline(job: Job): TimelineEvent[] {
  const events: TimelineEvent[] = [{ at: job.createdAt, event: 'created', attempt: null, detail: null }];
  for (const attempt of jobAttempts(job)) {
    if (attempt.startedAt !== null) {
      events.push({ at: attempt.startedAt, event: 'claimed', attempt: attempt.attempt, detail: attempt.owner });
    }
    if (attempt.endedAt !== null && attempt.outcome !== 'running') {
      events.push({
        at: attempt.endedAt,
        event: attempt.outcome,
        attempt: attempt.attempt,
        detail: attempt.error?.message ?? null,
      });
    }
  }
  if (job.state === 'dead' && job.finishedAt !== null) {
    events.push({ at: job.finishedAt, event: 'dead', attempt: null, detail: null });
  }
  return events.sort((a, b) => a.at.getTime() - b.at.getTime());
}
