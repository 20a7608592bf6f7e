/**
 * A worker's upkeep loops, started and stopped together: its record in the live worker registry
 * ({@link WorkerRegistrar}), the sweep that parks jobs nobody serves ({@link UnhandledParker},
 * only with `unhandledAfterMs`) and the schedule-chain repair ({@link ScheduleRepairer}). None of
 * them claims or runs jobs; each reports errors and tries again on its next round.
 */
import type { Clock } from '../clock/clock.js';
import type { ClaimedJob } from '../job/job.js';
import type { Store, WorkerRegistration } from '../store/store.js';
import type { Logger } from './logger.js';
import { ScheduleRepairer } from './schedule-repairer.js';
import { UnhandledParker } from './unhandled-parker.js';
import { localProcessIdentity, WorkerRegistrar } from './worker-registrar.js';

/** What a worker's upkeep needs to know about it. */
export interface WorkerUpkeepOptions {
  workerId: string;
  queues: readonly string[] | undefined;
  /** The kinds it claims right now (null: catch-all); read at every registry refresh. */
  kinds(): readonly string[] | null;
  concurrency: number;
  registryTtlMs: number;
  registryRefreshMs: number;
  /** Park due jobs nobody served for longer than this; undefined: no sweep. */
  unhandledAfterMs: number | undefined;
  random: () => number;
  clock: Clock;
  logger: Logger;
  onError(error: unknown, operation: string): void;
  /** A registry write succeeded (the store answered). */
  onRegistered(): void;
  /** The sweep parked `job` for want of a handler. */
  onUnhandledParked(job: ClaimedJob, message: string): void;
}

/** Registry record, unhandled sweep and schedule repair of one worker. */
export class WorkerUpkeep {
  private readonly registrar: WorkerRegistrar;
  private readonly unhandledParker: UnhandledParker | undefined;
  private readonly repairer: ScheduleRepairer;

  constructor(store: Store, options: WorkerUpkeepOptions) {
    const { clock, onError } = options;
    this.registrar = new WorkerRegistrar(store, {
      ttlMs: options.registryTtlMs,
      refreshMs: options.registryRefreshMs,
      registration: (): WorkerRegistration => ({
        id: options.workerId,
        ...localProcessIdentity(),
        queues: options.queues ?? null,
        kinds: options.kinds(),
        excludeKinds: [],
        concurrency: options.concurrency,
      }),
      onError,
      onRegistered: options.onRegistered,
      clock,
    });
    this.unhandledParker =
      options.unhandledAfterMs === undefined
        ? undefined
        : new UnhandledParker(store, {
            unhandledAfterMs: options.unhandledAfterMs,
            owner: options.workerId,
            queues: options.queues,
            onParked: options.onUnhandledParked,
            onError: (error) => onError(error, 'parkUnhandled'),
            clock,
          });
    this.repairer = new ScheduleRepairer(store, {
      random: options.random,
      logger: options.logger,
      onError: (error) => onError(error, 'scheduleRepair'),
      clock,
    });
  }

  /** Starts the repair timer only (it runs from the moment the worker starts, before registering). */
  startRepair(): void {
    this.repairer.start();
  }

  /** Registers the worker (errors are reported, not thrown) and starts the unhandled sweep. */
  async register(): Promise<void> {
    await this.registrar.start();
    this.unhandledParker?.start();
  }

  /** Publishes the worker's record again now (its kinds grew). */
  refreshRegistration(): void {
    void this.registrar.refresh();
  }

  /** Leaves the registry, then stops the sweep and the repair, waiting for rounds in progress. */
  async stop(): Promise<void> {
    await this.registrar.stop();
    await this.unhandledParker?.stop();
    await this.repairer.stop();
  }
}
