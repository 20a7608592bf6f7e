/**
 * CI-sized chaos runs: a minute of faults on PostgreSQL (its own cluster on port 5433: kills,
 * pauses, an immediate restart, terminated connections, ambiguous commits) and half a minute on
 * SQLite (kills and pauses of processes sharing one file), with one-off jobs and six recurring
 * schedules (one run every one or two seconds) on the same workers, then drain and check every
 * invariant, I7 (one run per slot) included.
 * The long run is `npm run chaos -- --minutes 10 …` (see docs/reliability.md).
 */
import { describe, expect, it } from 'vitest';
import { type ChaosResult, DEFAULT_CHAOS_OPTIONS, runChaos } from './chaos-run.js';

const SEED = Number(process.env.DOCKET_CHAOS_SEED ?? 2);

function expectClean(result: ChaosResult): void {
  const f = result.figures;
  // The seed goes into every failure message so the run can be replayed with npm run chaos -- --seed.
  const context = `seed ${result.options.seed} (${result.options.store}): ${JSON.stringify(f)}\n${result.violations.slice(0, 20).join('\n')}`;
  expect(result.violations, context).toEqual([]);
  expect(result.drained, context).toBe(true);
  expect(f.jobsLost, context).toBe(0);
  expect(f.jobsStartedEarly, context).toBe(0);
  expect(f.jobsSubmitted, context).toBeGreaterThan(500);
  expect(f.kills + f.poisonExits, context).toBeGreaterThan(0);
  expect(f.pauses, context).toBeGreaterThan(0);
  expect(f.poisonJobsParked, context).toBeGreaterThan(0);
  // I7: the schedules ran through the faults, one job per slot, gaps only where allowed.
  expect(f.recurring.schedules, context).toBeGreaterThan(0);
  expect(f.recurring.slotsRun, context).toBeGreaterThan(f.recurring.schedules * 10);
  expect(f.recurring.duplicateSlots, context).toBe(0);
  expect(f.recurring.slotsNeverPlanned, context).toBe(0);
  expect(f.recurring.gapsNotAllowed, context).toBe(0);
  expect(f.recurring.runsStartedEarly, context).toBe(0);
  // The fleet freeze halfway through must have made schedules miss slots, or the policies went untested.
  expect(f.freezes, context).toBeGreaterThan(0);
  expect(f.recurring.gaps, context).toBeGreaterThan(0);
}

describe('chaos', () => {
  it('keeps every promise on PostgreSQL through kills, pauses, a restart and ambiguous commits', async () => {
    const result = await runChaos({
      ...DEFAULT_CHAOS_OPTIONS,
      store: 'postgres',
      seed: SEED,
      faultMs: 60_000,
      drainTimeoutMs: 60_000,
      jobsPerSecond: 40,
      // CI runs other test files beside this one on two cores: allow more scheduling delay.
      recoverySlackMs: 3000,
      log: () => {},
    });
    expectClean(result);
    expect(result.figures.restarts).toBeGreaterThan(0);
    expect(result.figures.ambiguousCommits).toBeGreaterThan(0);
  }, 200_000);

  it('keeps every promise on SQLite through kills and pauses of processes sharing one file', async () => {
    const result = await runChaos({
      ...DEFAULT_CHAOS_OPTIONS,
      store: 'sqlite',
      seed: SEED,
      faultMs: 30_000,
      drainTimeoutMs: 60_000,
      jobsPerSecond: 30,
      recoverySlackMs: 3000,
      log: () => {},
    });
    expectClean(result);
  }, 150_000);
});
