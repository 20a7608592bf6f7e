/**
 * Clocks. Only the database clock decides whether a job is due or a lease is live; the stores
 * read it inside their SQL. The worker-side clock only paces timers (when to poll, when to
 * heartbeat, when a job's timeout fires) and measures durations, where a skewed clock costs
 * latency, never correctness. The worker and its parts take a {@link Clock} (default
 * {@link systemClock}) so a test can pin time with a {@link ManualClock}.
 */

/** A pending timer; only its clock can clear it. `unref` lets the process exit while it waits. */
export interface ClockTimer {
  unref(): unknown;
}

/** A source of the current instant and of timers. */
export interface Clock {
  /** Wall-clock time, epoch milliseconds (compared with database instants). */
  now(): number;
  /** Monotonic milliseconds from an arbitrary origin: durations and local deadlines, never compared across processes. */
  monotonic(): number;
  /** Calls `callback` once, after at least `delayMs`. */
  setTimeout(callback: () => void, delayMs: number): ClockTimer;
  /** Cancels a timer of this clock; undefined or an already fired timer is ignored. */
  clearTimeout(timer: ClockTimer | undefined): void;
}

/** Resolves after `delayMs` on `clock`'s timers. */
export function sleep(clock: Clock, delayMs: number): Promise<void> {
  return new Promise((resolve) => clock.setTimeout(resolve, delayMs));
}

/** The process's clocks: `Date.now()`, `performance.now()` and Node's timers. */
export const systemClock: Clock = Object.freeze({
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout: (callback: () => void, delayMs: number): ClockTimer => setTimeout(callback, delayMs),
  clearTimeout: (timer: ClockTimer | undefined): void => {
    if (timer !== undefined) clearTimeout(timer as NodeJS.Timeout);
  },
});

interface ManualTimer extends ClockTimer {
  dueAt: number;
  seq: number;
  callback: () => void;
}

/**
 * A clock that moves only when told to; for tests and the simulator. Its timers fire inside
 * {@link ManualClock.advance} / {@link ManualClock.set}, in due order (ties in creation order),
 * each seeing the clock at its own due instant. `monotonic()` counts from 0 at construction.
 */
export class ManualClock implements Clock {
  private current: number;
  private readonly origin: number;
  private readonly timers = new Set<ManualTimer>();
  private seq = 0;

  constructor(startMs = 0) {
    this.current = startMs;
    this.origin = startMs;
  }

  now(): number {
    return this.current;
  }

  monotonic(): number {
    return this.current - this.origin;
  }

  setTimeout(callback: () => void, delayMs: number): ClockTimer {
    const timer: ManualTimer = {
      dueAt: this.current + Math.max(0, delayMs),
      seq: this.seq++,
      callback,
      unref: () => timer,
    };
    this.timers.add(timer);
    return timer;
  }

  clearTimeout(timer: ClockTimer | undefined): void {
    if (timer !== undefined) this.timers.delete(timer as ManualTimer);
  }

  /** Timers set and not yet fired or cleared. */
  get pendingTimers(): number {
    return this.timers.size;
  }

  /** Moves time forward by `ms` (never backward), firing every timer that falls due on the way. */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`ManualClock.advance: ms must be >= 0, got ${ms}`);
    this.runUntil(this.current + ms);
  }

  /** Jumps to an absolute instant; timers fire only when moving forward. */
  set(ms: number): void {
    if (ms <= this.current) {
      this.current = ms;
      return;
    }
    this.runUntil(ms);
  }

  private runUntil(target: number): void {
    for (;;) {
      let next: ManualTimer | undefined;
      for (const timer of this.timers) {
        if (
          timer.dueAt <= target &&
          (!next || timer.dueAt < next.dueAt || (timer.dueAt === next.dueAt && timer.seq < next.seq))
        ) {
          next = timer;
        }
      }
      if (!next) break;
      this.timers.delete(next);
      this.current = Math.max(this.current, next.dueAt);
      next.callback();
    }
    this.current = target;
  }
}
