/**
 * Wakes this process's subscribers when another process submits to the same SQLite file.
 *
 * SQLite has no NOTIFY, so a worker in one process used to find another process's submits only by
 * its claim poll (50 ms by default: about 26 ms of start latency at the median). While anyone is
 * subscribed, this watcher reads `PRAGMA data_version` every {@link FOREIGN_SUBMIT_WATCH_MS}: a
 * read of the connection's shared-memory header that changes only when another connection
 * commits, costing about a microsecond when nothing changed. Only then does it read the jobs id
 * sequence (AUTOINCREMENT's high-water mark, moved by inserts and never by updates or deletes),
 * so other processes' completions, heartbeats and claims wake nobody; and only when that moved
 * does it read the earliest run time of each queue and kind among the new pending rows, one rowid
 * range, and hand on the wake-ups they make (wakeUpsFor: named, as PostgreSQL's NOTIFY, so the
 * workers of other kinds and queues sleep on; decision 0025).
 *
 * A hint, as the Store contract says: a watcher that misses a change (a tick that fails) costs
 * latency, never a job, because workers still poll. Other processes' retries, releases and dead
 * letters sent back keep their ids, so they move no sequence and are still found by polling.
 */
import type Database from 'better-sqlite3';
import type { WakeUp } from '../store.js';
import { type WakeUpGroup, wakeUpsFor } from '../wake-up.js';

/** How often a store with subscribers looks for other processes' commits. */
export const FOREIGN_SUBMIT_WATCH_MS = 5;

/** Reads the file's change counters; the statements live beside the other job statements. */
export interface ForeignSubmitReads {
  /** The jobs id sequence's high-water mark (0 before the first insert). */
  idHighWater(): number;
  /** The earliest run_at (epoch ms) of each queue and kind among pending jobs with after < id <= upto. */
  pendingGroupsBetween(after: number, upto: number): WakeUpGroup[];
}

/** Polls for other connections' commits while started; see the file header. */
export class ForeignSubmitWatcher {
  private timer: NodeJS.Timeout | undefined;
  private seenDataVersion = 0;
  private seenHighWater = 0;
  private readonly dataVersion: Database.Statement<[], number>;

  constructor(
    db: Database.Database,
    private readonly reads: ForeignSubmitReads,
    /** Told the wake-ups of the jobs other processes inserted since the last look. */
    private readonly onSubmitted: (wakeUps: WakeUp[]) => void,
  ) {
    this.dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck();
  }

  /** Starts looking every FOREIGN_SUBMIT_WATCH_MS, from what the file holds now. */
  start(): void {
    if (this.timer) return;
    this.mark();
    this.timer = setInterval(() => this.look(), FOREIGN_SUBMIT_WATCH_MS);
    // Watching never keeps a process alive on its own: an idle worker's own timers do that.
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Takes what the file holds now as seen: later looks report only what comes after. */
  mark(): void {
    this.seenDataVersion = this.dataVersion.get() as number;
    this.seenHighWater = this.reads.idHighWater();
  }

  /**
   * One look (the timer's tick): nothing read beyond data_version unless another connection
   * committed. Returns the wake-ups it reported, or null when it reported nothing.
   */
  look(): WakeUp[] | null {
    try {
      const version = this.dataVersion.get() as number;
      if (version === this.seenDataVersion) return null;
      this.seenDataVersion = version;
      const highWater = this.reads.idHighWater();
      if (highWater === this.seenHighWater) return null;
      const wakeUps = wakeUpsFor(this.reads.pendingGroupsBetween(this.seenHighWater, highWater));
      this.seenHighWater = highWater;
      if (wakeUps.length === 0) return null;
      this.onSubmitted(wakeUps);
      return wakeUps;
    } catch {
      // A hint is best-effort by contract: the workers' polls still find every job.
      return null;
    }
  }
}
