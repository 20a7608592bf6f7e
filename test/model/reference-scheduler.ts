/**
 * The design's toy scheduler, ported line for line, and a variant with Docket's semantics used as
 * a test oracle for the real stores.
 *
 * `Scheduler` is the design's Python class exactly: a dictionary of jobs in insertion order, time
 * as a number of seconds passed in, `due` sorted by the tuple (run_at, "jN") (so "j10" sorts
 * before "j2", as Python compares strings), attempts counted on failure, LEASE 30, MAX_ATTEMPTS 5.
 *
 * `DocketModel` keeps the same shape but follows the Store contract (src/store/store.ts):
 * - attempts are counted at claim (the design's own fix for "counting attempts only on failure");
 * - a claim (limit >= 1) parks every due job in its queues whose lease lapsed after its last
 *   allowed attempt (reason lease_expired), then hands out up to `limit` of the others, so a
 *   claim never leaves an exhausted job behind and parking never uses up the batch;
 * - claim order is priority, then run_at, then id compared as a number;
 * - a lease ends at lease_until: claimable then, and a heartbeat at that instant is refused;
 * - complete and fail are fenced by the token and the running state only (a lapsed lease nobody
 *   re-claimed still completes, as in the toy); heartbeat also needs the lease to be live;
 * - failures follow a retry decision: by default the design's 2^attempts (jitter off), parked once
 *   attempts reach maxAttempts; release gives the attempt back; cancel finishes a live job.
 * Time is in whatever unit the caller uses (seconds for the design's examples).
 */
import type { JobState } from '../../src/job/job.js';
import type { RetryDecision } from '../../src/retry/backoff.js';

interface ToyJob {
  run_at: number;
  lease_until: number;
  attempts: number;
  token: number;
}

/** The design's `Scheduler` class, ported exactly (see the file header). */
export class Scheduler {
  static readonly LEASE = 30;
  static readonly MAX_ATTEMPTS = 5;

  /** The jobs table: a dictionary in insertion order, as Python's dict. */
  readonly jobs = new Map<string, ToyJob>();
  readonly done: string[] = [];
  readonly dead: string[] = [];
  nextId = 0;

  submit(runAt: number): string {
    const jid = `j${this.nextId}`;
    this.nextId += 1;
    this.jobs.set(jid, { run_at: runAt, lease_until: 0, attempts: 0, token: 0 });
    return jid;
  }

  /** Due and not leased: take a lease and a fresh fencing token. */
  claim(now: number, limit = 10): [string, number][] {
    const due: [number, string][] = [];
    for (const [jid, j] of this.jobs) {
      if (j.run_at <= now && j.lease_until <= now) due.push([j.run_at, jid]);
    }
    due.sort(comparePythonTuples);
    const out: [string, number][] = [];
    for (const [, jid] of due.slice(0, Math.max(0, limit))) {
      const j = this.jobs.get(jid)!;
      j.lease_until = now + Scheduler.LEASE;
      j.token = j.token + 1;
      out.push([jid, j.token]);
    }
    return out;
  }

  private mine(jid: string, token: number): ToyJob | null {
    const j = this.jobs.get(jid);
    return j !== undefined && j.token === token ? j : null;
  }

  heartbeat(now: number, jid: string, token: number): boolean {
    const j = this.mine(jid, token);
    if (j === null || j.lease_until <= now) return false;
    j.lease_until = now + Scheduler.LEASE;
    return true;
  }

  complete(jid: string, token: number): 'stale' | 'done' {
    if (this.mine(jid, token) === null) return 'stale';
    this.jobs.delete(jid);
    this.done.push(jid);
    return 'done';
  }

  fail(now: number, jid: string, token: number): string {
    const j = this.mine(jid, token);
    if (j === null) return 'stale';
    j.attempts += 1;
    if (j.attempts >= Scheduler.MAX_ATTEMPTS) {
      this.jobs.delete(jid);
      this.dead.push(jid);
      return 'parked';
    }
    const wait = 2 ** j.attempts;
    j.run_at = now + wait;
    j.lease_until = 0;
    return `retry in ${wait}s`;
  }
}

/** Python's ordering of (number, str) tuples: by the number, then the string by code points. */
function comparePythonTuples(a: [number, string], b: [number, string]): number {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1;
  return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
}

/** One job in the {@link DocketModel}. */
export interface ModelJob {
  id: string;
  queue: string;
  priority: number;
  state: JobState;
  runAt: number;
  /** null when no lease is held. */
  leaseUntil: number | null;
  token: number;
  attempts: number;
  maxAttempts: number;
  /** Attempt numbers and reasons of the attempts that did not succeed. */
  errors: { attempt: number; kind: 'thrown' | 'lease_expired' }[];
  finishedAt: number | null;
}

/** What a claim hands out. */
export interface ModelClaim {
  id: string;
  token: number;
  attempts: number;
  runAt: number;
  leaseUntil: number;
}

/** Options of the {@link DocketModel}. */
export interface DocketModelOptions {
  /** Lease length in the model's time unit; the design's 30. */
  lease?: number;
  /** Retry delay after failed attempt n (claim-counted); the design's 2^n with jitter off. */
  retryDelay?: (attempts: number) => number;
}

/** Docket's semantics on the toy's dictionary: the oracle the real stores must agree with. */
export class DocketModel {
  readonly lease: number;
  private readonly retryDelay: (attempts: number) => number;
  private readonly table = new Map<string, ModelJob>();
  private nextId = 1;

  constructor(options: DocketModelOptions = {}) {
    this.lease = options.lease ?? Scheduler.LEASE;
    this.retryDelay = options.retryDelay ?? ((attempts) => 2 ** attempts);
  }

  /** Every job, in id order. */
  all(): ModelJob[] {
    return [...this.table.values()];
  }

  get(id: string): ModelJob | undefined {
    return this.table.get(id);
  }

  /** Ids of jobs still pending or running. */
  liveIds(): string[] {
    return this.all()
      .filter((j) => j.state === 'pending' || j.state === 'running')
      .map((j) => j.id);
  }

  idsIn(state: JobState): string[] {
    return this.all()
      .filter((j) => j.state === state)
      .map((j) => j.id);
  }

  submit(runAt: number, options: { maxAttempts?: number; priority?: number; queue?: string } = {}): string {
    const id = String(this.nextId++);
    this.table.set(id, {
      id,
      queue: options.queue ?? 'default',
      priority: options.priority ?? 0,
      state: 'pending',
      runAt,
      leaseUntil: null,
      token: 0,
      attempts: 0,
      maxAttempts: options.maxAttempts ?? Scheduler.MAX_ATTEMPTS,
      errors: [],
      finishedAt: null,
    });
    return id;
  }

  private claimable(j: ModelJob, now: number, queues: readonly string[] | undefined): boolean {
    if (j.state !== 'pending' && j.state !== 'running') return false;
    if (queues !== undefined && !queues.includes(j.queue)) return false;
    return j.runAt <= now && (j.leaseUntil === null || j.leaseUntil <= now);
  }

  /** Parks every exhausted lapsed job in `queues`, then leases up to `limit` due jobs in claim order. */
  claim(now: number, limit: number, queues?: readonly string[]): ModelClaim[] {
    if (limit <= 0) return [];
    const due = this.all()
      .filter((j) => this.claimable(j, now, queues))
      .sort((a, b) => a.priority - b.priority || a.runAt - b.runAt || Number(a.id) - Number(b.id));
    const out: ModelClaim[] = [];
    for (const j of due) {
      const lapsed = j.state === 'running';
      if (lapsed && j.attempts >= j.maxAttempts) {
        j.errors.push({ attempt: j.attempts, kind: 'lease_expired' });
        this.finish(j, 'dead', now);
        continue;
      }
      if (out.length >= limit) continue;
      if (lapsed) j.errors.push({ attempt: j.attempts, kind: 'lease_expired' });
      j.state = 'running';
      j.leaseUntil = now + this.lease;
      j.token += 1;
      j.attempts += 1;
      out.push({ id: j.id, token: j.token, attempts: j.attempts, runAt: j.runAt, leaseUntil: j.leaseUntil });
    }
    return out;
  }

  private held(id: string, token: number): ModelJob | null {
    const j = this.table.get(id);
    return j !== undefined && j.state === 'running' && j.token === token ? j : null;
  }

  /** The new lease end, or null when the token is stale or the lease already lapsed. */
  heartbeat(now: number, id: string, token: number): number | null {
    const j = this.held(id, token);
    if (j === null || j.leaseUntil === null || j.leaseUntil <= now) return null;
    j.leaseUntil = now + this.lease;
    return j.leaseUntil;
  }

  complete(now: number, id: string, token: number): 'done' | 'stale' {
    // Idempotent for the claim that completed it: a retry after a lost reply is told done.
    const finished = this.table.get(id);
    if (finished?.state === 'done' && finished.token === token) return 'done';
    const j = this.held(id, token);
    if (j === null) return 'stale';
    this.finish(j, 'done', now);
    return 'done';
  }

  /** The decision the design's policy makes for a job whose `attempts`-th attempt failed. */
  decide(id: string, attempts: number): RetryDecision {
    const j = this.table.get(id);
    const maxAttempts = j?.maxAttempts ?? Scheduler.MAX_ATTEMPTS;
    return attempts >= maxAttempts ? { kind: 'park' } : { kind: 'retry', delayMs: this.retryDelay(attempts) };
  }

  /** Applies `decision` (by default the model's own policy) if the token is current. */
  fail(
    now: number,
    id: string,
    token: number,
    decision?: RetryDecision,
  ): { outcome: 'retry'; runAt: number } | { outcome: 'parked' } | { outcome: 'stale' } {
    const j = this.held(id, token);
    if (j === null) return { outcome: 'stale' };
    j.errors.push({ attempt: j.attempts, kind: 'thrown' });
    const chosen = decision ?? this.decide(id, j.attempts);
    if (chosen.kind === 'park') {
      this.finish(j, 'dead', now);
      return { outcome: 'parked' };
    }
    j.state = 'pending';
    j.runAt = now + chosen.delayMs;
    j.leaseUntil = null;
    return { outcome: 'retry', runAt: j.runAt };
  }

  /** Gives the lease back: due at once, the attempt not counted. */
  release(now: number, id: string, token: number): 'released' | 'stale' {
    const j = this.held(id, token);
    if (j === null) return 'stale';
    j.state = 'pending';
    j.leaseUntil = null;
    j.attempts = Math.max(0, j.attempts - 1);
    j.runAt = Math.min(j.runAt, now);
    return 'released';
  }

  cancel(now: number, id: string): 'cancelled' | 'not_found' | 'already_finished' {
    const j = this.table.get(id);
    if (j === undefined) return 'not_found';
    if (j.state !== 'pending' && j.state !== 'running') return 'already_finished';
    this.finish(j, 'cancelled', now);
    return 'cancelled';
  }

  private finish(j: ModelJob, state: 'done' | 'dead' | 'cancelled', now: number): void {
    j.state = state;
    j.leaseUntil = null;
    j.finishedAt = now;
  }
}
