/**
 * The design's 200-seed simulation: crashing, failing and stalling workers against a scheduler,
 * with the design's invariants checked after each seed. Draws come from a port of CPython's
 * `random.Random(seed)` in the design's exact order, so the toy run reproduces the design's
 * printed `True 136`, and every backend (the {@link DocketModel}, each real store) sees the same
 * workload for the same seed, so their counts can be compared number for number.
 *
 * RNG consumption per step is identical for every backend: one `randint(0, 3)` for the claim
 * limit, then per claimed job one `choice` of outcome and one of duration. Skipping a claim call
 * never skips a draw: with a limit of 0, or before the backend's own next claimable time (asked
 * again after every claim, completion or failure; a heartbeat only delays it), the step consumes
 * the limit draw and claims nothing, exactly as the call would have. A store whose next claimable
 * time were too late would claim late and disagree with the model; one too early only costs a call,
 * and every claim made is still checked for "never early".
 */
import type { RetryPolicy } from '../../src/job/job.js';
import { decideAfterFailure } from '../../src/retry/backoff.js';
import type { Store } from '../../src/store/store.js';
import { spec, t, thrown } from '../conformance/conformance-helpers.js';
import { PythonRandom } from './python-random.js';
import { DocketModel, Scheduler } from './reference-scheduler.js';

/** The design's outcomes, with "ok" four times so it is drawn 4 times in 7. */
export const OUTCOMES = ['crash', 'fail', 'stall', 'ok', 'ok', 'ok', 'ok'] as const;
type Outcome = (typeof OUTCOMES)[number];

/** The design's backoff in milliseconds: 2, 4, 8, 16 s with jitter off. */
export const DESIGN_RETRY_POLICY: RetryPolicy = { baseDelayMs: 1000, factor: 2, maxDelayMs: 3_600_000, jitterRatio: 0 };
/** The design's lease, 30 s. */
export const DESIGN_LEASE_MS = 30_000;
/** The design's MAX_ATTEMPTS. */
export const DESIGN_MAX_ATTEMPTS = 5;

/** The toy simulation exactly as the design prints it; returns `ok` and `twice`. */
export function runToySimulation(seeds = 200): { ok: boolean; twice: number } {
  let ok = true;
  let twice = 0;
  for (let seed = 0; seed < seeds; seed++) {
    const rng = new PythonRandom(seed);
    const s = new Scheduler();
    const due = new Map<string, number>();
    const count = rng.randint(1, 25);
    for (let i = 0; i < count; i++) {
      const t0 = rng.randrange(120);
      due.set(s.submit(t0), t0);
    }
    const effects = new Map<string, number>();
    const running: [string, number, number, Outcome][] = [];
    for (let now = 0; now < 3000; now++) {
      for (const [jid, token] of s.claim(now, rng.randint(0, 3))) {
        ok = ok && now >= due.get(jid)!;
        const outcome = rng.choice(OUTCOMES);
        running.push([jid, token, now + rng.choice([5, 20, 45]), outcome]);
      }
      for (const r of [...running]) {
        const [jid, token, finishAt, outcome] = r;
        if ((outcome === 'fail' || outcome === 'ok') && now % 10 === 0) s.heartbeat(now, jid, token);
        if (now >= finishAt) {
          running.splice(running.indexOf(r), 1);
          if (outcome === 'ok' || outcome === 'stall') {
            effects.set(jid, (effects.get(jid) ?? 0) + 1);
            s.complete(jid, token);
          } else if (outcome === 'fail') {
            s.fail(now, jid, token);
          }
        }
      }
      if (s.jobs.size === 0 && running.length === 0) break;
    }
    ok = ok && sameMembers([...s.done, ...s.dead], [...due.keys()]) && s.jobs.size === 0;
    ok = ok && s.done.every((jid) => (effects.get(jid) ?? 0) >= 1);
    twice += [...effects.values()].filter((c) => c > 1).length;
  }
  return { ok, twice };
}

function sameMembers(a: readonly string[], b: readonly string[]): boolean {
  const x = [...a].sort();
  const y = [...b].sort();
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

/** One claimed job as the simulation sees it; times in seconds. */
export interface SimClaim {
  id: string;
  token: number;
  attempts: number;
  runAt: number;
}

/** A scheduler with Docket's semantics, driven in whole seconds. */
export interface SimBackend {
  /** Submits one job per run time, ids in input order (and ascending, as claims break ties by id). */
  submit(runAts: number[]): Promise<string[]>;
  /** Called with limit >= 1 only. */
  claim(now: number, limit: number): Promise<SimClaim[]>;
  heartbeat(now: number, id: string, token: number): Promise<void>;
  complete(now: number, id: string, token: number): Promise<'done' | 'stale'>;
  /** Fails the attempt; the decision comes from src/retry/backoff.ts with the design's policy. */
  fail(now: number, id: string, token: number, attempts: number): Promise<'retry' | 'parked' | 'stale'>;
  /** The earliest second at which a claim could hand something out, or null when no job is live. */
  nextClaimableAt(now: number): Promise<number | null>;
  /** Final states of every job. */
  outcome(): Promise<{ done: string[]; dead: string[]; live: string[] }>;
}

/** What one seed of the Docket simulation produced. */
export interface SimResult {
  seed: number;
  jobs: number;
  done: number;
  dead: number;
  /** Jobs whose handler succeeded more than once. */
  twice: number;
  /** The last simulated second. */
  lastSecond: number;
  /** Calls made to the backend's claim. */
  claimCalls: number;
  /** Broken invariants, each with enough detail to replay (empty when all hold). */
  violations: string[];
}

function designDecision(attempts: number) {
  return decideAfterFailure({
    attempts,
    maxAttempts: DESIGN_MAX_ATTEMPTS,
    policy: DESIGN_RETRY_POLICY,
    random: () => 0,
  });
}

/** Runs the design's simulation for one seed against `backend`, checking its invariants. */
export async function simulateDocketSeed(seed: number, backend: SimBackend): Promise<SimResult> {
  const violations: string[] = [];
  const rng = new PythonRandom(seed);
  const due = new Map<string, number>();
  const count = rng.randint(1, 25);
  // Submitting draws nothing, so one batch after all the draws keeps the design's RNG order.
  const runAts = Array.from({ length: count }, () => rng.randrange(120));
  const ids = await backend.submit(runAts);
  for (const [i, id] of ids.entries()) {
    if (ids.length !== runAts.length) throw new Error(`submit of ${runAts.length} jobs answered ${ids.length} ids`);
    due.set(id, runAts[i]!);
  }
  const effects = new Map<string, number>();
  const running: { id: string; token: number; attempts: number; finishAt: number; outcome: Outcome }[] = [];
  let idleUntil = Number.NEGATIVE_INFINITY;
  // Whether a call since the last nextClaimableAt may have changed what is claimable.
  let changed = true;
  let claimCalls = 0;
  let now = 0;
  for (; now < 3000; now++) {
    const limit = rng.randint(0, 3);
    // Nothing is claimable before idleUntil (the backend's own answer since the last change), so
    // the claim would return nothing and write nothing; the limit draw above is still consumed.
    const skip = limit === 0 || now < idleUntil;
    const claimed = skip ? [] : await backend.claim(now, limit);
    if (!skip) {
      claimCalls++;
      changed = true;
    }
    if (claimed.length > limit) violations.push(`t=${now}: claim of ${limit} handed out ${claimed.length}`);
    for (const c of claimed) {
      const submittedFor = due.get(c.id);
      if (submittedFor === undefined) violations.push(`t=${now}: claim handed out unknown job ${c.id}`);
      else if (now < submittedFor) violations.push(`t=${now}: job ${c.id} claimed early (due ${submittedFor})`);
      if (now < c.runAt) violations.push(`t=${now}: job ${c.id} claimed before its run_at ${c.runAt}`);
      const outcome = rng.choice(OUTCOMES);
      running.push({
        id: c.id,
        token: c.token,
        attempts: c.attempts,
        finishAt: now + rng.choice([5, 20, 45]),
        outcome,
      });
    }
    for (const r of [...running]) {
      if ((r.outcome === 'fail' || r.outcome === 'ok') && now % 10 === 0) await backend.heartbeat(now, r.id, r.token);
      if (now >= r.finishAt) {
        running.splice(running.indexOf(r), 1);
        changed = true;
        if (r.outcome === 'ok' || r.outcome === 'stall') {
          effects.set(r.id, (effects.get(r.id) ?? 0) + 1);
          await backend.complete(now, r.id, r.token);
        } else if (r.outcome === 'fail') {
          await backend.fail(now, r.id, r.token, r.attempts);
        }
      }
    }
    if (changed) {
      changed = false;
      const next = await backend.nextClaimableAt(now);
      if (next === null && running.length === 0) break;
      idleUntil = next ?? Number.POSITIVE_INFINITY;
    }
  }
  const final = await backend.outcome();
  if (final.live.length > 0) violations.push(`jobs left behind: ${final.live.join(', ')}`);
  const ended = [...final.done, ...final.dead];
  if (!sameMembers(ended, [...due.keys()])) {
    violations.push(
      `done+dead ${JSON.stringify([...ended].sort())} is not every submitted job exactly once ${JSON.stringify([...due.keys()].sort())}`,
    );
  }
  for (const id of final.done) {
    if ((effects.get(id) ?? 0) < 1) violations.push(`job ${id} is done but its handler never succeeded`);
  }
  return {
    seed,
    jobs: due.size,
    done: final.done.length,
    dead: final.dead.length,
    twice: [...effects.values()].filter((c) => c > 1).length,
    lastSecond: now,
    claimCalls,
    violations,
  };
}

/** The {@link DocketModel} as a simulation backend. */
export function modelSimBackend(model = new DocketModel()): SimBackend {
  return {
    submit: async (runAts) => runAts.map((runAt) => model.submit(runAt)),
    claim: async (now, limit) => model.claim(now, limit),
    heartbeat: async (now, id, token) => {
      model.heartbeat(now, id, token);
    },
    complete: async (now, id, token) => model.complete(now, id, token),
    fail: async (now, id, token, attempts) => {
      const decision = designDecision(attempts);
      const seconds =
        decision.kind === 'retry' ? { kind: 'retry' as const, delayMs: decision.delayMs / 1000 } : decision;
      return model.fail(now, id, token, seconds).outcome;
    },
    nextClaimableAt: async () => {
      const live = model.all().filter((j) => j.state === 'pending' || j.state === 'running');
      if (live.length === 0) return null;
      return Math.min(...live.map((j) => Math.max(j.runAt, j.leaseUntil ?? Number.NEGATIVE_INFINITY)));
    },
    outcome: async () => ({
      done: model.idsIn('done'),
      dead: model.idsIn('dead'),
      live: model.liveIds(),
    }),
  };
}

/** A real store as a simulation backend: seconds become pinned instants, one queue per seed. */
export function storeSimBackend(store: Store, queue: string): SimBackend {
  const seconds = (date: Date) => date.getTime() / 1000;
  const ids = async (states: ('pending' | 'running' | 'done' | 'dead')[]) =>
    (await store.jobList({ queue, states, limit: 1000 })).map((j) => j.id);
  return {
    submit: async (runAts) => {
      const results = await store.jobSubmit({
        now: t(0),
        jobs: runAts.map((runAt) =>
          spec({
            kind: 'sim.job',
            queue,
            runAt: t(runAt),
            maxAttempts: DESIGN_MAX_ATTEMPTS,
            retry: DESIGN_RETRY_POLICY,
          }),
        ),
      });
      return results.map((r) => r.id);
    },
    claim: async (now, limit) =>
      (
        await store.jobClaim({ owner: `sim-${queue}`, limit, leaseMs: DESIGN_LEASE_MS, queues: [queue], now: t(now) })
      ).map((j) => ({ id: j.id, token: j.token, attempts: j.attempts, runAt: seconds(j.runAt) })),
    heartbeat: async (now, id, token) => {
      await store.jobHeartbeat({ id, token, leaseMs: DESIGN_LEASE_MS, now: t(now) });
    },
    complete: (now, id, token) => store.jobComplete({ id, token, now: t(now) }),
    fail: async (now, id, token, attempts) =>
      (
        await store.jobFail({
          id,
          token,
          error: thrown('the handler raised'),
          decision: designDecision(attempts),
          now: t(now),
        })
      ).outcome,
    nextClaimableAt: async (now) => {
      const next = await store.jobNextRunAt({ queues: [queue], now: t(now) });
      return next === null ? null : seconds(next);
    },
    outcome: async () => ({
      done: await ids(['done']),
      dead: await ids(['dead']),
      live: await ids(['pending', 'running']),
    }),
  };
}

/** Runs `seeds` seeds with at most `parallel` in flight, results in seed order. */
export async function simulateSeeds(
  seeds: number,
  parallel: number,
  backendFor: (seed: number) => SimBackend,
): Promise<SimResult[]> {
  const results: SimResult[] = new Array(seeds);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.max(1, parallel) }, async () => {
      while (next < seeds) {
        const seed = next++;
        results[seed] = await simulateDocketSeed(seed, backendFor(seed));
      }
    }),
  );
  return results;
}
