/**
 * The demo's record of what happened: every worker event (from this process and from the child
 * processes) is printed as it arrives, with its time relative to the start, and kept so the demo
 * can wait for the next step of the story and check the whole story at the end.
 */
import { performance } from 'node:perf_hooks';
import { DocketError } from '../../job/errors.js';

/** One thing a worker reported. */
export interface StoryEvent {
  event:
    | 'ready'
    | 'claimed'
    | 'started'
    | 'completed'
    | 'failed'
    | 'parked'
    | 'stale'
    | 'leaseLost'
    | 'error'
    | 'stopped';
  workerId: string;
  jobId?: string | undefined;
  token?: number | undefined;
  attempt?: number | undefined;
  leaseUntil?: Date | undefined;
  durationMs?: number | undefined;
  retryAt?: Date | null | undefined;
  detail?: string | undefined;
  /** Milliseconds since the demo started, when the demo heard of it. */
  atMs: number;
}

/** Raised when a step of the story did not happen in time; the demo then exits 1. */
export class StoryError extends DocketError {
  constructor(message: string) {
    super('demo_story_failed', message);
  }
}

interface Waiter {
  predicate: (event: StoryEvent) => boolean;
  resolve: (event: StoryEvent) => void;
}

/** Prints the timeline and lets the demo wait for events. */
export class DemoTimeline {
  private readonly startedAt = performance.now();
  /** Wall-clock start, to place database timestamps (lease ends, error times) on the timeline. */
  readonly startedAtEpochMs = Date.now();
  private readonly events: StoryEvent[] = [];
  private readonly waiters = new Set<Waiter>();
  private readonly kinds = new Map<string, string>();

  constructor(
    private readonly write: (line: string) => void,
    private readonly maxAttempts: number,
  ) {}

  /** Milliseconds since the demo started. */
  elapsedMs(): number {
    return performance.now() - this.startedAt;
  }

  /** A database or wall-clock instant as `+12.34s` on the timeline. */
  at(instant: Date): string {
    return formatOffset(instant.getTime() - this.startedAtEpochMs);
  }

  /** Remembers a job's kind for later lines. */
  nameJob(jobId: string, kind: string): void {
    this.kinds.set(jobId, kind);
  }

  /** Prints one timeline line: time, a short tag, the text. */
  line(tag: string, text: string): void {
    this.write(`${formatOffset(this.elapsedMs()).padStart(8)}  ${tag.padEnd(10)} ${text}`);
  }

  /** Prints a plain line (headers, notes). */
  note(text = ''): void {
    this.write(text);
  }

  /** Records a worker event, prints it, and wakes whoever waits for it. */
  record(event: Omit<StoryEvent, 'atMs'>): void {
    const full: StoryEvent = { ...event, atMs: this.elapsedMs() };
    this.events.push(full);
    this.print(full);
    for (const waiter of [...this.waiters]) {
      if (waiter.predicate(full)) {
        this.waiters.delete(waiter);
        waiter.resolve(full);
      }
    }
  }

  /** Every event recorded so far that matches. */
  all(predicate: (event: StoryEvent) => boolean): StoryEvent[] {
    return this.events.filter(predicate);
  }

  /** The first event (already recorded or still to come) that matches, or a StoryError after timeoutMs. */
  waitFor(what: string, predicate: (event: StoryEvent) => boolean, timeoutMs: number): Promise<StoryEvent> {
    const seen = this.events.find(predicate);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        predicate,
        resolve: (event) => {
          clearTimeout(timer);
          resolve(event);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new StoryError(`${what} did not happen within ${(timeoutMs / 1000).toFixed(1)} s`));
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  private job(jobId: string | undefined): string {
    const kind = jobId ? this.kinds.get(jobId) : undefined;
    return `job ${jobId ?? '?'}${kind ? ` (${kind})` : ''}`;
  }

  private print(event: StoryEvent): void {
    const who = event.workerId;
    switch (event.event) {
      case 'ready':
        this.line('ready', `${who} is polling`);
        return;
      case 'claimed':
        this.line(
          'claim',
          `${this.job(event.jobId)} by ${who}: token ${event.token}, attempt ${event.attempt}/${this.maxAttempts}, lease until ${event.leaseUntil ? this.at(event.leaseUntil) : '?'}`,
        );
        return;
      case 'started':
        return;
      case 'completed':
        this.line(
          'done',
          `${this.job(event.jobId)} by ${who} with token ${event.token} (handler ran ${formatSeconds(event.durationMs ?? 0)})`,
        );
        return;
      case 'failed': {
        const retry =
          event.retryAt instanceof Date
            ? `retry at ${this.at(event.retryAt)} (in ${formatSeconds(event.retryAt.getTime() - this.startedAtEpochMs - this.elapsedMs())})`
            : 'no attempts left';
        this.line(
          'fail',
          `${this.job(event.jobId)} attempt ${event.attempt}/${this.maxAttempts} threw "${event.detail}"; ${retry}`,
        );
        return;
      }
      case 'parked':
        this.line('park', `${this.job(event.jobId)} moved to the dead-letter table after ${event.attempt} attempts`);
        return;
      case 'stale':
        this.line(
          'refused',
          `${this.job(event.jobId)}: ${who}'s ${event.detail} with token ${event.token} came back stale; nothing written`,
        );
        return;
      case 'leaseLost':
        this.line(
          'lease lost',
          `${this.job(event.jobId)}: ${who} lost its lease on token ${event.token} (${event.detail}); its handler is aborted and anything it returns is discarded`,
        );
        return;
      case 'error':
        this.line('error', `${who}: ${event.detail}`);
        return;
      case 'stopped':
        this.line('stopped', `${who} stopped gracefully`);
        return;
    }
  }
}

/** `+12.34s`. */
export function formatOffset(ms: number): string {
  return `${ms < 0 ? '-' : '+'}${(Math.abs(ms) / 1000).toFixed(2)}s`;
}

/** `1.50 s`. */
export function formatSeconds(ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`;
}
