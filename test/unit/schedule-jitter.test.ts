import { describe, expect, it } from 'vitest';
import { normalizeSubmit } from '../../src/job/job-spec.js';
import { seededRandom } from '../../src/retry/random.js';
import { jitterOffsetMs, runAtForSlot } from '../../src/schedule/jitter.js';
import { plannedRun } from '../../src/schedule/misfire.js';
import { nextSlotAfter } from '../../src/schedule/next-slot.js';
import { normalizeScheduleSpec } from '../../src/schedule/schedule.js';

const slot = new Date('2026-06-01T09:00:00Z');

/** The largest number of run times that fall in one wall-clock second. */
function worstSecond(runAts: readonly Date[]): number {
  const perSecond = new Map<number, number>();
  for (const runAt of runAts) {
    const second = Math.floor(runAt.getTime() / 1000);
    perSecond.set(second, (perSecond.get(second) ?? 0) + 1);
  }
  return Math.max(...perSecond.values());
}

describe('jitterOffsetMs', () => {
  it('is zero without a window', () => {
    expect(jitterOffsetMs('a', slot, 0, 'stable')).toBe(0);
    expect(jitterOffsetMs('a', slot, 0, 'per_occurrence')).toBe(0);
  });

  it('stable: the same offset for every slot of a schedule, and the same in every process and release', () => {
    const offsets = new Set(
      Array.from({ length: 50 }, (_, hour) =>
        jitterOffsetMs('nightly-report', new Date(slot.getTime() + hour * 3_600_000), 60_000, 'stable'),
      ),
    );
    expect(offsets.size).toBe(1);
    // Pinned: a change to the hash would move every stable schedule's run time on upgrade.
    expect(jitterOffsetMs('nightly-report', slot, 60_000, 'stable')).toBe(16_664);
  });

  it('per_occurrence: differs between slots, yet every process computes the same offset for a slot', () => {
    const offsets = Array.from({ length: 50 }, (_, hour) =>
      jitterOffsetMs('nightly-report', new Date(slot.getTime() + hour * 3_600_000), 60_000, 'per_occurrence'),
    );
    expect(new Set(offsets).size).toBeGreaterThan(40);
    expect(offsets[0]).toBe(39_649);
  });

  it.each(['stable', 'per_occurrence'] as const)(
    '%s: spreads uniformly over [0, jitterMs), never before the slot',
    (mode) => {
      const jitterMs = 60_000;
      const buckets = new Array<number>(60).fill(0);
      const outOfRange: number[] = [];
      for (let i = 0; i < 60_000; i++) {
        const id = mode === 'stable' ? `schedule-${i}` : 'one-schedule';
        const offset = jitterOffsetMs(id, new Date(slot.getTime() + i * 60_000), jitterMs, mode);
        if (!(offset >= 0 && offset < jitterMs && Number.isInteger(offset))) outOfRange.push(offset);
        buckets[Math.floor(offset / 1000)] = (buckets[Math.floor(offset / 1000)] ?? 0) + 1;
      }
      expect(outOfRange).toEqual([]);
      // 1000 expected per one-second bucket; chi-square with 59 degrees of freedom stays under
      // 100 with probability > 0.999 for a uniform source, and the input here is fixed.
      const chiSquare = buckets.reduce((sum, count) => sum + (count - 1000) ** 2 / 1000, 0);
      expect(chiSquare).toBeLessThan(100);
    },
  );

  it('runAtForSlot adds the offset to the slot', () => {
    expect(runAtForSlot(slot, 1234).toISOString()).toBe('2026-06-01T09:00:01.234Z');
  });
});

describe("the design's spike figure: 10,000 jobs due on one second", () => {
  const seed = 36;

  it('one-off jobs: worst second ~ 10000/60 with a 60 s window, against 10,000 without', () => {
    const random = seededRandom(seed);
    const plain = Array.from(
      { length: 10_000 },
      () => normalizeSubmit({ kind: 'k', runAt: slot }, random).runAt as Date,
    );
    const spread = Array.from(
      { length: 10_000 },
      () => normalizeSubmit({ kind: 'k', runAt: slot, jitterMs: 60_000 }, random).runAt as Date,
    );
    const worstPlain = worstSecond(plain);
    const worstSpread = worstSecond(spread);
    console.log(
      `spike (seed ${seed}): 10,000 one-off jobs, worst second ${worstPlain} without jitter, ${worstSpread} with 60 s jitter`,
    );
    expect(worstPlain).toBe(10_000);
    expect(worstSpread).toBeGreaterThanOrEqual(Math.ceil(10_000 / 60));
    expect(worstSpread).toBeLessThanOrEqual(260);
    expect(
      spread.every((runAt) => runAt.getTime() >= slot.getTime() && runAt.getTime() < slot.getTime() + 60_000),
    ).toBe(true);
  });

  it('10,000 hourly schedules with a stable 60 s window: the same spread, every hour', () => {
    const schedules = Array.from({ length: 10_000 }, (_, i) =>
      normalizeScheduleSpec({ id: `tenant-${i}.hourly`, cron: '0 * * * *', job: { kind: 'k' }, jitterMs: 60_000 }),
    );
    const firstSlot = nextSlotAfter(
      schedules[0] ?? { cron: '0 * * * *', timeZone: 'UTC' },
      new Date(slot.getTime() - 1),
    );
    expect(firstSlot?.toISOString()).toBe(slot.toISOString());
    const runAts = schedules.map((schedule) => plannedRun(schedule, slot).runAt);
    const nextHour = schedules.map((schedule) => plannedRun(schedule, new Date(slot.getTime() + 3_600_000)).runAt);
    const worst = worstSecond(runAts);
    console.log(`spike: 10,000 hourly schedules, worst second ${worst} with a stable 60 s window`);
    expect(worst).toBeGreaterThanOrEqual(Math.ceil(10_000 / 60));
    expect(worst).toBeLessThanOrEqual(260);
    expect(nextHour.map((runAt) => runAt.getTime() - 3_600_000)).toEqual(runAts.map((runAt) => runAt.getTime()));
  });
});
