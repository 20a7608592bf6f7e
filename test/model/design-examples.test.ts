/**
 * The design's worked examples, three ways: (a) the ported toy reproduces every line the design
 * prints; (b) the same examples hold on each real store with pinned time; (c) the 200-seed
 * simulation runs against the DocketModel and each real store, its invariants hold, and each
 * store's outcome equals the model's seed for seed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decideAfterFailure } from '../../src/retry/backoff.js';
import type { Store } from '../../src/store/store.js';
import { spec, t, thrown } from '../conformance/conformance-helpers.js';
import { createTestDatabase, storeKinds, type TestDatabase } from '../support/stores.js';
import { PythonRandom } from './python-random.js';
import { Scheduler } from './reference-scheduler.js';
import {
  DESIGN_LEASE_MS,
  DESIGN_MAX_ATTEMPTS,
  DESIGN_RETRY_POLICY,
  modelSimBackend,
  runToySimulation,
  type SimResult,
  simulateSeeds,
  storeSimBackend,
} from './simulation.js';

const SEEDS = 200;

/** Python's repr of a list of (jid, token) tuples, as the design prints claims. */
function reprClaims(claims: [string, number][]): string {
  return `[${claims.map(([jid, token]) => `('${jid}', ${token})`).join(', ')}]`;
}

function reprBool(value: boolean): string {
  return value ? 'True' : 'False';
}

function reprStrings(values: string[]): string {
  return `[${values.map((v) => `'${v}'`).join(', ')}]`;
}

/** The largest count among equal values, as `max(Counter(values).values())`. */
function maxCount(values: number[]): number {
  const counts = new Map<number, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return Math.max(...counts.values());
}

function totals(results: SimResult[]) {
  const sum = (pick: (r: SimResult) => number) => results.reduce((acc, r) => acc + pick(r), 0);
  return { jobs: sum((r) => r.jobs), done: sum((r) => r.done), dead: sum((r) => r.dead), twice: sum((r) => r.twice) };
}

function violationsOf(results: SimResult[]): string[] {
  return results.flatMap((r) => r.violations.map((v) => `seed ${r.seed}: ${v}`));
}

/** The model's run of the 200 seeds, computed once and shared by every store's comparison. */
let modelRun: Promise<SimResult[]> | undefined;
function modelResults(): Promise<SimResult[]> {
  modelRun ??= simulateSeeds(SEEDS, 1, () => modelSimBackend());
  return modelRun;
}

describe('the design’s toy scheduler, ported', () => {
  it('prints the lease and fencing example: [] [(j0, 1)], True [], [(j0, 2)], stale done', () => {
    const s = new Scheduler();
    s.submit(100);
    const lines = [
      `${reprClaims(s.claim(99))} ${reprClaims(s.claim(100))}`,
      `${reprBool(s.heartbeat(110, 'j0', 1))} ${reprClaims(s.claim(135))}`,
      reprClaims(s.claim(141)),
      `${s.complete('j0', 1)} ${s.complete('j0', 2)}`,
    ];
    expect(lines).toEqual(["[] [('j0', 1)]", 'True []', "[('j0', 2)]", 'stale done']);
  });

  it('prints the always-failing handler log and t = 30', () => {
    const s = new Scheduler();
    let time = 0;
    const log: string[] = [];
    s.submit(0);
    while (s.jobs.size > 0) {
      for (const [jid, token] of s.claim(time)) log.push(s.fail(time, jid, token));
      time += 1;
    }
    expect(`${reprStrings(log)} ${time - 1}`).toBe(
      "['retry in 2s', 'retry in 4s', 'retry in 8s', 'retry in 16s', 'parked'] 30",
    );
  });

  it('prints the spike: 10000 193 with Random(36) and randrange(60)', () => {
    const rng = new PythonRandom(36);
    const hourly = Array.from({ length: 10_000 }, () => 3600);
    const jittered = Array.from({ length: 10_000 }, () => 3600 + rng.randrange(60));
    expect(`${maxCount(hourly)} ${maxCount(jittered)}`).toBe('10000 193');
  });

  it('prints the 200-seed simulation: True 136', () => {
    const { ok, twice } = runToySimulation(SEEDS);
    expect(`${reprBool(ok)} ${twice}`).toBe('True 136');
  });
});

describe('the 200-seed simulation against the DocketModel', () => {
  it('keeps every invariant: never early, each job ends once in done or dead, none left, done means an effect', async () => {
    const results = await modelResults();
    expect(violationsOf(results)).toEqual([]);
    const sum = totals(results);
    expect(sum.done + sum.dead).toBe(sum.jobs);
    console.log(
      `DocketModel simulation (${SEEDS} seeds): ok=True jobs=${sum.jobs} done=${sum.done} dead=${sum.dead} ` +
        `succeeded twice=${sum.twice} (the toy, counting attempts on failure: 136)`,
    );
  });
});

describe.each(storeKinds())('the design’s examples on the %s store', (kind) => {
  let db: TestDatabase;
  let store: Store;

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    store = await db.open();
  });

  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  const claim = (queue: string, seconds: number, owner = 'worker') =>
    store.jobClaim({ owner, limit: 10, leaseMs: DESIGN_LEASE_MS, queues: [queue], now: t(seconds) });

  it('leases and fences: nothing at 99, token 1 at 100, lease to 140, nothing at 135, token 2 at 141, stale then done', async () => {
    const queue = 'design_lease';
    const [submitted] = await store.jobSubmit({ now: t(0), jobs: [spec({ kind: 'design', queue, runAt: t(100) })] });
    const id = submitted!.id;
    expect(await claim(queue, 99)).toEqual([]);
    expect((await claim(queue, 100, 'worker-1')).map((j) => [j.id, j.token])).toEqual([[id, 1]]);
    expect(await store.jobHeartbeat({ id, token: 1, leaseMs: DESIGN_LEASE_MS, now: t(110) })).toEqual(t(140));
    expect(await claim(queue, 135)).toEqual([]);
    expect((await claim(queue, 141, 'worker-2')).map((j) => [j.id, j.token])).toEqual([[id, 2]]);
    expect(await store.jobComplete({ id, token: 1, now: t(142) })).toBe('stale');
    expect(await store.jobComplete({ id, token: 2, now: t(142) })).toBe('done');
  });

  it('backs off an always-failing handler 2, 4, 8, 16 s, then parks it at t = 30', async () => {
    const queue = 'design_fail';
    const [submitted] = await store.jobSubmit({
      now: t(0),
      jobs: [
        spec({ kind: 'design', queue, runAt: t(0), maxAttempts: DESIGN_MAX_ATTEMPTS, retry: DESIGN_RETRY_POLICY }),
      ],
    });
    const id = submitted!.id;
    const log: string[] = [];
    let time = 0;
    const live = async () => ['pending', 'running'].includes((await store.jobGet({ id }))?.state ?? 'gone');
    while ((await live()) && time < 100) {
      for (const job of await claim(queue, time)) {
        const decision = decideAfterFailure({
          attempts: job.attempts,
          maxAttempts: job.maxAttempts,
          policy: job.retryPolicy,
          random: () => 0.5,
        });
        const result = await store.jobFail({
          id: job.id,
          token: job.token,
          error: thrown('always'),
          decision,
          now: t(time),
        });
        log.push(
          result.outcome === 'retry'
            ? `retry in ${(result.runAt.getTime() - t(time).getTime()) / 1000}s`
            : result.outcome,
        );
      }
      time += 1;
    }
    expect(`${reprStrings(log)} ${time - 1}`).toBe(
      "['retry in 2s', 'retry in 4s', 'retry in 8s', 'retry in 16s', 'parked'] 30",
    );
    expect((await store.jobGet({ id }))?.errors.map((e) => e.attempt)).toEqual([1, 2, 3, 4, 5]);
  });

  it('runs the 200-seed simulation with every invariant holding and the DocketModel’s outcome, seed for seed', async () => {
    const started = Date.now();
    // PostgreSQL answers over the network, so several seeds (each in its own queue) overlap;
    // every seed is deterministic on its own, so overlap changes no outcome.
    const parallel = kind === 'postgres' ? 8 : 1;
    const results = await simulateSeeds(SEEDS, parallel, (seed) => storeSimBackend(store, `sim_${seed}`));
    const elapsedMs = Date.now() - started;
    const model = await modelResults();
    const sum = totals(results);
    const modelSum = totals(model);
    console.log(
      `${kind} store simulation (${SEEDS} seeds, ${elapsedMs} ms): ok=${violationsOf(results).length === 0 ? 'True' : 'False'} ` +
        `jobs=${sum.jobs} done=${sum.done} dead=${sum.dead} succeeded twice=${sum.twice}; ` +
        `DocketModel: done=${modelSum.done} dead=${modelSum.dead} succeeded twice=${modelSum.twice}`,
    );
    expect(violationsOf(results)).toEqual([]);
    const differing = results
      .map((r, seed) => ({ r, m: model[seed]! }))
      .filter(({ r, m }) => r.twice !== m.twice || r.done !== m.done || r.dead !== m.dead)
      .map(
        ({ r, m }) =>
          `seed ${r.seed}: store twice=${r.twice} done=${r.done} dead=${r.dead}, model twice=${m.twice} done=${m.done} dead=${m.dead}`,
      );
    expect(differing, 'seeds where the store and the DocketModel disagree').toEqual([]);
    expect(sum.twice).toBe(modelSum.twice);
  }, 180_000);
});
