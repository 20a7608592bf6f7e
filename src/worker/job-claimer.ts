/**
 * The claim loop and its wake-ups: decides when to ask the store for due jobs and how many.
 *
 * Claims name the worker's kinds (the store's KindFilter), so a job whose kind has no handler here is
 * never leased by this worker: it stays pending for one that has the handler.
 *
 * Claims are sized to free slots (concurrency plus prefetch, minus running and buffered jobs, minus
 * slots already promised to claims in flight), and up to `maxConcurrentClaims` run at once so the next batch is on its
 * way while the last one is being started. A claim runs only while jobs may be due:
 * - after a claim that filled its limit (more are probably waiting), on every freed slot;
 * - on a wake-up hint from the store (a submit, retry or release here, or NOTIFY from elsewhere)
 *   that may concern its queues and kinds (a hint naming others is ignored: store/wake-up.ts);
 * - when the timer set to the next known run time fires;
 * - on every poll (`pollIntervalMs`), which catches what hints cannot: lapsed leases of dead
 *   workers, other processes' submits on SQLite, notifications lost while LISTEN was down.
 * Lapsed leases are looked for by at most one claim per 250 ms (lapsed-search-pacer.ts); the
 * others lease due pending jobs only (their search costs a busy PostgreSQL a walk over every
 * finished job's dead index entry).
 * A claim that comes back short means nothing more is due; if the next run time is not known it is
 * re-read (`jobNextRunAt`) and a timer set to it. A hint that names a later run time only pulls
 * that timer earlier, so a job submitted later but due sooner is never missed.
 *
 * Clocks: the database decides what is due. The worker clock only paces the timer, corrected by
 * the database clock's measured offset, so a skewed worker clock costs at most a wasted claim.
 */
import { randomBytes } from 'node:crypto';
import type { Clock, ClockTimer } from '../clock/clock.js';
import { systemClock } from '../clock/clock.js';
import type { ClaimedJob } from '../job/job.js';
import type { StorePartition, WakeUp } from '../store/store.js';
import { wakeUpConcerns } from '../store/wake-up.js';
import { LapsedSearchPacer } from './lapsed-search-pacer.js';

/** Settings and callbacks for a {@link JobClaimer}. */
export interface JobClaimerOptions {
  owner: string;
  leaseMs: number;
  queues: readonly string[] | undefined;
  /**
   * The kinds to claim, read at every claim and next-run-at query (a worker's handlers may grow
   * while it runs); undefined claims every kind (a catch-all worker).
   */
  kinds(): readonly string[] | undefined;
  pollIntervalMs: number;
  claimBatchSize: number;
  maxConcurrentClaims: number;
  /**
   * Claims smaller than this wait for more room, unless handler slots would otherwise idle: with a
   * prefetch buffer, a round trip per freed slot would cost more than the buffer saves. 1 = no wait.
   */
  minClaimSize(): number;
  /** Room for new jobs right now, buffer included (before subtracting claims in flight). */
  freeSlots(): number;
  /** Handler slots with no job to run, neither running nor buffered (before claims in flight). */
  idleSlots(): number;
  /**
   * Receives every claimed job, synchronously after its claim returns (also while stopping);
   * `sentAt` is the clock's monotonic ms when the claim was sent, `limit` how many it asked for.
   */
  onClaimed(jobs: ClaimedJob[], sentAt: number, limit: number): void;
  onError(error: unknown, operation: string): void;
  /** Told after every claim the store answered (the worker logs a recovered store connection). */
  onClaimAnswered?: (() => void) | undefined;
  random: () => number;
  /** Paces poll, wake-up and backoff timers and estimates the database's now; the real clock when omitted. */
  clock?: Clock | undefined;
}

/** Largest delay setTimeout accepts. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * When the store says a job was due before the last claim went out yet that claim did not lease it
 * (another worker's claim holds it), look again this soon rather than spin. A job that fell due
 * after the claim went out is claimed at once instead: in a stream of delayed jobs the next one
 * is usually due by the time the short claim's next-run-at answer arrives, and waiting this long
 * for it made every delayed job start about 18 ms late.
 */
const RECHECK_DUE_MS = 20;
/** A hint due within this margin (plus the clock offset's error) of the estimated database now is claimed at once. */
const DUE_MARGIN_MS = 2;
/** Cap on the offset error added to that margin. */
const MAX_DUE_MARGIN_MS = 50;
/** Clock offset samples taken at start; the one with the shortest round trip is kept. */
const OFFSET_SAMPLES_AT_START = 3;
/**
 * Claim errors back off from 50 ms up to 1 s, jittered within [delay/2, delay]: a restarting
 * database sees each worker about once a second at most (a cheap refused connection), and
 * however long the outage, the first claim after the database accepts connections again comes
 * within 1 s plus a connect: the 2 s recovery bound test/stress/database-restarts.test.ts
 * measures. (The former 2 s cap with ±50 % jitter let a long outage's last wait reach 3 s.)
 */
const CLAIM_BACKOFF_BASE_MS = 50;
const CLAIM_BACKOFF_MAX_MS = 1000;
/** Re-measure the database clock offset every this many polls. */
const OFFSET_EVERY_POLLS = 30;

/** Runs claims when jobs may be due, as many as free slots allow. */
export class JobClaimer {
  private running = false;
  private reserved = 0;
  private readonly claims = new Set<Promise<void>>();
  /** Whether jobs may be due now; cleared by a claim that came back short with no hint since it started. */
  private maybeDue = true;
  /** Whether the next run time must be re-read after the next short claim. */
  private nextRunAtStale = true;
  private generation = 0;
  /** The generation the latest claim was sent at. */
  private claimGeneration = -1;
  /** Whether the last answered claim came back full: a backlog deeper than a claim is waiting. */
  private lastClaimFull = false;
  private pumpHandle: NodeJS.Immediate | undefined;
  private pollTimer: ClockTimer | undefined;
  private wakeTimer: ClockTimer | undefined;
  private wakeTimerAtMs = Number.POSITIVE_INFINITY;
  private backoffTimer: ClockTimer | undefined;
  private failures = 0;
  private nextRunAtQuery: Promise<void> | undefined;
  private unsubscribe: (() => Promise<void>) | undefined;
  private subscribing: Promise<void> | undefined;
  private offsetQuery: Promise<void> | undefined;
  /** Database clock minus worker clock, ms. */
  private offsetMs = 0;
  /** How wrong offsetMs may be: half the round trip of the sample it came from. */
  private offsetErrorMs = Number.POSITIVE_INFINITY;
  /** The smallest such error seen; later samples much worse than it are ignored. */
  private bestOffsetErrorMs = Number.POSITIVE_INFINITY;
  private polls = 0;
  /** Which claims also look for lapsed leases. */
  private readonly lapsedSearch = new LapsedSearchPacer();
  /** Numbers this worker's claims, so each records its own lease owner. */
  private claimSeq = 0;
  /**
   * Distinguishes this claimer from any other with the same worker id (a restarted process, two
   * processes given one --id), so releasing a lost claim's leases never touches another's jobs,
   * and no other claim can ever record the same owner: writes are fenced by owner as well as token,
   * which is what keeps a token number re-issued by a promoted standby from validating this
   * claim's writes. 64 random bits: a repeat is out of reach however often workers restart.
   */
  private readonly instance = randomBytes(8).toString('hex');
  /** Owners of claims whose answer was lost: they may have committed, so their leases are given back. */
  private readonly unanswered = new Set<string>();
  private releasing: Promise<void> | undefined;
  private readonly clock: Clock;

  constructor(
    private readonly store: StorePartition,
    private readonly options: JobClaimerOptions,
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /** Subscribes to wake-ups, starts polling and claims whatever is due now. */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.maybeDue = true;
    this.nextRunAtStale = true;
    this.failures = 0;
    this.lastClaimFull = false;
    await Promise.all([this.measureOffset(OFFSET_SAMPLES_AT_START), this.subscribe()]);
    this.schedulePoll();
    this.schedulePump();
  }

  /** Stops claiming, clears every timer, unsubscribes and waits for claims in flight to be handed over. */
  async stop(): Promise<void> {
    this.running = false;
    if (this.pumpHandle) clearImmediate(this.pumpHandle);
    this.clock.clearTimeout(this.pollTimer);
    this.clock.clearTimeout(this.wakeTimer);
    this.clock.clearTimeout(this.backoffTimer);
    this.pumpHandle = undefined;
    this.pollTimer = undefined;
    this.wakeTimer = undefined;
    this.wakeTimerAtMs = Number.POSITIVE_INFINITY;
    this.backoffTimer = undefined;
    await this.subscribing;
    const unsubscribe = this.unsubscribe;
    this.unsubscribe = undefined;
    if (unsubscribe) {
      try {
        await unsubscribe();
      } catch (error) {
        this.options.onError(error, 'unsubscribe');
      }
    }
    while (this.claims.size > 0 || this.nextRunAtQuery || this.offsetQuery) {
      await Promise.all([...this.claims, this.nextRunAtQuery, this.offsetQuery]);
    }
    // One last try for leases of lost claims; if the database is still away they lapse as usual.
    if (this.unanswered.size > 0 && !this.releasing) this.releaseUnanswered();
    await this.releasing;
  }

  /** A slot was freed (or a write finished): claim again if jobs may still be waiting. */
  slotFreed(): void {
    if (this.maybeDue) this.schedulePump();
  }

  /** Slots promised to this claimer's claims in flight (a worker with several claim loops shares its room by them). */
  get reservedSlots(): number {
    return this.reserved;
  }

  /** The database clock's current offset from the worker clock, ms. */
  get clockOffsetMs(): number {
    return this.offsetMs;
  }

  private estimatedDbNow(): number {
    return this.clock.now() + this.offsetMs;
  }

  private markDue(rereadNextRunAt: boolean): void {
    this.generation += 1;
    this.maybeDue = true;
    if (rereadNextRunAt) this.nextRunAtStale = true;
    this.schedulePump();
  }

  private onWakeUp(wakeUp: WakeUp): void {
    // Runs inside the submitter's call path on SQLite: keep it to a few assignments so wake-ups
    // never slow submits; the claim itself runs later, from the event loop.
    if (!this.running || !wakeUpConcerns(wakeUp, this.options.queues, this.options.kinds())) return;
    if (wakeUp.runAt === null) {
      this.markDue(true);
      return;
    }
    const runAtMs = wakeUp.runAt.getTime();
    // Within the offset's own error, "due" wins: a needless claim costs one round trip, a timer
    // set a few ms late costs every immediately-due job that much start latency.
    const marginMs = DUE_MARGIN_MS + Math.min(this.offsetErrorMs, MAX_DUE_MARGIN_MS);
    if (runAtMs <= this.estimatedDbNow() + marginMs) this.markDue(false);
    else this.armWakeTimer(runAtMs);
  }

  private schedulePump(): void {
    if (!this.running || this.pumpHandle) return;
    // setImmediate, not a microtask: handlers that finish in the same tick share one claim.
    this.pumpHandle = setImmediate(() => {
      this.pumpHandle = undefined;
      this.pump();
    });
  }

  /**
   * Starts claims while jobs may be due and room is left. With no backlog (the last claim came
   * back short), each claim answers one wake-up: a second one goes out only for a hint that came after the first was
   * sent, and the first leaves half the free slots unreserved for it. Otherwise a claim reserving
   * every free slot made the job of the next hint wait out the whole claim in flight, which found
   * nothing of it, before a claim could be sent at all: one more claim round trip, under load the
   * largest part of the enqueue-to-start p99 at 1,000 single submits/s (bench/start-latency-stages.ts).
   */
  private pump(): void {
    if (!this.running || this.backoffTimer) return;
    while (this.maybeDue && this.claims.size < this.options.maxConcurrentClaims) {
      // On a backlog every claim takes all the room it can: halving them would double the claims.
      const answering = !this.lastClaimFull;
      if (answering && this.claims.size > 0 && this.claimGeneration === this.generation) return;
      const free = this.options.freeSlots() - this.reserved;
      if (free <= 0) return;
      if (free < this.options.minClaimSize() && this.options.idleSlots() - this.reserved <= 0) return;
      const share =
        answering && this.claims.size === 0 && this.options.maxConcurrentClaims > 1 ? Math.ceil(free / 2) : free;
      this.startClaim(Math.min(share, this.options.claimBatchSize));
      if (answering) return;
    }
  }

  private startClaim(limit: number): void {
    this.reserved += limit;
    const generation = this.generation;
    this.claimGeneration = generation;
    const claim = this.claim(limit, generation).finally(() => {
      this.claims.delete(claim);
      this.schedulePump();
    });
    this.claims.add(claim);
  }

  private async claim(limit: number, generation: number): Promise<void> {
    const sentAt = this.clock.monotonic();
    const sentAtDbMs = this.estimatedDbNow();
    // Each claim records its own owner: if its answer is lost after it committed (the connection
    // dropped), the worker never learns the tokens, but can still give those leases back by owner
    // instead of leaving the jobs stranded for a lease and charged an attempt.
    this.claimSeq += 1;
    const owner = `${this.options.owner}/${this.instance}.${this.claimSeq}`;
    const includeLapsed = this.lapsedSearch.next(sentAt);
    let jobs: ClaimedJob[];
    try {
      jobs = await this.store.jobClaim({
        owner,
        limit,
        leaseMs: this.options.leaseMs,
        queues: this.options.queues,
        kinds: this.options.kinds(),
        includeLapsed,
      });
    } catch (error) {
      this.lapsedSearch.failed(sentAt);
      this.reserved -= limit;
      this.options.onError(error, 'claim');
      this.unanswered.add(owner);
      this.releaseUnanswered();
      this.backOff();
      return;
    }
    this.reserved -= limit;
    this.failures = 0;
    this.options.onClaimAnswered?.();
    this.lastClaimFull = jobs.length >= limit;
    if (this.unanswered.size > 0) this.releaseUnanswered();
    if (jobs.length >= limit) this.maybeDue = true;
    else if (this.generation === generation) this.maybeDue = false;
    try {
      this.options.onClaimed(jobs, sentAt, limit);
    } catch (error) {
      this.options.onError(error, 'dispatch');
    }
    if (jobs.length < limit && this.nextRunAtStale && this.running) this.refreshNextRunAt(sentAtDbMs);
  }

  /** Gives back the leases of claims whose answer was lost; what fails is tried again after the next claim. */
  private releaseUnanswered(): void {
    if (this.releasing) return;
    this.releasing = (async () => {
      for (const owner of [...this.unanswered]) {
        try {
          await this.store.jobReleaseByOwner({ owner });
          this.unanswered.delete(owner);
        } catch (error) {
          this.options.onError(error, 'releaseUnanswered');
          return;
        }
      }
    })().finally(() => {
      this.releasing = undefined;
    });
  }

  private backOff(): void {
    this.failures += 1;
    if (!this.running || this.backoffTimer) return;
    const base = Math.min(CLAIM_BACKOFF_MAX_MS, CLAIM_BACKOFF_BASE_MS * 2 ** (this.failures - 1));
    const delay = Math.round(base * (0.5 + this.options.random() / 2));
    this.backoffTimer = this.clock.setTimeout(() => {
      this.backoffTimer = undefined;
      this.markDue(true);
    }, delay);
  }

  /** Reads the next run time after a short claim sent at `claimSentAtDbMs` (the estimated database now). */
  private refreshNextRunAt(claimSentAtDbMs: number): void {
    if (this.nextRunAtQuery) return;
    this.nextRunAtStale = false;
    this.nextRunAtQuery = (async () => {
      try {
        const next = await this.store.jobNextRunAt({ queues: this.options.queues, kinds: this.options.kinds() });
        if (!this.running || next === null) return;
        const nextMs = next.getTime();
        const now = this.estimatedDbNow();
        if (nextMs > now) this.armWakeTimer(nextMs);
        // Due already: fell due after the claim went out, so that claim could not take it.
        else if (nextMs > claimSentAtDbMs) this.markDue(true);
        else this.armWakeTimer(now + RECHECK_DUE_MS);
      } catch (error) {
        this.nextRunAtStale = true;
        this.options.onError(error, 'nextRunAt');
      } finally {
        this.nextRunAtQuery = undefined;
      }
    })();
  }

  private armWakeTimer(atDbMs: number): void {
    if (!this.running) return;
    if (this.wakeTimer && this.wakeTimerAtMs <= atDbMs) return;
    this.clock.clearTimeout(this.wakeTimer);
    // +1 ms: timers may fire a hair early, and a claim a millisecond before run_at finds nothing.
    const delay = Math.min(MAX_TIMER_MS, Math.max(1, Math.ceil(atDbMs - this.estimatedDbNow()) + 1));
    this.wakeTimerAtMs = atDbMs;
    this.wakeTimer = this.clock.setTimeout(() => {
      this.wakeTimer = undefined;
      this.wakeTimerAtMs = Number.POSITIVE_INFINITY;
      this.markDue(true);
    }, delay);
  }

  private schedulePoll(): void {
    if (!this.running) return;
    // ±10 % so many workers started together do not poll in lockstep.
    const delay = Math.round(this.options.pollIntervalMs * (0.9 + 0.2 * this.options.random()));
    this.pollTimer = this.clock.setTimeout(() => {
      this.pollTimer = undefined;
      this.polls += 1;
      if (!this.unsubscribe) void this.subscribe();
      if (this.polls % OFFSET_EVERY_POLLS === 0) void this.measureOffset();
      this.markDue(true);
      this.schedulePoll();
    }, delay);
  }

  private subscribe(): Promise<void> {
    if (this.unsubscribe || this.subscribing) return this.subscribing ?? Promise.resolve();
    this.subscribing = (async () => {
      try {
        const unsubscribe = await this.store.subscribe((wakeUp) => this.onWakeUp(wakeUp));
        if (this.running) this.unsubscribe = unsubscribe;
        else await unsubscribe();
      } catch (error) {
        // Polling still finds every job; the next poll tries to subscribe again.
        this.options.onError(error, 'subscribe');
      } finally {
        this.subscribing = undefined;
      }
    })();
    return this.subscribing;
  }

  private measureOffset(samples = 1): Promise<void> {
    if (this.offsetQuery) return this.offsetQuery;
    this.offsetQuery = (async () => {
      try {
        for (let i = 0; i < samples; i += 1) {
          const before = this.clock.monotonic();
          const wallBefore = this.clock.now();
          const dbNow = await this.store.now();
          const errorMs = (this.clock.monotonic() - before) / 2;
          // A sample from a slow round trip is imprecise; keep it only if it is not much worse
          // than the best so far, so a loaded moment cannot skew every later timer.
          if (errorMs <= this.bestOffsetErrorMs * 2 + 1) {
            this.offsetMs = dbNow.getTime() - (wallBefore + errorMs);
            this.offsetErrorMs = errorMs;
            this.bestOffsetErrorMs = Math.min(this.bestOffsetErrorMs, errorMs);
          }
        }
      } catch (error) {
        this.options.onError(error, 'now');
      } finally {
        this.offsetQuery = undefined;
      }
    })();
    return this.offsetQuery;
  }
}
