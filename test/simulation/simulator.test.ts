/**
 * CI-sized simulation: a few hundred seeds on SQLite and a few dozen on PostgreSQL, each checked
 * for I1-I7 with skewed worker clocks, store restarts, crashing workers, poison jobs and (in half
 * the seeds) recurring schedules through a fleet outage. The long
 * version is `npm run simulate -- --seeds 5000 --store both`.
 */
import { describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { createTestDatabase, storeKinds } from '../support/stores.js';
import { simulateSeed } from './simulate-seed.js';
import { formatSummary, runSimulation } from './simulation-runner.js';

const SEEDS: Record<string, number> = { sqlite: 250, postgres: 30 };

describe.each(storeKinds())('simulation on %s', (kind) => {
  // Wall time is mostly commit latency (each store call is one fsynced transaction, one after
  // another): about 55 s for PostgreSQL's 30 seeds alone on a 2-core machine, twice that beside the
  // rest of the suite, so the limit leaves room for a loaded CI machine.
  it(`keeps I1-I7 for ${SEEDS[kind]} seeds with skewed clocks, restarts, poison jobs and schedules`, async () => {
    const summary = await runSimulation(kind, 0, SEEDS[kind] ?? 30);
    const context = `${formatSummary(summary)}\n${summary.violations.slice(0, 20).join('\n')}`;
    expect(summary.violations, context).toEqual([]);
    // The faults must actually have happened, or the run proves nothing.
    expect(summary.figures.restarts, context).toBeGreaterThan(0);
    expect(summary.figures.poisonParked, context).toBe(summary.figures.poisonJobs);
    expect(summary.figures.earlyWakeUps, context).toBeGreaterThan(0);
    expect(summary.figures.staleRefused, context).toBeGreaterThan(0);
    expect(summary.figures.recurringRuns, context).toBeGreaterThan(0);
    expect(summary.figures.gaps, context).toBeGreaterThan(0);
  }, 300_000);
});

describe('the simulator itself', () => {
  it('reports early claims and overlapping leases from a store that claims with a clock 40 s fast', async () => {
    const database = await createTestDatabase('sqlite');
    // A mutant store: its claim reads a clock 40 s ahead (longer than the 30 s lease).
    const fastClaims = (store: Store): Store =>
      new Proxy(store, {
        get(target, name, receiver) {
          if (name === 'jobClaim') {
            return (params: Parameters<Store['jobClaim']>[0]) =>
              target.jobClaim({ ...params, now: new Date((params.now?.getTime() ?? Date.now()) + 40_000) });
          }
          const value = Reflect.get(target, name, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    try {
      const violations: string[] = [];
      for (let seed = 0; seed < 20; seed += 1) {
        const result = await simulateSeed(seed, { open: async () => fastClaims(await database.open()) });
        violations.push(...result.violations);
      }
      expect(violations.some((line) => line.includes(' I4 '))).toBe(true);
      expect(violations.some((line) => line.includes(' I3 '))).toBe(true);
      // Recurring runs too, judged against slot + jitter offset recomputed from the schedule.
      expect(violations.some((line) => line.includes(' I4 schedule '))).toBe(true);
    } finally {
      await database.drop();
    }
  }, 60_000);
});
