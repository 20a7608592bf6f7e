/**
 * Runs many simulation seeds against SQLite (a file, so a restart keeps the data) and/or
 * PostgreSQL (a fresh schema on the test server; a "restart" closes and reopens the pool, since
 * the shared server itself must never be restarted: the chaos harness does real restarts on its
 * own cluster). Seeds share one database, each in its own queue.
 */
import { createTestDatabase, type StoreKind } from '../support/stores.js';
import { emptySeedFigures, type SeedFigures, type SeedResult, simulateSeed } from './simulate-seed.js';

/** The summed outcome of a batch of seeds on one store. */
export interface SimulationSummary {
  store: StoreKind;
  seeds: number;
  firstSeed: number;
  figures: SeedFigures;
  violations: string[];
  failedSeeds: number[];
  elapsedMs: number;
}

/** Runs seeds `firstSeed … firstSeed + seeds - 1` on `store`. */
export async function runSimulation(store: StoreKind, firstSeed: number, seeds: number): Promise<SimulationSummary> {
  const started = Date.now();
  const database = await createTestDatabase(store);
  const results: SeedResult[] = [];
  try {
    for (let seed = firstSeed; seed < firstSeed + seeds; seed += 1) {
      results.push(await simulateSeed(seed, { open: () => database.open() }));
    }
  } finally {
    await database.drop();
  }
  const figures = results.reduce<SeedFigures>((sum, result) => {
    for (const key of Object.keys(sum) as (keyof SeedFigures)[]) sum[key] += result.figures[key];
    return sum;
  }, emptySeedFigures());
  return {
    store,
    seeds,
    firstSeed,
    figures,
    violations: results.flatMap((result) => result.violations),
    failedSeeds: results.filter((result) => result.violations.length > 0).map((result) => result.seed),
    elapsedMs: Date.now() - started,
  };
}

/** One line per figure, as `npm run simulate` prints them. */
export function formatSummary(summary: SimulationSummary): string {
  const f = summary.figures;
  return [
    `store ${summary.store}: seeds ${summary.firstSeed}..${summary.firstSeed + summary.seeds - 1} in ${(summary.elapsedMs / 1000).toFixed(1)} s`,
    `  jobs ${f.jobs} (poison ${f.poisonJobs}), claims ${f.claims}, completions accepted ${f.completions}`,
    `  stale refused ${f.staleRefused}, effects that ran twice ${f.effectsTwice} (allowed)`,
    `  parked: poison ${f.poisonParked}/${f.poisonJobs}, healthy ${f.healthyParked}`,
    `  schedules ${f.schedules}, fleet outages ${f.fleetOutages}, recurring runs ${f.recurringRuns}, gaps ${f.gaps} (${f.missedSlots} missed slots, all allowed unless listed as I7 violations)`,
    `  database restarts ${f.restarts}, worker crashes ${f.workerCrashes}, early wake-ups by skewed clocks ${f.earlyWakeUps}`,
    `  violations ${summary.violations.length}${summary.failedSeeds.length > 0 ? ` (seeds ${summary.failedSeeds.slice(0, 20).join(', ')})` : ''}`,
  ].join('\n');
}
