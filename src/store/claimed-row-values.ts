/**
 * The values a claim's rows repeat, read once per run of equal values, on both stores.
 *
 * Nearly every job of a queue carries the same retry policy (the default, or its kind's), every
 * row of one claim the same lease end and start (the claim sets them alike), and the jobs of one
 * batch submit the same creation and run time. Reading each run of equal values once, instead of
 * once per row, spares the worker's hottest loop a JSON.parse or a Date per claimed job, and the
 * young-generation collector the copying of them while the job waits in the buffer: sharing the
 * instants cut a 100,000-job drain's worker CPU by 13 % on PostgreSQL and 9 % on SQLite, and its
 * garbage collection by 19 % and 31 % (docs/benchmarks.md, issue 17). The rows of a run share one
 * object, so it is read-only: policies are frozen and instants are {@link ReadonlyDate}s, so no
 * job can change another's backoff or run time through them (the submit side's
 * DEFAULT_RETRY_POLICY is frozen too).
 */
import type { RetryPolicy } from '../job/job.js';
import { ReadonlyDate } from '../job/readonly-date.js';

/** A claimed job's instants that {@link ClaimedRowValues.instant} shares between rows, one run each. */
export type ClaimedInstant = 'runAt' | 'leaseUntil' | 'createdAt' | 'startedAt' | 'scheduleSlot';

/** The last value read for one instant column, and its Date. */
interface InstantRun {
  value: string | number | undefined;
  date: ReadonlyDate | undefined;
}

/** Reads the repeated values of one claim's rows, in row order; make one per claim. */
export class ClaimedRowValues {
  /** The last value sent for each carried column, by position in the row. */
  private readonly sent: unknown[] = [];
  private lastPolicyText: string | undefined;
  private lastPolicy: RetryPolicy | undefined;
  private readonly instants: Record<ClaimedInstant, InstantRun> = {
    runAt: { value: undefined, date: undefined },
    leaseUntil: { value: undefined, date: undefined },
    createdAt: { value: undefined, date: undefined },
    startedAt: { value: undefined, date: undefined },
    scheduleSlot: { value: undefined, date: undefined },
  };

  /**
   * The value at `index` of a row whose claim sends a column once per run (PostgreSQL's
   * CLAIM_CARRIED_COLUMNS, postgres/sql-fragments.ts): NULL there means the row before's value.
   * Only for columns that are never NULL in a claimed row; null if no row has sent one yet.
   */
  carried(row: readonly unknown[], index: number): unknown {
    const value = row[index];
    if (value === null) return this.sent[index] ?? null;
    this.sent[index] = value;
    return value;
  }

  /** The policy stored as `text` (JSON), shared with the previous row's when the texts are equal. */
  policy(text: string): RetryPolicy {
    if (text !== this.lastPolicyText || this.lastPolicy === undefined) {
      this.lastPolicy = Object.freeze(JSON.parse(text) as RetryPolicy);
      this.lastPolicyText = text;
    }
    return this.lastPolicy;
  }

  /**
   * The instant `column` holds as epoch milliseconds (a number, or its decimal text as
   * PostgreSQL's claim answers it), shared with the previous row's when the values are equal.
   */
  instant(column: ClaimedInstant, epochMs: string | number): ReadonlyDate {
    const run = this.instants[column];
    if (epochMs !== run.value || run.date === undefined) {
      run.date = new ReadonlyDate(Number(epochMs));
      run.value = epochMs;
    }
    return run.date;
  }
}
