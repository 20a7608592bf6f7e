/**
 * Model-based testing: random sequences of store operations (submit, claim, heartbeat with a
 * current or stale token, complete, fail, release, cancel, time passing, a worker crashing and
 * forgetting its lease) run against the DocketModel and a real store side by side. Every
 * operation's answer must match, and after every step each job's state, token, attempts and lease
 * must match too. Time is pinned in milliseconds; "advance to the next event" lands exactly on
 * run_at and lease boundaries, where off-by-one bugs live.
 *
 * The seed is printed before the run and by fast-check on failure; replay with
 * DOCKET_FC_SEED=<seed> (and fast-check's printed path to go straight to the shrunk case).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decideAfterFailure } from '../../src/retry/backoff.js';
import type { Store } from '../../src/store/store.js';
import { spec, thrown } from '../conformance/conformance-helpers.js';
import { createTestDatabase, storeKinds, type TestDatabase } from '../support/stores.js';
import { DocketModel } from './reference-scheduler.js';
import { DESIGN_LEASE_MS, DESIGN_RETRY_POLICY } from './simulation.js';

const NUM_RUNS = Number(process.env.DOCKET_FC_RUNS ?? 30);
const START_MS = 1_000_000;

interface Lease {
  id: string;
  token: number;
  attempts: number;
}

/** The model side: Docket's semantics plus what the simulated workers remember. */
interface Model {
  docket: DocketModel;
  queue: string;
  nowMs: number;
  /** Every lease handed out and not forgotten by a crash (some are stale by now, on purpose). */
  leases: Lease[];
}

/** The real side: a store and the mapping from model ids to its ids. */
interface Real {
  store: Store;
  toStoreId: Map<string, string>;
  toModelId: Map<string, string>;
}

type Cmd = fc.AsyncCommand<Model, Real>;

const date = (ms: number) => new Date(ms);
const msOrNull = (d: Date | null) => (d === null ? null : d.getTime());

function storeId(r: Real, modelId: string): string {
  const id = r.toStoreId.get(modelId);
  if (id === undefined) throw new Error(`no store id for model job ${modelId}`);
  return id;
}

/** After each step: every job's state, token, attempts and lease agree. */
async function compareAll(m: Model, r: Real, after: string): Promise<void> {
  const rows = await r.store.jobList({ queue: m.queue, limit: 1000 });
  const real = rows
    .map((j) => ({
      id: r.toModelId.get(j.id) ?? `unknown store id ${j.id}`,
      state: j.state,
      token: j.token,
      attempts: j.attempts,
      leaseUntil: j.state === 'running' ? msOrNull(j.leaseUntil) : null,
    }))
    .sort((a, b) => Number(a.id) - Number(b.id));
  const model = m.docket.all().map((j) => ({
    id: j.id,
    state: j.state,
    token: j.token,
    attempts: j.attempts,
    leaseUntil: j.state === 'running' ? j.leaseUntil : null,
  }));
  expect(real, `jobs after ${after} at ${m.nowMs} ms`).toEqual(model);
}

class SubmitCommand implements Cmd {
  constructor(
    readonly delayMs: number,
    readonly maxAttempts: number,
  ) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const runAt = m.nowMs + this.delayMs;
    const modelId = m.docket.submit(runAt, { maxAttempts: this.maxAttempts, queue: m.queue });
    const [result] = await r.store.jobSubmit({
      now: date(m.nowMs),
      jobs: [spec({ kind: 'mbt', queue: m.queue, runAt: date(runAt), maxAttempts: this.maxAttempts })],
    });
    expect(result, this.toString()).toMatchObject({ created: true, runAt: date(runAt) });
    r.toStoreId.set(modelId, result!.id);
    r.toModelId.set(result!.id, modelId);
    await compareAll(m, r, this.toString());
  }
  toString = () => `submit(+${this.delayMs}ms, maxAttempts ${this.maxAttempts})`;
}

class ClaimCommand implements Cmd {
  constructor(readonly limit: number) {}
  check = () => true;
  async run(m: Model, r: Real): Promise<void> {
    const expected = m.docket.claim(m.nowMs, this.limit, [m.queue]);
    const claimed = await r.store.jobClaim({
      owner: 'mbt',
      limit: this.limit,
      leaseMs: DESIGN_LEASE_MS,
      queues: [m.queue],
      now: date(m.nowMs),
    });
    const actual = claimed.map((j) => ({
      id: r.toModelId.get(j.id) ?? `unknown store id ${j.id}`,
      token: j.token,
      attempts: j.attempts,
      leaseUntil: j.leaseUntil.getTime(),
    }));
    expect(actual, this.toString()).toEqual(
      expected.map((c) => ({ id: c.id, token: c.token, attempts: c.attempts, leaseUntil: c.leaseUntil })),
    );
    m.leases.push(...expected.map((c) => ({ id: c.id, token: c.token, attempts: c.attempts })));
    await compareAll(m, r, this.toString());
  }
  toString = () => `claim(${this.limit})`;
}

/** Commands that act on one remembered lease, picked by index. */
abstract class LeaseCommand implements Cmd {
  constructor(readonly pick: number) {}
  check = (m: Readonly<Model>) => m.leases.length > 0;
  protected lease(m: Model): Lease {
    return m.leases[this.pick % m.leases.length]!;
  }
  abstract run(m: Model, r: Real): Promise<void>;
  abstract toString(): string;
}

class HeartbeatCommand extends LeaseCommand {
  constructor(
    pick: number,
    readonly stale: boolean,
  ) {
    super(pick);
  }
  async run(m: Model, r: Real): Promise<void> {
    const lease = this.lease(m);
    const token = this.stale ? lease.token - 1 : lease.token;
    const expected = m.docket.heartbeat(m.nowMs, lease.id, token);
    const actual = await r.store.jobHeartbeat({
      id: storeId(r, lease.id),
      token,
      leaseMs: DESIGN_LEASE_MS,
      now: date(m.nowMs),
    });
    expect(msOrNull(actual), `${this} on job ${lease.id} token ${token}`).toBe(expected);
    await compareAll(m, r, this.toString());
  }
  toString = () => `heartbeat(lease #${this.pick}${this.stale ? ', older token' : ''})`;
}

class CompleteCommand extends LeaseCommand {
  constructor(
    pick: number,
    readonly stale: boolean,
  ) {
    super(pick);
  }
  async run(m: Model, r: Real): Promise<void> {
    const lease = this.lease(m);
    const token = this.stale ? lease.token - 1 : lease.token;
    const expected = m.docket.complete(m.nowMs, lease.id, token);
    const actual = await r.store.jobComplete({ id: storeId(r, lease.id), token, now: date(m.nowMs) });
    expect(actual, `${this} on job ${lease.id} token ${token}`).toBe(expected);
    await compareAll(m, r, this.toString());
  }
  toString = () => `complete(lease #${this.pick}${this.stale ? ', older token' : ''})`;
}

class FailCommand extends LeaseCommand {
  async run(m: Model, r: Real): Promise<void> {
    const lease = this.lease(m);
    const job = m.docket.get(lease.id)!;
    const decision = decideAfterFailure({
      attempts: lease.attempts,
      maxAttempts: job.maxAttempts,
      policy: DESIGN_RETRY_POLICY,
      random: () => 0,
    });
    const expected = m.docket.fail(m.nowMs, lease.id, lease.token, decision);
    const actual = await r.store.jobFail({
      id: storeId(r, lease.id),
      token: lease.token,
      error: thrown('mbt'),
      decision,
      now: date(m.nowMs),
    });
    const normalized = actual.outcome === 'retry' ? { outcome: 'retry', runAt: actual.runAt.getTime() } : actual;
    expect(normalized, `${this} on job ${lease.id} token ${lease.token}`).toEqual(expected);
    await compareAll(m, r, this.toString());
  }
  toString = () => `fail(lease #${this.pick})`;
}

class ReleaseCommand extends LeaseCommand {
  async run(m: Model, r: Real): Promise<void> {
    const lease = this.lease(m);
    const expected = m.docket.release(m.nowMs, lease.id, lease.token);
    const actual = await r.store.jobRelease({ id: storeId(r, lease.id), token: lease.token, now: date(m.nowMs) });
    expect(actual, `${this} on job ${lease.id} token ${lease.token}`).toBe(expected);
    await compareAll(m, r, this.toString());
  }
  toString = () => `release(lease #${this.pick})`;
}

/** A worker dies: it forgets its lease and never reports; only time can free the job. */
class CrashCommand extends LeaseCommand {
  async run(m: Model): Promise<void> {
    m.leases.splice(this.pick % m.leases.length, 1);
  }
  toString = () => `crash(lease #${this.pick})`;
}

class CancelCommand implements Cmd {
  constructor(readonly pick: number) {}
  check = (m: Readonly<Model>) => m.docket.all().length > 0;
  async run(m: Model, r: Real): Promise<void> {
    const jobs = m.docket.all();
    const job = jobs[this.pick % jobs.length]!;
    const expected = m.docket.cancel(m.nowMs, job.id);
    const actual = await r.store.jobCancel({ id: storeId(r, job.id), now: date(m.nowMs) });
    expect(actual, `${this} on job ${job.id}`).toBe(expected);
    await compareAll(m, r, this.toString());
  }
  toString = () => `cancel(job #${this.pick})`;
}

class AdvanceCommand implements Cmd {
  constructor(readonly ms: number) {}
  check = () => true;
  async run(m: Model): Promise<void> {
    m.nowMs += this.ms;
  }
  toString = () => `advance(${this.ms}ms)`;
}

/** Jumps exactly to the next run_at or lease end, where `<` versus `<=` bugs show. */
class AdvanceToNextEventCommand implements Cmd {
  check = () => true;
  async run(m: Model): Promise<void> {
    const events = m.docket
      .all()
      .filter((j) => j.state === 'pending' || j.state === 'running')
      .flatMap((j) => [j.runAt, j.leaseUntil ?? Number.NEGATIVE_INFINITY])
      .filter((at) => at > m.nowMs);
    if (events.length > 0) m.nowMs = Math.min(...events);
  }
  toString = () => 'advanceToNextEvent()';
}

const submit = fc
  .tuple(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 60_000 })), fc.integer({ min: 1, max: 4 }))
  .map(([d, a]) => new SubmitCommand(d, a));
const claim = fc.integer({ min: 0, max: 3 }).map((limit) => new ClaimCommand(limit));
const advanceToNextEvent = fc.constant(null).map(() => new AdvanceToNextEventCommand());

// fc.commands picks uniformly among these, so submits, claims and jumps to the next event are
// listed twice: without them most sequences would hold no claimed job to act on.
const commandArbitraries = [
  submit,
  submit,
  claim,
  claim,
  advanceToNextEvent,
  fc.tuple(fc.nat(20), fc.boolean()).map(([p, s]) => new HeartbeatCommand(p, s)),
  fc.tuple(fc.nat(20), fc.boolean()).map(([p, s]) => new CompleteCommand(p, s)),
  fc.nat(20).map((p) => new FailCommand(p)),
  fc.nat(20).map((p) => new ReleaseCommand(p)),
  fc.nat(20).map((p) => new CrashCommand(p)),
  fc.nat(20).map((p) => new CancelCommand(p)),
  fc.integer({ min: 0, max: 40_000 }).map((ms) => new AdvanceCommand(ms)),
  advanceToNextEvent,
];

describe.each(storeKinds())('the %s store agrees with the DocketModel on random operation sequences', (kind) => {
  let db: TestDatabase;
  let store: Store;
  let runs = 0;

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    store = await db.open();
  });

  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  it('answers every operation as the model does, and holds the same jobs after each step', async () => {
    const seed = Number(process.env.DOCKET_FC_SEED ?? Date.now() % 2 ** 31);
    console.log(`model-based test on ${kind}: fast-check seed ${seed} (replay with DOCKET_FC_SEED=${seed})`);
    await fc.assert(
      fc.asyncProperty(fc.commands(commandArbitraries, { size: 'large', maxCommands: 60 }), async (commands) => {
        // Each run (and each shrink attempt) gets its own queue, so runs never see each other's jobs.
        const queue = `mbt_${kind}_${++runs}`;
        await fc.asyncModelRun(
          async () => ({
            model: { docket: new DocketModel({ lease: DESIGN_LEASE_MS }), queue, nowMs: START_MS, leases: [] },
            real: { store, toStoreId: new Map(), toModelId: new Map() },
          }),
          commands,
        );
      }),
      { numRuns: NUM_RUNS, seed },
    );
  }, 300_000);
});
