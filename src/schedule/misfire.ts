/**
 * The misfire policy: which runs to enqueue when a schedule's next job is planned, given the
 * last slot that already has a job and the database's now.
 *
 * A slot is missed when its run time (slot plus jitter offset) is at or before now and no job was
 * ever enqueued for it. A job already in the table always runs, late if need be (durable
 * acceptance); the policy only decides about slots that have no job:
 * - `skip` (default): none of the missed slots run; only the next slot is enqueued.
 * - `run_once`: one run for all missed slots, for the latest of them, due at once, plus the next.
 *   On the claim path the late job that is starting is that one run, so nothing is added.
 * - `catch_up`: each missed slot no older than catchUpWindowMs, at most maxCatchUpRuns of them
 *   (the latest), plus the next. Never an unbounded burst, however long nothing ran.
 * Pure: no clock, no store. The cost is bounded by the cap and by the slots inside one jitter
 * window, never by how long nothing ran.
 */
import { jitterOffsetMs, runAtForSlot } from './jitter.js';
import { nextSlotAfter, previousSlotBefore } from './next-slot.js';
import type { ScheduleSpec } from './schedule.js';

/** One run of a schedule: the slot it fills (the unique key with the schedule id) and when it may start. */
export interface PlannedRun {
  slot: Date;
  runAt: Date;
}

/** What to enqueue now: `runs` for missed slots (earliest first) and the `next` future run. */
export interface MisfirePlan {
  runs: PlannedRun[];
  /** The first slot whose run time is after now; null when the pattern has no later match. */
  next: PlannedRun | null;
  /** True when at least one slot was missed (whether or not the policy runs it). */
  missed: boolean;
}

/** The fields of a schedule that planning reads. */
export type PlannableSchedule = Pick<ScheduleSpec, 'id' | 'cron' | 'timeZone' | 'jitterMs' | 'jitterMode' | 'misfire'>;

/** Inputs to {@link planScheduleRuns}. */
export interface MisfireInput {
  schedule: PlannableSchedule;
  /**
   * The latest slot that already has a job; for a schedule with none yet, the instant it was
   * created (or resumed). Only slots after it are planned.
   */
  lastSlotAt: Date;
  /** The database's now. */
  now: Date;
  /** True on the claim path: the job for lastSlotAt is starting now, so run_once adds nothing. */
  lastSlotRunsNow?: boolean;
}

// Slots inside one jitter window are checked one by one; past this many (a per-second pattern
// with a long window) the rest are treated as missed rather than scanned, bounding the work.
const MAX_JITTER_WINDOW_SCAN = 10_000;

/** The run of a schedule for `slot`: the slot plus its jitter offset. */
export function plannedRun(schedule: PlannableSchedule, slot: Date): PlannedRun {
  return {
    slot,
    runAt: runAtForSlot(slot, jitterOffsetMs(schedule.id, slot, schedule.jitterMs, schedule.jitterMode)),
  };
}

/** Applies the schedule's misfire policy: the runs to enqueue now, and the next run. */
export function planScheduleRuns(input: MisfireInput): MisfirePlan {
  const { schedule, lastSlotAt, now } = input;
  const nowMs = now.getTime();
  // A slot at or before now - jitterMs is missed whatever its offset (offsets are < jitterMs);
  // only the slots after this boundary need their own run time compared with now.
  const boundary = new Date(Math.max(lastSlotAt.getTime(), nowMs - schedule.jitterMs));
  const recentMissed: PlannedRun[] = [];
  // With per-occurrence jitter wider than the spacing, a later slot can fall due before the run
  // being claimed. Such a slot was overtaken, not missed: nothing was late, so it runs (due at
  // once) whatever the misfire policy.
  const overtaken: PlannedRun[] = [];
  const claimedRunAtMs = input.lastSlotRunsNow ? plannedRun(schedule, lastSlotAt).runAt.getTime() : Number.NaN;
  let candidate = nextSlotAfter(schedule, boundary);
  let next: PlannedRun | null = null;
  while (candidate !== null) {
    const run = plannedRun(schedule, candidate);
    if (run.runAt.getTime() > nowMs) {
      next = run;
      break;
    }
    if (run.runAt.getTime() <= claimedRunAtMs) {
      overtaken.push(run);
      candidate = nextSlotAfter(schedule, candidate);
      continue;
    }
    recentMissed.push(run);
    if (recentMissed.length >= MAX_JITTER_WINDOW_SCAN) {
      // Every slot after now has a run time after now, so this is a valid next run.
      const afterNow = nextSlotAfter(schedule, now);
      next = afterNow === null ? null : plannedRun(schedule, afterNow);
      break;
    }
    candidate = nextSlotAfter(schedule, candidate);
  }

  // The latest missed slot at or before the boundary, found without walking the whole outage.
  const olderMissed = (before: Date, notBefore: Date): Date | null =>
    previousSlotBefore(schedule, before, new Date(Math.max(lastSlotAt.getTime(), notBefore.getTime())));
  const justAfterBoundary = new Date(boundary.getTime() + 1);
  const missed = recentMissed.length > 0 || olderMissed(justAfterBoundary, lastSlotAt) !== null;

  const { misfire } = schedule;
  if (!missed || misfire.policy === 'skip') return { runs: overtaken, next, missed };

  if (misfire.policy === 'run_once') {
    if (input.lastSlotRunsNow) return { runs: overtaken, next, missed };
    const latest = recentMissed.at(-1) ?? plannedRun(schedule, olderMissed(justAfterBoundary, lastSlotAt) as Date);
    return { runs: [...overtaken, latest], next, missed };
  }

  // catch_up: the latest maxCatchUpRuns missed slots no older than the window.
  const windowStartMs = nowMs - misfire.catchUpWindowMs;
  const runs = recentMissed.filter((run) => run.slot.getTime() >= windowStartMs).slice(-misfire.maxCatchUpRuns);
  if (runs.length < misfire.maxCatchUpRuns) {
    const floor = new Date(Math.max(lastSlotAt.getTime(), windowStartMs - 1));
    runs.unshift(...olderMissedSlots(schedule, floor, justAfterBoundary, misfire.maxCatchUpRuns - runs.length));
  }
  return { runs: [...overtaken, ...runs].sort((a, b) => a.slot.getTime() - b.slot.getTime()), next, missed };
}

/**
 * The latest `count` slots in (floor, before), earliest first. Reads forward from a guess two
 * spacings per slot back, which on a regular pattern finds them all in about 2 x count look-ups;
 * it bisects backwards one slot at a time only for what the guess did not reach.
 */
function olderMissedSlots(schedule: PlannableSchedule, floor: Date, before: Date, count: number): PlannedRun[] {
  const latest = previousSlotBefore(schedule, before, floor);
  if (latest === null) return [];
  const previous = previousSlotBefore(schedule, latest, floor);
  if (previous === null) return [plannedRun(schedule, latest)];
  const spacingMs = latest.getTime() - previous.getTime();
  const guess = new Date(Math.max(floor.getTime(), latest.getTime() - 2 * spacingMs * count));
  let found: Date[] = [];
  let scanned = 0;
  for (let slot = nextSlotAfter(schedule, guess); slot !== null && slot.getTime() <= latest.getTime(); ) {
    found.push(slot);
    if (found.length > count) found.shift();
    // An irregular pattern (dense slots before sparse ones) can defeat the guess; bound the scan
    // and fall back to bisecting from the latest slot.
    if (++scanned > 4 * count + 8) {
      found = [latest];
      break;
    }
    slot = nextSlotAfter(schedule, slot);
  }
  while (found.length < count) {
    const earliest = found[0];
    const slot = earliest === undefined ? null : previousSlotBefore(schedule, earliest, floor);
    if (slot === null) break;
    found.unshift(slot);
  }
  return found.map((slot) => plannedRun(schedule, slot));
}
