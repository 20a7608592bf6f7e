/**
 * The timer loop behind a worker's periodic sweeps (the schedule repair, the unhandled-job park):
 * one round at a time, the next armed only once the previous one settled, so a slow store never
 * piles rounds up. A round's error is reported and the next round tries again. Timers are
 * unref'd: a sweep alone never keeps a process alive; the claim loop's timers do that.
 */
import type { Clock, ClockTimer } from '../clock/clock.js';

/** When a {@link PeriodicSweep} runs its rounds, and whom it tells of a failed one. */
export interface PeriodicSweepTiming {
  /** Delay before the first round, asked once per start. */
  firstDelayMs(): number;
  /** Delay before each later round, asked when the previous round has settled. */
  nextDelayMs(): number;
  /** Told of a round that threw or rejected. */
  onError(error: unknown): void;
  clock: Clock;
}

/** A sweep run on a timer from {@link start} until {@link stop}; a subclass says what one round does. */
export abstract class PeriodicSweep {
  private timer: ClockTimer | undefined;
  private sweeping: Promise<void> | undefined;
  private running = false;

  constructor(private readonly timing: PeriodicSweepTiming) {}

  /** One round now; what it resolves to is the subclass's to report (the timer ignores it). */
  abstract sweep(): Promise<unknown>;

  /** Arms the first round; does nothing while already running. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.arm(this.timing.firstDelayMs());
  }

  /** Cancels the next round and waits for a round in progress. */
  async stop(): Promise<void> {
    this.running = false;
    this.timing.clock.clearTimeout(this.timer);
    this.timer = undefined;
    await this.sweeping;
  }

  private arm(delayMs: number): void {
    this.timer = this.timing.clock.setTimeout(() => {
      this.timer = undefined;
      this.sweeping = this.sweep()
        .then(() => undefined)
        .catch((error: unknown) => this.timing.onError(error))
        .finally(() => {
          this.sweeping = undefined;
          if (this.running) this.arm(this.timing.nextDelayMs());
        });
    }, delayMs);
    this.timer.unref();
  }
}
