/**
 * Clocks. Only the database clock decides whether a job is due or a lease is live; the stores
 * read it inside their SQL. This worker-side clock only paces timers (when to poll, when to
 * heartbeat), where a skewed clock costs latency, never correctness.
 */

/** A source of the current instant, in epoch milliseconds. */
export interface Clock {
  now(): number;
}

/** The process's wall clock. */
export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told to; for tests and the simulator. */
export class ManualClock implements Clock {
  private current: number;

  constructor(startMs = 0) {
    this.current = startMs;
  }

  now(): number {
    return this.current;
  }

  /** Moves time forward by `ms` (never backward). */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`ManualClock.advance: ms must be >= 0, got ${ms}`);
    this.current += ms;
  }

  /** Jumps to an absolute instant. */
  set(ms: number): void {
    this.current = ms;
  }
}
