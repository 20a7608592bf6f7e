import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type MisfireInput, plannedRun, planScheduleRuns } from '../../src/schedule/misfire.js';
import { nextSlotAfter, slotsBetween } from '../../src/schedule/next-slot.js';
import { DEFAULT_MISFIRE_POLICY, type MisfirePolicy, normalizeScheduleSpec } from '../../src/schedule/schedule.js';

const at = (iso: string) => new Date(`2026-06-01T${iso}Z`);
const iso = (dates: readonly { slot: Date }[]) => dates.map((run) => run.slot.toISOString().slice(11, 19));

function hourly(misfire: Partial<MisfirePolicy> = {}, extra: Record<string, unknown> = {}) {
  return normalizeScheduleSpec({ id: 'hourly', cron: '0 * * * *', job: { kind: 'k' }, misfire, ...extra });
}

describe('planScheduleRuns after five hours with nothing running (last slot 10:00, now 15:20)', () => {
  const lastSlotAt = at('10:00:00');
  const now = at('15:20:00');

  it.each([
    { name: 'skip enqueues none of the missed slots', misfire: {}, runsNow: false, expected: [] },
    {
      name: 'run_once enqueues the latest missed slot',
      misfire: { policy: 'run_once' },
      runsNow: false,
      expected: ['15:00:00'],
    },
    {
      name: 'run_once adds nothing when the late job for the last slot is starting now',
      misfire: { policy: 'run_once' },
      runsNow: true,
      expected: [],
    },
    {
      name: 'catch_up enqueues each missed slot inside the window',
      misfire: { policy: 'catch_up', catchUpWindowMs: 2.5 * 3_600_000 },
      runsNow: false,
      expected: ['13:00:00', '14:00:00', '15:00:00'],
    },
    {
      name: 'catch_up enqueues at most maxCatchUpRuns, the latest',
      misfire: { policy: 'catch_up', catchUpWindowMs: 10 * 3_600_000, maxCatchUpRuns: 2 },
      runsNow: false,
      expected: ['14:00:00', '15:00:00'],
    },
    {
      name: 'catch_up counts a slot exactly at the window start as inside it',
      misfire: { policy: 'catch_up', catchUpWindowMs: 3 * 3_600_000 + 20 * 60_000 },
      runsNow: true,
      expected: ['12:00:00', '13:00:00', '14:00:00', '15:00:00'],
    },
  ] as const)('$name', ({ misfire, runsNow, expected }) => {
    const plan = planScheduleRuns({ schedule: hourly(misfire), lastSlotAt, now, lastSlotRunsNow: runsNow });
    expect(iso(plan.runs)).toEqual(expected);
    expect(plan.runs.every((run) => run.runAt.getTime() === run.slot.getTime())).toBe(true);
    expect(plan.next?.slot.toISOString()).toBe('2026-06-01T16:00:00.000Z');
    expect(plan.missed).toBe(true);
  });
});

describe('planScheduleRuns when nothing was missed', () => {
  it.each(['skip', 'run_once', 'catch_up'] as const)(
    '%s only enqueues the next slot after an on-time claim',
    (policy) => {
      const plan = planScheduleRuns({
        schedule: hourly({ policy }),
        lastSlotAt: at('15:00:00'),
        now: at('15:00:00.050'),
        lastSlotRunsNow: true,
      });
      expect(plan).toEqual({ runs: [], next: { slot: at('16:00:00'), runAt: at('16:00:00') }, missed: false });
    },
  );

  it('plans the first slot after creation without counting earlier slots as missed', () => {
    const plan = planScheduleRuns({
      schedule: hourly({ policy: 'run_once' }),
      lastSlotAt: at('15:20:00'),
      now: at('15:20:00'),
    });
    expect(plan).toEqual({ runs: [], next: { slot: at('16:00:00'), runAt: at('16:00:00') }, missed: false });
  });

  it('treats a slot whose jittered run time is still ahead as the next run, not as missed', () => {
    const schedule = normalizeScheduleSpec({
      id: 'jittered',
      cron: '* * * * *',
      job: { kind: 'k' },
      jitterMs: 90_000,
      jitterMode: 'stable',
    });
    const offsetMs = plannedRun(schedule, at('15:00:00')).runAt.getTime() - at('15:00:00').getTime();
    // A claim of the 15:00 run at its run time: 15:01 may lie before that instant (jitter > interval).
    const plan = planScheduleRuns({
      schedule,
      lastSlotAt: at('15:00:00'),
      now: new Date(at('15:00:00').getTime() + offsetMs),
      lastSlotRunsNow: true,
    });
    expect(offsetMs).toBeGreaterThan(0);
    expect(plan.next?.slot.getTime()).toBeGreaterThan(at('15:00:00').getTime());
    expect(plan.next && plan.next.runAt.getTime() > at('15:00:00').getTime() + offsetMs).toBe(true);
  });
});

describe('planScheduleRuns across a daylight-saving transition', () => {
  const schedule = (misfire: Partial<MisfirePolicy>) =>
    normalizeScheduleSpec({
      id: 'ny',
      cron: '*/30 * * * *',
      timeZone: 'America/New_York',
      job: { kind: 'k' },
      misfire,
    });
  const lastSlotAt = new Date('2026-11-01T04:30:00Z'); // 00:30 EDT
  const now = new Date('2026-11-01T06:40:00Z'); // 01:40 EST, after both passes through 01:00-01:59

  it('run_once runs the latest missed slot, the second 01:30', () => {
    const plan = planScheduleRuns({ schedule: schedule({ policy: 'run_once' }), lastSlotAt, now });
    expect(plan.runs.map((run) => run.slot.toISOString())).toEqual(['2026-11-01T06:30:00.000Z']);
    expect(plan.next?.slot.toISOString()).toBe('2026-11-01T07:00:00.000Z');
  });

  it('catch_up runs both passes through the repeated hour that lie in the window', () => {
    const plan = planScheduleRuns({
      schedule: schedule({ policy: 'catch_up', catchUpWindowMs: 90 * 60_000 }),
      lastSlotAt,
      now,
    });
    expect(plan.runs.map((run) => run.slot.toISOString())).toEqual([
      '2026-11-01T05:30:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T06:30:00.000Z',
    ]);
  });
});

describe('planScheduleRuns never bursts', () => {
  it('catches up at most maxCatchUpRuns after a week of a per-second schedule', () => {
    const schedule = normalizeScheduleSpec({
      id: 'every-second',
      cron: '* * * * * *',
      job: { kind: 'k' },
      misfire: { policy: 'catch_up', catchUpWindowMs: 7 * 24 * 3_600_000, maxCatchUpRuns: 1000 },
    });
    const now = at('12:00:00.500');
    const started = performance.now();
    const plan = planScheduleRuns({ schedule, lastSlotAt: new Date(now.getTime() - 7 * 24 * 3_600_000), now });
    const elapsedMs = performance.now() - started;
    console.log(
      `catch_up over a week of per-second slots: ${plan.runs.length} runs planned in ${elapsedMs.toFixed(0)} ms`,
    );
    expect(plan.runs).toHaveLength(1000);
    expect(plan.runs[0]?.slot.toISOString()).toBe('2026-06-01T11:43:21.000Z');
    expect(plan.runs.at(-1)?.slot.toISOString()).toBe('2026-06-01T12:00:00.000Z');
    expect(plan.next?.slot.toISOString()).toBe('2026-06-01T12:00:01.000Z');
  });

  it('agrees with a brute-force oracle for every policy, jitter mode and outage', () => {
    // The oracle walks every slot from lastSlotAt; the plan must pick the same ones without walking.
    const base = Date.parse('2026-03-07T00:00:00Z');
    fc.assert(
      fc.property(
        fc.constantFrom('*/15 * * * *', '0 * * * *', '30 2 * * *', '0,30 1,2 * * *'),
        fc.constantFrom('UTC', 'America/New_York', 'Australia/Lord_Howe'),
        fc.constantFrom(0, 60_000, 20 * 60_000, 40 * 60_000),
        fc.constantFrom('stable', 'per_occurrence'),
        fc.record({
          policy: fc.constantFrom('skip', 'run_once', 'catch_up'),
          catchUpWindowMs: fc.integer({ min: 1, max: 24 * 3_600_000 }),
          maxCatchUpRuns: fc.integer({ min: 1, max: 20 }),
        }),
        fc.integer({ min: 0, max: 3 * 24 * 3_600_000 }),
        fc.integer({ min: 0, max: 26 * 3_600_000 }),
        fc.boolean(),
        (cron, timeZone, jitterMs, jitterMode, misfire, startMs, outageMs, lastSlotRunsNow) => {
          const { policy, catchUpWindowMs, maxCatchUpRuns } = misfire;
          const schedule = normalizeScheduleSpec({
            id: 'oracle',
            cron,
            timeZone,
            job: { kind: 'k' },
            jitterMs,
            jitterMode,
            misfire: policy === 'catch_up' ? { policy, catchUpWindowMs, maxCatchUpRuns } : { policy },
          });
          const input: MisfireInput = {
            schedule,
            lastSlotAt: new Date(base + startMs),
            now: new Date(base + startMs + outageMs),
            lastSlotRunsNow,
          };
          const plan = planScheduleRuns(input);

          // Every slot after now + jitterMs runs after now, so the first of them closes the list.
          const horizon = new Date(input.now.getTime() + jitterMs);
          const all = slotsBetween(schedule, input.lastSlotAt, horizon, 10_000);
          const beyond = nextSlotAfter(schedule, horizon);
          if (beyond) all.push(beyond);
          const runsInOrder = all.map((slot) => plannedRun(schedule, slot));
          const firstFuture = runsInOrder.findIndex((run) => run.runAt.getTime() > input.now.getTime());
          const due = runsInOrder.slice(0, firstFuture);
          // The documented rule, written out plainly: on the claim path a slot is missed when it
          // lies within the claimed run's wait of the claimed slot and the claimed run did not
          // overtake it; elsewhere when its run time passed.
          const claimed = plannedRun(schedule, input.lastSlotAt);
          const waitedMs = Math.max(0, input.now.getTime() - claimed.runAt.getTime());
          const isMissed = (run: { slot: Date; runAt: Date }) =>
            lastSlotRunsNow
              ? run.slot.getTime() <= input.lastSlotAt.getTime() + waitedMs &&
                run.runAt.getTime() > claimed.runAt.getTime()
              : run.runAt.getTime() <= input.now.getTime();
          const missed = due.filter(isMissed);
          const late = due.filter((run) => !isMissed(run));
          let kept = missed;
          if (policy === 'skip') kept = [];
          if (policy === 'run_once') kept = lastSlotRunsNow ? [] : missed.slice(-1);
          if (policy === 'catch_up') {
            kept = missed
              .filter((run) => run.slot.getTime() >= input.now.getTime() - catchUpWindowMs)
              .slice(-maxCatchUpRuns);
          }
          const expected = [...late, ...kept].sort((a, b) => a.slot.getTime() - b.slot.getTime());
          expect(plan.runs).toEqual(expected);
          expect(plan.next).toEqual(runsInOrder[firstFuture]);
          expect(plan.missed).toBe(missed.length > 0);
        },
      ),
      { seed: 20260303, numRuns: 200 },
    );
  });

  it('uses the documented default policy', () => {
    expect(DEFAULT_MISFIRE_POLICY).toEqual({ policy: 'skip', catchUpWindowMs: 3_600_000, maxCatchUpRuns: 10 });
  });
});
