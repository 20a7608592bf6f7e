/**
 * The chaos checker must be able to fail: fed a history with a lost job, an early claim, two
 * accepted completions and an overlapping lease, it reports each one; fed recurring runs with a
 * duplicate slot, a lost slot, an early start or a catch-up gap the policy forbids, the I7 check
 * reports each one and passes the gaps the policy allows.
 */
import { describe, expect, it } from 'vitest';
import type { Job } from '../../src/job/job.js';
import { DEFAULT_RETRY_POLICY } from '../../src/job/job-spec.js';
import { jitterOffsetMs } from '../../src/schedule/jitter.js';
import { normalizeScheduleSpec, type ScheduleInput } from '../../src/schedule/schedule.js';
import { type ChaosHistory, checkChaosRun } from './chaos-checker.js';
import { checkScheduleSlots } from './schedule-slot-checker.js';

function row(id: string, fields: Partial<Job>): Job {
  return {
    id,
    kind: 'chaos.ok',
    queue: 'default',
    payload: null,
    priority: 0,
    state: 'done',
    runAt: new Date(1000),
    leaseUntil: null,
    leaseOwner: null,
    token: 1,
    attempts: 1,
    maxAttempts: 20,
    retryPolicy: DEFAULT_RETRY_POLICY,
    errors: [],
    idempotencyKey: `k${id}`,
    timeoutMs: null,
    scheduleId: null,
    scheduleSlot: null,
    createdAt: new Date(0),
    finishedAt: new Date(5000),
    ...fields,
  };
}

const base: ChaosHistory = {
  leaseMs: 2000,
  pollIntervalMs: 500,
  recoverySlackMs: 1000,
  submitted: [],
  faults: [],
  workerCuts: [],
  ambiguousSubmits: [],
  ledger: [],
  jobs: [],
};

describe('checkChaosRun', () => {
  it('passes a clean history and counts a twice-run effect as allowed', () => {
    const verdict = checkChaosRun({
      ...base,
      submitted: [{ id: '1', key: 'k1', kind: 'chaos.ok', maxAttempts: 20 }],
      ledger: [
        { e: 'start', w: 'a', pid: 1, j: '1', a: 1, t: 1, c: 1000, r: 1000, s: 1000 },
        { e: 'effect', w: 'a', pid: 1, j: '1', t: 1 },
        { e: 'start', w: 'b', pid: 2, j: '1', a: 2, t: 2, c: 3500, r: 1000, s: 3500 },
        { e: 'effect', w: 'b', pid: 2, j: '1', t: 2 },
        { e: 'completed', w: 'b', pid: 2, j: '1', t: 2 },
        { e: 'stale', w: 'a', pid: 1, j: '1', t: 1, op: 'complete' },
      ],
      jobs: [row('1', { token: 2, attempts: 2 })],
    });
    expect(verdict.violations).toEqual([]);
    expect(verdict.figures).toMatchObject({ effectsRanTwice: 1, staleResultsRefused: 1, jobsLost: 0 });
  });

  it('reports a lost job, an early claim, two accepted completions and an overlapping lease', () => {
    const verdict = checkChaosRun({
      ...base,
      submitted: [
        { id: '1', key: 'k1', kind: 'chaos.ok', maxAttempts: 20 },
        { id: '2', key: 'k2', kind: 'chaos.ok', maxAttempts: 20 },
      ],
      ledger: [
        { e: 'start', w: 'a', pid: 1, j: '1', a: 1, t: 1, c: 900, r: 1000, s: 900 },
        { e: 'effect', w: 'a', pid: 1, j: '1', t: 1 },
        { e: 'completed', w: 'a', pid: 1, j: '1', t: 1 },
        { e: 'start', w: 'b', pid: 2, j: '1', a: 2, t: 2, c: 1500, r: 1000, s: 1500 },
        { e: 'effect', w: 'b', pid: 2, j: '1', t: 2 },
        { e: 'completed', w: 'b', pid: 2, j: '1', t: 2 },
      ],
      jobs: [row('1', { token: 2, attempts: 2 }), row('2', { state: 'running', leaseUntil: new Date(9000) })],
    });
    const text = verdict.violations.join('\n');
    expect(text).toMatch(/I1 job 2/);
    expect(text).toMatch(/I4 job 1 token 1/);
    expect(text).toMatch(/I2 job 1: 2 completions/);
    expect(text).toMatch(/I3 job 1/);
    expect(verdict.figures).toMatchObject({ jobsLost: 1, jobsStartedEarly: 1, overlappingLeases: 1 });
  });
});

const T0 = Date.UTC(2030, 0, 1);

/** A recurring run of schedule `s` for the slot `slotS` seconds after T0, planned at `plannedS`. */
function run(id: string, slotS: number, plannedS: number, scheduleId = 's'): Job {
  return row(id, {
    kind: 'chaos.sched',
    idempotencyKey: null,
    scheduleId,
    scheduleSlot: new Date(T0 + slotS * 1000),
    runAt: new Date(T0 + slotS * 1000),
    createdAt: new Date(T0 + plannedS * 1000),
  });
}

function everySecond(overrides: Partial<ScheduleInput> = {}) {
  return normalizeScheduleSpec({ id: 's', cron: '* * * * * *', job: { kind: 'chaos.sched' }, ...overrides });
}

describe('checkScheduleSlots', () => {
  it('allows a skip gap of slots that were due before the late plan, and counts it', () => {
    // Slot 2 was claimed (and the slots after it planned) at 4.5 s: slots 3 and 4 were missed.
    const verdict = checkScheduleSlots({
      schedules: [everySecond()],
      jobs: [run('1', 1, 0.2), run('2', 2, 1.1), run('3', 5, 4.5)],
      claims: [
        { jobId: '1', token: 1, claimedAtMs: T0 + 1100 },
        { jobId: '2', token: 1, claimedAtMs: T0 + 4500 },
      ],
    });
    expect(verdict.violations).toEqual([]);
    expect(verdict).toMatchObject({ gaps: 1, gapsAllowed: 1, missedSlots: 2, slotsRun: 3, plansAtClaim: 2 });
  });

  it('reports a duplicate slot, a slot that was not yet due at its plan, and a run claimed before its slot', () => {
    const verdict = checkScheduleSlots({
      schedules: [everySecond()],
      // Slot 3 planned at 2.2 s has no job though it was still in the future then.
      jobs: [run('1', 1, 0.2), run('2', 2, 1.1), run('9', 2, 1.1), run('3', 4, 2.2)],
      claims: [{ jobId: '2', token: 1, claimedAtMs: T0 + 1900 }],
    });
    const text = verdict.violations.join('\n');
    expect(text).toMatch(/I7 schedule s slot .*: 2 jobs/);
    expect(text).toMatch(/I7 schedule s: slot .* was not yet due/);
    expect(text).toMatch(/I4 schedule s job 2/);
    expect(verdict).toMatchObject({ duplicateSlots: 1, slotsNeverPlanned: 1, runsStartedEarly: 1, gapsNotAllowed: 1 });
  });

  it('judges an early claim against slot + jitter offset, not against the row run_at', () => {
    const schedule = everySecond({ jitterMs: 900, jitterMode: 'per_occurrence' });
    const offsetMs = jitterOffsetMs('s', new Date(T0 + 1000), 900, 'per_occurrence');
    expect(offsetMs).toBeGreaterThan(0);
    const claimAt = (claimedAtMs: number) =>
      checkScheduleSlots({
        schedules: [schedule],
        // The row's run_at says the slot itself; the checker must not trust it.
        jobs: [run('1', 1, 0.2)],
        claims: [{ jobId: '1', token: 1, claimedAtMs }],
      }).runsStartedEarly;
    expect(claimAt(T0 + 1000 + offsetMs - 1)).toBe(1);
    expect(claimAt(T0 + 1000 + offsetMs)).toBe(0);
  });

  it('allows a catch_up gap only beyond the cap or the window', () => {
    const catchUp = (maxCatchUpRuns: number, catchUpWindowMs = 60_000) =>
      everySecond({ misfire: { policy: 'catch_up', maxCatchUpRuns, catchUpWindowMs } });
    // Claimed at 6.5 s: slots 2..6 were missed; 5 and 6 were caught up, 2..4 were not.
    const jobs = [run('1', 1, 0.2), run('2', 5, 6.5), run('3', 6, 6.5), run('4', 7, 6.5)];
    expect(checkScheduleSlots({ schedules: [catchUp(2)], jobs, claims: [] }).violations).toEqual([]);
    const tooFew = checkScheduleSlots({ schedules: [catchUp(10)], jobs, claims: [] });
    expect(tooFew.violations.join('\n')).toMatch(/catch_up.*3 missed slots .* only 2 were caught up/);
    // A 2 s window at 6.5 s reaches back to 4.5 s: slots 2..4 are outside it, so skipping them is right.
    expect(checkScheduleSlots({ schedules: [catchUp(10, 2000)], jobs, claims: [] }).violations).toEqual([]);
    // A cap of 1 with two overdue runs in one plan is a burst over the cap.
    expect(checkScheduleSlots({ schedules: [catchUp(1)], jobs, claims: [] }).catchUpBursts).toBe(1);
  });

  it('reports a skipped slot that was due before the previous run, since nothing was late', () => {
    // Slot 2's run time (2.1 s) comes before slot 1's (2.5 s, a wide per-occurrence jitter): the
    // claim of slot 1 at 2.5 s, on time, skipped slot 2.
    const spec = everySecond({ jitterMs: 2000, jitterMode: 'per_occurrence' });
    const offset = (slotS: number) => jitterOffsetMs('s', new Date(T0 + slotS * 1000), 2000, 'per_occurrence');
    // Find consecutive slots whose run times are out of order for this id.
    const n = Array.from({ length: 50 }, (_, i) => i + 1).find(
      (i) => i * 1000 + offset(i) >= (i + 1) * 1000 + offset(i + 1),
    );
    expect(n).toBeDefined();
    const a = n as number;
    const plannedS = (a * 1000 + offset(a)) / 1000;
    const verdict = checkScheduleSlots({
      schedules: [spec],
      jobs: [run('1', a, a - 1), run('2', a + 2, plannedS)],
      claims: [],
    });
    expect(verdict.violations.join('\n')).toMatch(/before that of the previous run/);
    expect(verdict.slotsOvertaken).toBe(1);
  });

  it('counts a pending run removed by the final pause as the slot it held', () => {
    const verdict = checkScheduleSlots({
      schedules: [everySecond()],
      jobs: [run('1', 1, 0.2), run('3', 3, 2.1)],
      removedByPause: [run('2', 2, 1.1)],
      claims: [],
    });
    expect(verdict.violations).toEqual([]);
    expect(verdict).toMatchObject({ gaps: 0, removedByPause: 1 });
  });

  it('bounds recovery after a kill, and on SQLite reports one across another process pause apart', () => {
    // Worker 1 is killed at 1,000 holding job 1; worker 2 claims it 6,000 ms later (bound 3,500 ms)
    // while worker 3 was paused.
    const history: ChaosHistory = {
      ...base,
      submitted: [{ id: '1', key: 'k1', kind: 'chaos.ok', maxAttempts: 20 }],
      faults: [
        { type: 'kill', at: 1000, pid: 1 },
        { type: 'pause', at: 1500, until: 5000, pid: 3 },
      ],
      ledger: [
        { e: 'start', w: 'a', pid: 1, j: '1', a: 1, t: 1, c: 500, r: 500, s: 500 },
        { e: 'start', w: 'b', pid: 2, j: '1', a: 2, t: 2, c: 7000, r: 500, s: 7000 },
        { e: 'effect', w: 'b', pid: 2, j: '1', t: 2 },
        { e: 'completed', w: 'b', pid: 2, j: '1', t: 2 },
      ],
      jobs: [row('1', { token: 2, attempts: 2 })],
    };
    const postgres = checkChaosRun(history);
    expect(postgres.violations).toEqual([expect.stringMatching(/^I8 job 1 .* claimed again 6000 ms/)]);
    const sqlite = checkChaosRun({ ...history, pauseHoldsEveryWriter: true });
    expect(sqlite.violations).toEqual([]);
    expect(sqlite.figures).toMatchObject({ worstRecoveryDuringRestartMs: 6000, worstRecoveryAfterKillMs: null });
  });
});
