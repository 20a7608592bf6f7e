/**
 * A schedule's progress columns as planning moves them (src/store/schedule-plan.ts): `lastSlotAt`
 * is the latest slot that has started or was enqueued already due, never the pending future slot,
 * and planning continues from the latest slot with a job (the next slot, else the last one).
 */
import { describe, expect, it } from 'vitest';
import { normalizeScheduleSpec } from '../../src/schedule/schedule.js';
import { advanceSchedule, decideClaimedRun, plannedThroughSlotAt } from '../../src/store/schedule-plan.js';

const at = (time: string) => new Date(`2026-06-01T${time}Z`);

function hourly(misfire: Record<string, unknown> = {}) {
  return normalizeScheduleSpec({ id: 'hourly', cron: '0 * * * *', job: { kind: 'k' }, misfire });
}

describe('advanceSchedule progress', () => {
  it('leaves the last slot alone when a new schedule enqueues its first, future run', () => {
    const advance = advanceSchedule(hourly(), at('10:20:00'), at('10:20:00'), false);
    expect(advance).toMatchObject({ lastSlotAt: null, nextSlotAt: at('11:00:00'), nextRunAt: at('11:00:00') });
    expect(advance.runs.map((run) => run.slot)).toEqual([at('11:00:00')]);
  });

  it('makes the claimed slot the last slot when its claim plans the next run', () => {
    const advance = advanceSchedule(hourly(), at('11:00:00'), at('11:00:00.040'), true);
    expect(advance).toMatchObject({ lastSlotAt: at('11:00:00'), nextSlotAt: at('12:00:00') });
  });

  it('makes the latest caught-up run the last slot, since it was enqueued already due', () => {
    const schedule = hourly({ policy: 'catch_up', catchUpWindowMs: 3 * 3_600_000 });
    const advance = advanceSchedule(schedule, at('10:00:00'), at('13:30:00'), true);
    expect(advance.runs.map((run) => run.slot)).toEqual([
      at('11:00:00'),
      at('12:00:00'),
      at('13:00:00'),
      at('14:00:00'),
    ]);
    expect(advance).toMatchObject({ lastSlotAt: at('13:00:00'), nextSlotAt: at('14:00:00') });
  });

  it('keeps the last slot when a repair re-plans after a cancelled run and skips the gap', () => {
    const advance = advanceSchedule(hourly(), at('11:00:00'), at('13:30:00'), false);
    expect(advance).toMatchObject({ lastSlotAt: null, nextSlotAt: at('14:00:00') });
  });
});

describe('plannedThroughSlotAt and decideClaimedRun', () => {
  it('continues from the pending next slot, or from the last slot when there is none', () => {
    expect(plannedThroughSlotAt({ lastSlotAt: at('10:00:00'), nextSlotAt: at('11:00:00') })).toEqual(at('11:00:00'));
    expect(plannedThroughSlotAt({ lastSlotAt: at('10:00:00'), nextSlotAt: null })).toEqual(at('10:00:00'));
    expect(plannedThroughSlotAt({ lastSlotAt: null, nextSlotAt: null })).toBeNull();
  });

  it('plans at the claim of the pending next run and keeps an older run without planning', () => {
    const schedule = { ...hourly(), paused: false, lastSlotAt: at('10:00:00'), nextSlotAt: at('11:00:00') };
    const context = { schedule, attempts: 1, errorCount: 0 };
    expect(decideClaimedRun({ ...context, slot: at('11:00:00') }, at('11:00:01'))).toMatchObject({ action: 'plan' });
    expect(decideClaimedRun({ ...context, slot: at('10:00:00') }, at('11:00:01'))).toEqual({ action: 'keep' });
  });

  it('drops a never-started run of a paused schedule', () => {
    const schedule = { ...hourly(), paused: true, lastSlotAt: at('10:00:00'), nextSlotAt: null };
    expect(decideClaimedRun({ schedule, slot: at('11:00:00'), attempts: 1, errorCount: 0 }, at('11:00:01'))).toEqual({
      action: 'drop',
    });
  });
});
