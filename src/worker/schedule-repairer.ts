/**
 * The periodic sweep that keeps every recurring schedule's chain of runs intact.
 *
 * Normally a claim inserts a schedule's next run in its own transaction, so nothing here is
 * needed. The chain breaks only when the latest planned run ends without being claimed: an
 * operator cancelled it, or it was claimed while its schedule could not plan. `scheduleRepair`
 * finds such schedules (one indexed probe each) and plans them again, applying their misfire
 * policy to the slots missed since; it is cheap when nothing is broken, and safe to run from
 * every worker at once (one job per slot is a unique key; PostgreSQL skips schedules another
 * worker is repairing).
 *
 * Timers: the first sweep comes soon after start (so a chain broken while no worker ran is mended
 * promptly), then one every {@link SCHEDULE_REPAIR_INTERVAL_MS}, spread by ±10 % so many workers
 * started together do not sweep in lockstep. Timers are unref'd ({@link PeriodicSweep}): repairing
 * alone never keeps a process alive.
 */
import type { Clock } from '../clock/clock.js';
import { systemClock } from '../clock/clock.js';
import type { Store } from '../store/store.js';
import type { Logger } from './logger.js';
import { PeriodicSweep } from './periodic-sweep.js';

/** Time between sweeps: a broken chain costs at most about this long of missed scheduling. */
export const SCHEDULE_REPAIR_INTERVAL_MS = 30_000;

/** Longest wait before the first sweep after start. */
const FIRST_SWEEP_MAX_DELAY_MS = 2_000;

/** What a {@link ScheduleRepairer} reports to, and how it spreads its timers. */
export interface ScheduleRepairerOptions {
  /** Uniform [0, 1): spreads sweep times across workers. */
  random: () => number;
  logger: Logger;
  onError: (error: unknown) => void;
  /** Default {@link SCHEDULE_REPAIR_INTERVAL_MS}. */
  intervalMs?: number | undefined;
  /** Paces the timer; the real clock when omitted. */
  clock?: Clock | undefined;
}

/**
 * Runs `store.scheduleRepair()` periodically while its worker runs: `start()` arms the first sweep
 * within a couple of seconds, `stop()` waits for a sweep in progress to finish.
 */
export class ScheduleRepairer extends PeriodicSweep {
  constructor(
    private readonly store: Store,
    private readonly options: ScheduleRepairerOptions,
  ) {
    const intervalMs = options.intervalMs ?? SCHEDULE_REPAIR_INTERVAL_MS;
    super({
      firstDelayMs: () => options.random() * Math.min(FIRST_SWEEP_MAX_DELAY_MS, intervalMs),
      nextDelayMs: () => intervalMs * (0.9 + 0.2 * options.random()),
      onError: (error) => options.onError(error),
      clock: options.clock ?? systemClock,
    });
  }

  /** One sweep now; resolves to how many schedules got new runs. */
  async sweep(): Promise<number> {
    const repaired = await this.store.scheduleRepair();
    if (repaired > 0) this.options.logger.info({ repaired }, 'docket: re-planned broken schedule chains');
    return repaired;
  }
}
