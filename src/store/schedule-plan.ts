/**
 * What both stores do with a schedule's plan: the small amount of glue between the pure policy in
 * `schedule/` (planScheduleRuns) and the rows a store writes. Shared so the PostgreSQL and SQLite
 * stores cannot drift apart on when to plan, what to insert, and which columns move.
 *
 * Invariants the stores keep with it:
 * - `last_slot_at` is the latest slot that ever got a job and only moves forward; planning only
 *   looks at slots after it, so a slot whose job was pruned or parked is never planned again.
 * - Time is always the database's now of the calling transaction (or a pinned one).
 */
import { ValidationError } from '../job/errors.js';
import { describe, integerIn } from '../job/job-spec.js';
import { compileCron } from '../schedule/cron-pattern.js';
import { JITTER_MODES } from '../schedule/jitter.js';
import { type PlannableSchedule, type PlannedRun, planScheduleRuns } from '../schedule/misfire.js';
import {
  MAX_CATCH_UP_RUNS,
  MAX_CATCH_UP_WINDOW_MS,
  MAX_SCHEDULE_JITTER_MS,
  MISFIRE_POLICIES,
  type ScheduleSpec,
  validateScheduleId,
} from '../schedule/schedule.js';
import { validateTimeZone } from '../schedule/time-zone.js';

/** What a store writes after planning one schedule. */
export interface ScheduleAdvance {
  scheduleId: string;
  /** Jobs to insert (missed runs the policy keeps, then the next run), earliest slot first. */
  runs: PlannedRun[];
  /** The new last_slot_at: the latest slot in `runs`, or null to keep the stored one. */
  lastSlotAt: Date | null;
  /** The pending next run's slot and run time; null when the pattern has no later match. */
  nextSlotAt: Date | null;
  nextRunAt: Date | null;
}

/**
 * Re-checks the fields a store plans with, so a spec that skipped `normalizeScheduleSpec` is
 * refused with a ValidationError naming the field before anything is written.
 */
export function assertPlannableSpec(spec: ScheduleSpec): void {
  validateScheduleId(spec.id);
  compileCron(spec.cron);
  validateTimeZone(spec.timeZone);
  integerIn('jitterMs', spec.jitterMs, 0, MAX_SCHEDULE_JITTER_MS);
  if (!(JITTER_MODES as readonly string[]).includes(spec.jitterMode)) {
    throw new ValidationError(
      'jitterMode',
      `must be one of ${JITTER_MODES.join(', ')}, got ${describe(spec.jitterMode)}`,
    );
  }
  const misfire = spec.misfire;
  if (!(MISFIRE_POLICIES as readonly string[]).includes(misfire?.policy)) {
    throw new ValidationError(
      'misfire.policy',
      `must be one of ${MISFIRE_POLICIES.join(', ')}, got ${describe(misfire?.policy)}`,
    );
  }
  integerIn('misfire.catchUpWindowMs', misfire.catchUpWindowMs, 1, MAX_CATCH_UP_WINDOW_MS);
  integerIn('misfire.maxCatchUpRuns', misfire.maxCatchUpRuns, 1, MAX_CATCH_UP_RUNS);
}

/** True when a replace changes which instants the schedule runs at, so its pending run is re-planned. */
export function timingChanged(before: PlannableSchedule, after: PlannableSchedule): boolean {
  return (
    before.cron !== after.cron ||
    before.timeZone !== after.timeZone ||
    before.jitterMs !== after.jitterMs ||
    before.jitterMode !== after.jitterMode
  );
}

/**
 * Plans a schedule from `lastSlotAt` (the latest slot with a job, or now for a schedule that
 * starts afresh) and turns the plan into the rows to write.
 */
export function advanceSchedule(
  schedule: PlannableSchedule,
  lastSlotAt: Date,
  now: Date,
  lastSlotRunsNow: boolean,
): ScheduleAdvance {
  const plan = planScheduleRuns({ schedule, lastSlotAt, now, lastSlotRunsNow });
  const runs = plan.next === null ? plan.runs : [...plan.runs, plan.next];
  return {
    scheduleId: schedule.id,
    runs,
    lastSlotAt: runs.at(-1)?.slot ?? null,
    nextSlotAt: plan.next?.slot ?? null,
    nextRunAt: plan.next?.runAt ?? null,
  };
}

/** A claimed job's schedule facts, as a claim transaction reads them under the schedule's lock. */
export interface ClaimedRunContext {
  /** The schedule row, or null when it was deleted. */
  schedule: (PlannableSchedule & { paused: boolean; lastSlotAt: Date | null }) | null;
  slot: Date | null;
  /** The job's attempts after this claim. */
  attempts: number;
  /** How many attempt errors the job carries. */
  errorCount: number;
}

/**
 * What a claim does about one claimed recurring run:
 * - `plan`: it is the schedule's latest run, so the next run is planned now (the design's rule).
 * - `keep`: hand it out and plan nothing (an older run: catch-up, retry, or a lapsed lease).
 * - `drop`: delete it instead of handing it out. Its schedule was paused or deleted, and it never
 *   started (first attempt, no error): pausing deletes exactly such runs, and this one escaped the
 *   pause only because this claim held its row lock at that moment (PostgreSQL's SKIP LOCKED).
 */
export function decideClaimedRun(
  context: ClaimedRunContext,
  now: Date,
): { action: 'plan'; advance: ScheduleAdvance } | { action: 'keep' } | { action: 'drop' } {
  const { schedule, slot } = context;
  if (schedule === null || schedule.paused) {
    return context.attempts === 1 && context.errorCount === 0 ? { action: 'drop' } : { action: 'keep' };
  }
  if (slot === null) return { action: 'keep' };
  if (schedule.lastSlotAt !== null && slot.getTime() < schedule.lastSlotAt.getTime()) return { action: 'keep' };
  return { action: 'plan', advance: advanceSchedule(schedule, slot, now, true) };
}
