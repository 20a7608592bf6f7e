/**
 * What both stores do with a schedule's plan: the small amount of glue between the pure policy in
 * `schedule/` (planScheduleRuns) and the rows a store writes. Shared so the PostgreSQL and SQLite
 * stores cannot drift apart on when to plan, what to insert, and which columns move.
 *
 * Invariants the stores keep with it:
 * - `next_slot_at` is the slot of the pending next run, the latest slot that has a job (every
 *   other planned run has an earlier slot); null while paused or when the pattern has ended.
 * - `last_slot_at` is the latest slot whose run has started (its claim planned the next one) or
 *   was enqueued already due (a late, overtaken or caught-up run); null before the first. It is
 *   what users see as the "last slot": never the future slot of the pending run.
 * - Planning looks only at slots after the latest slot with a job,
 *   {@link plannedThroughSlotAt} (next_slot_at, else last_slot_at), so a slot whose job was
 *   pruned or parked is never planned again.
 * - Time is always the database's now of the calling transaction (or a pinned one).
 */
import { ValidationError } from '../job/errors.js';
import { describe, integerIn } from '../job/field-checks.js';
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
  /**
   * The new last_slot_at: the latest slot that has now started or was enqueued already due (the
   * claimed slot, or a due run in `runs`); null keeps the stored one.
   */
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

/** A stored schedule's progress: the columns planning reads. */
export interface ScheduleProgress {
  lastSlotAt: Date | null;
  nextSlotAt: Date | null;
}

/**
 * The latest slot that has a job, from which planning continues: the pending next run's slot, or
 * (paused, or the pattern ended) the last slot that ran; null for a schedule with no run yet.
 */
export function plannedThroughSlotAt(progress: ScheduleProgress): Date | null {
  return progress.nextSlotAt ?? progress.lastSlotAt;
}

/**
 * Plans a schedule from `lastSlotAt` (the latest slot with a job, or now for a schedule that
 * starts afresh) and turns the plan into the rows to write. `lastSlotRunsNow`: the run for
 * `lastSlotAt` is being claimed, so it becomes the schedule's last slot.
 */
export function advanceSchedule(
  schedule: PlannableSchedule,
  lastSlotAt: Date,
  now: Date,
  lastSlotRunsNow: boolean,
): ScheduleAdvance {
  const plan = planScheduleRuns({ schedule, lastSlotAt, now, lastSlotRunsNow });
  const runs = plan.next === null ? plan.runs : [...plan.runs, plan.next];
  // plan.runs are all due already (late, overtaken or caught up) and earlier than the next slot.
  const latestDue = plan.runs.at(-1)?.slot ?? null;
  const started = lastSlotRunsNow ? lastSlotAt : null;
  const last =
    latestDue !== null && (started === null || latestDue.getTime() > started.getTime()) ? latestDue : started;
  return {
    scheduleId: schedule.id,
    runs,
    lastSlotAt: last,
    nextSlotAt: plan.next?.slot ?? null,
    nextRunAt: plan.next?.runAt ?? null,
  };
}

/** A claimed job's schedule facts, as a claim transaction reads them under the schedule's lock. */
export interface ClaimedRunContext {
  /** The schedule row, or null when it was deleted. */
  schedule: (PlannableSchedule & ScheduleProgress & { paused: boolean }) | null;
  slot: Date | null;
  /** The job's attempts after this claim. */
  attempts: number;
  /** How many attempt errors the job carries. */
  errorCount: number;
}

/**
 * What a claim does about one claimed recurring run:
 * - `plan`: it is the schedule's latest run, so the next run is planned now (docs/design.md: planned at claim).
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
  const through = plannedThroughSlotAt(schedule);
  if (through !== null && slot.getTime() < through.getTime()) return { action: 'keep' };
  return { action: 'plan', advance: advanceSchedule(schedule, slot, now, true) };
}

/** A claimed job as {@link planClaimedRuns} reads it. */
export interface ClaimedRun {
  id: string;
  scheduleId: string | null;
  scheduleSlot: Date | null;
  attempts: number;
  errors: readonly unknown[];
}

/** The distinct schedules of a claim's recurring runs: the rows a store reads (and locks) first. */
export function claimedScheduleIds(jobs: readonly ClaimedRun[]): string[] {
  return [...new Set(jobs.flatMap((job) => (job.scheduleId === null ? [] : [job.scheduleId])))];
}

/** What a claim writes for its recurring runs: the schedules to advance and the runs to delete. */
export interface ClaimedRunsPlan {
  advances: ScheduleAdvance[];
  /** Ids of claimed runs to delete instead of handing out (see {@link decideClaimedRun}'s `drop`). */
  dropped: Set<string>;
}

/**
 * Recurring runs are planned at claim (docs/design.md), inside the claim's transaction: decides,
 * for every claimed recurring run in slot order, whether it plans its schedule's next run(s),
 * is handed out as it is, or is dropped ({@link decideClaimedRun}). A later run of the same
 * schedule in the batch sees the schedule as already advanced by the earlier one.
 * `schedules` holds the row of every id from {@link claimedScheduleIds} (null: deleted), as read
 * in the claim's transaction; `now` is that transaction's instant.
 */
export function planClaimedRuns(
  jobs: readonly ClaimedRun[],
  schedules: ReadonlyMap<string, ClaimedRunContext['schedule']>,
  now: Date,
): ClaimedRunsPlan {
  const runs = jobs
    .filter((job) => job.scheduleId !== null)
    .sort((a, b) => (a.scheduleSlot?.getTime() ?? 0) - (b.scheduleSlot?.getTime() ?? 0));
  const current = new Map(schedules);
  const advances: ScheduleAdvance[] = [];
  const dropped = new Set<string>();
  for (const job of runs) {
    const id = job.scheduleId as string;
    const schedule = current.get(id) ?? null;
    const decision = decideClaimedRun(
      { schedule, slot: job.scheduleSlot, attempts: job.attempts, errorCount: job.errors.length },
      now,
    );
    if (decision.action === 'drop') dropped.add(job.id);
    if (decision.action !== 'plan' || schedule === null) continue;
    advances.push(decision.advance);
    current.set(id, {
      ...schedule,
      lastSlotAt: decision.advance.lastSlotAt ?? schedule.lastSlotAt,
      nextSlotAt: decision.advance.nextSlotAt,
    });
  }
  return { advances, dropped };
}

/** The schedule row as it was before an upsert replaced it: the columns {@link planUpsert} reads. */
export type UpsertedOver = PlannableSchedule & { paused: boolean };

/** What a schedule upsert writes after inserting or replacing the row. */
export interface UpsertPlan {
  /** Delete the schedule's runs that never started (its pending run is planned anew or paused). */
  deleteUnstartedRuns: boolean;
  /** Mark the schedule paused (a replace with `paused: true`). */
  pause: boolean;
  /** Plan from now and write this advance; null leaves the schedule's runs as they are. */
  advance: ScheduleAdvance | null;
}

/**
 * The schedule upsert decision, once for both stores. `before` is the row an existing id held
 * (locked), or null when the upsert inserted a new row.
 * - new and active: planned afresh from now (nothing before its creation counts as missed);
 *   new and paused: nothing planned.
 * - replaced with `paused`: its unstarted runs are deleted and it is marked paused.
 * - replaced while paused, or with changed timing: its unstarted runs are deleted and it is
 *   planned afresh from now; otherwise (same timing, still active) its pending run stays.
 */
export function planUpsert(before: UpsertedOver | null, spec: ScheduleSpec, now: Date): UpsertPlan {
  const fresh = (): ScheduleAdvance => advanceSchedule(spec, now, now, false);
  if (before === null) return { deleteUnstartedRuns: false, pause: false, advance: spec.paused ? null : fresh() };
  if (spec.paused) return { deleteUnstartedRuns: true, pause: true, advance: null };
  if (!before.paused && !timingChanged(before, spec))
    return { deleteUnstartedRuns: false, pause: false, advance: null };
  return { deleteUnstartedRuns: true, pause: false, advance: fresh() };
}
