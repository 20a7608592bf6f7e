/**
 * The schedule decisions both stores write (src/store/schedule-plan.ts): which claimed recurring
 * runs plan their schedule's next run, are kept or are dropped (planClaimedRuns), and what a
 * schedule upsert deletes, pauses and plans (planUpsert).
 */
import { describe, expect, it } from 'vitest';
import { normalizeScheduleSpec } from '../../src/schedule/schedule.js';
import { type ClaimedRun, claimedScheduleIds, planClaimedRuns, planUpsert } from '../../src/store/schedule-plan.js';

const at = (time: string) => new Date(`2026-06-01T${time}Z`);

function hourly(input: Record<string, unknown> = {}) {
  return normalizeScheduleSpec({ id: 'hourly', cron: '0 * * * *', job: { kind: 'k' }, ...input });
}

function stored(progress: { lastSlotAt: Date | null; nextSlotAt: Date | null }, paused = false) {
  return { ...hourly(), paused, ...progress };
}

function run(id: string, slot: string | null, scheduleId: string | null = 'hourly', attempts = 1): ClaimedRun {
  return { id, scheduleId, scheduleSlot: slot === null ? null : at(slot), attempts, errors: [] };
}

describe('claimedScheduleIds', () => {
  it('names each schedule of the claimed recurring runs once, and ignores one-off jobs', () => {
    const jobs = [run('1', '11:00:00'), run('2', null, null), run('3', '10:00:00'), run('4', '11:00:00', 'daily')];
    expect(claimedScheduleIds(jobs)).toEqual(['hourly', 'daily']);
  });
});

describe('planClaimedRuns', () => {
  it('plans the next run when the claimed run is its schedule’s latest', () => {
    const schedules = new Map([['hourly', stored({ lastSlotAt: at('10:00:00'), nextSlotAt: at('11:00:00') })]]);
    const plan = planClaimedRuns([run('1', '11:00:00')], schedules, at('11:00:01'));
    expect(plan.dropped).toEqual(new Set());
    expect(plan.advances).toHaveLength(1);
    expect(plan.advances[0]).toMatchObject({
      scheduleId: 'hourly',
      lastSlotAt: at('11:00:00'),
      nextSlotAt: at('12:00:00'),
    });
  });

  it('plans once for two runs of one schedule: the later run sees the schedule already advanced', () => {
    const schedules = new Map([['hourly', stored({ lastSlotAt: at('09:00:00'), nextSlotAt: at('11:00:00') })]]);
    // Given out of slot order: planning walks them earliest slot first.
    const jobs = [run('2', '11:00:00'), run('1', '10:00:00')];
    const plan = planClaimedRuns(jobs, schedules, at('11:00:01'));
    expect(plan.advances.map((advance) => advance.nextSlotAt)).toEqual([at('12:00:00')]);
    expect(plan.dropped).toEqual(new Set());
  });

  it('drops a never-started run of a paused or deleted schedule, and keeps a retried one', () => {
    const schedules = new Map([
      ['hourly', stored({ lastSlotAt: at('10:00:00'), nextSlotAt: null }, true)],
      ['gone', null],
    ]);
    const jobs = [run('1', '11:00:00'), run('2', '11:00:00', 'gone'), run('3', '10:00:00', 'gone', 2)];
    const plan = planClaimedRuns(jobs, schedules, at('11:00:01'));
    expect(plan.dropped).toEqual(new Set(['1', '2']));
    expect(plan.advances).toEqual([]);
  });

  it('plans nothing for one-off jobs', () => {
    expect(planClaimedRuns([run('1', null, null)], new Map(), at('11:00:00'))).toEqual({
      advances: [],
      dropped: new Set(),
    });
  });
});

describe('planUpsert', () => {
  const now = at('10:20:00');

  it('plans a new active schedule afresh from now, and a new paused one not at all', () => {
    const created = planUpsert(null, hourly(), now);
    expect(created).toMatchObject({ deleteUnstartedRuns: false, pause: false });
    expect(created.advance?.runs.map((r) => r.slot)).toEqual([at('11:00:00')]);
    expect(planUpsert(null, hourly({ paused: true }), now)).toEqual({
      deleteUnstartedRuns: false,
      pause: false,
      advance: null,
    });
  });

  it('pauses a replaced schedule and deletes its unstarted runs', () => {
    expect(planUpsert(stored({ lastSlotAt: null, nextSlotAt: at('11:00:00') }), hourly({ paused: true }), now)).toEqual(
      {
        deleteUnstartedRuns: true,
        pause: true,
        advance: null,
      },
    );
  });

  it('keeps the pending run of a replace with the same timing, and re-plans on a timing change or a resume', () => {
    const before = stored({ lastSlotAt: null, nextSlotAt: at('11:00:00') });
    expect(planUpsert(before, hourly({ job: { kind: 'other' } }), now)).toEqual({
      deleteUnstartedRuns: false,
      pause: false,
      advance: null,
    });
    const retimed = planUpsert(before, hourly({ cron: '30 * * * *' }), now);
    expect(retimed).toMatchObject({ deleteUnstartedRuns: true, pause: false });
    expect(retimed.advance?.nextSlotAt).toEqual(at('10:30:00'));
    const resumed = planUpsert({ ...before, paused: true }, hourly(), now);
    expect(resumed).toMatchObject({ deleteUnstartedRuns: true, pause: false });
    expect(resumed.advance?.nextSlotAt).toEqual(at('11:00:00'));
  });
});
