/**
 * The opt-in sweep behind `Docket.open({ unhandledAfterMs })`: parks due jobs that no live worker
 * has been able to run for longer than that, with a reason saying so, for users who would rather
 * see such a job in the dead-letter table than have it wait. Off by default: a job nobody handles
 * normally waits, pending and counted as unhandled, until a worker with its handler starts.
 *
 * How: the registry and the due counts name the (queue, kind) pairs no live worker serves
 * (`unhandledCounts`, src/routing/); for each, the pending jobs due before now - unhandledAfterMs
 * (database clock) are claimed with a filter on exactly that queue and kind, and each claimed job
 * is failed with a park decision, fenced by its token. A job the claim hands out that is not yet
 * overdue (the claim orders by priority, not age) is released at once, its attempt given back.
 * Every live worker sweeps its own queues; the claim is what keeps two sweeps (or a worker that just gained the
 * handler) from acting on one job twice. Timers are unref'd.
 */
import type { Clock } from '../clock/clock.js';
import { systemClock } from '../clock/clock.js';
import type { ClaimedJob } from '../job/job.js';
import { unhandledCounts } from '../routing/routing.js';
import type { Store } from '../store/store.js';
import { leaseOf } from '../store/store-params.js';
import { PeriodicSweep } from './periodic-sweep.js';

/** Settings and callbacks for an {@link UnhandledParker}. */
export interface UnhandledParkerOptions {
  unhandledAfterMs: number;
  /** Lease owner prefix for the sweep's claims (the worker's id). */
  owner: string;
  /** The worker's queues: it sweeps only those (every queue when undefined). */
  queues: readonly string[] | undefined;
  onParked(job: ClaimedJob, message: string): void;
  onError(error: unknown): void;
  /** Paces the timer; the real clock when omitted. */
  clock?: Clock | undefined;
}

/** Most jobs parked per (queue, kind) and sweep, so one sweep stays short. */
const PARK_BATCH = 100;
/** Lease held between the sweep's claim and its park: two short round trips. */
const SWEEP_LEASE_MS = 30_000;

/** How often the sweep runs for a given `unhandledAfterMs`: a quarter of it, within [100 ms, 30 s]. */
export function unhandledSweepIntervalMs(unhandledAfterMs: number): number {
  return Math.min(30_000, Math.max(100, Math.floor(unhandledAfterMs / 4)));
}

/** The reason stored with a job parked by the sweep. */
export function unhandledParkMessage(queue: string, kind: string, unhandledAfterMs: number): string {
  return (
    `unhandled: no live worker had a handler for kind "${kind}" on queue "${queue}" for more than ` +
    `${unhandledAfterMs} ms (unhandledAfterMs), so the job was parked instead of waiting; ` +
    'retry it from the dead-letter table once a worker with its handler runs'
  );
}

/**
 * Runs the sweep periodically while its worker runs: `start()` arms the first sweep one interval
 * out, `stop()` waits for a sweep in progress.
 */
export class UnhandledParker extends PeriodicSweep {
  private sweeps = 0;

  constructor(
    private readonly store: Store,
    private readonly options: UnhandledParkerOptions,
  ) {
    const intervalMs = (): number => unhandledSweepIntervalMs(options.unhandledAfterMs);
    super({
      firstDelayMs: intervalMs,
      nextDelayMs: intervalMs,
      onError: (error) => options.onError(error),
      clock: options.clock ?? systemClock,
    });
  }

  /** One sweep now; resolves to how many jobs it parked. */
  async sweep(): Promise<number> {
    const [due, workers, now] = await Promise.all([
      this.store.jobDueCountsByKind(),
      this.store.workerList(),
      this.store.now(),
    ]);
    const cutoff = now.getTime() - this.options.unhandledAfterMs;
    let parked = 0;
    const queues = this.options.queues;
    const mine = queues === undefined ? due : due.filter((entry) => queues.includes(entry.queue));
    for (const { queue, kind } of unhandledCounts(mine, workers)) {
      const pending = await this.store.jobList({ states: ['pending'], queue, kind, limit: PARK_BATCH });
      const overdue = pending.filter((job) => job.runAt.getTime() <= cutoff).length;
      if (overdue === 0) continue;
      this.sweeps += 1;
      const claimed = await this.store.jobClaim({
        owner: `${this.options.owner}/unhandled-sweep.${this.sweeps}`,
        limit: overdue,
        leaseMs: SWEEP_LEASE_MS,
        queues: [queue],
        kinds: [kind],
      });
      const message = unhandledParkMessage(queue, kind, this.options.unhandledAfterMs);
      const overdueJobs: ClaimedJob[] = [];
      for (const job of claimed) {
        if (job.runAt.getTime() > cutoff) await this.store.jobRelease(leaseOf(job));
        else overdueJobs.push(job);
      }
      if (overdueJobs.length === 0) continue;
      // Parked in one round trip (decision 0024), each fenced by its own claim.
      const outcomes = await this.store.jobFailMany({
        failures: overdueJobs.map((job) => ({
          ...leaseOf(job),
          error: { kind: 'thrown', message, detail: undefined },
          decision: { kind: 'park' },
        })),
      });
      for (const [index, outcome] of outcomes.entries()) {
        if (outcome.outcome !== 'parked') continue;
        parked += 1;
        this.options.onParked(overdueJobs[index]!, message);
      }
    }
    return parked;
  }
}
