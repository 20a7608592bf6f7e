/**
 * The misfire policy: which runs to enqueue when a schedule's next job is planned, given the
 * last slot that already has a job and the database's now.
 *
 * Which slots were missed. A slot is missed when it passed while nothing ran, and that is judged
 * in slot time, never by jittered run times, so a jitter offset cannot turn a live slot into a
 * missed one:
 * - On the claim path (the run for lastSlotAt is starting now), the claimed run tells how long
 *   the schedule really stood still: it waited `now - its run time` past its due time. A later
 *   slot is missed only when it lies within that wait of the claimed slot
 *   (slot <= lastSlotAt + wait, i.e. slot <= now - the claimed run's offset). Without jitter
 *   that is "slot <= now", the plain rule; with jitter both sides are slot times, so a worker
 *   that claims each run 40 ms after it falls due misses nothing, however the offsets of
 *   neighbouring slots interleave. A slot *overtaken* by the claimed run (its run time at or
 *   before the claimed run's, possible when per-occurrence jitter exceeds the spacing) is never
 *   missed, whatever the wait: its job could only come from this claim, and it fell due before
 *   the claimed run did, so no outage explains its loss. (Found with a per-second schedule and 3 s per-occurrence
 *   jitter: slot :18 fell due at :19.072, the claim of :17 landed at :19.077, and `skip` dropped
 *   :18 although the workers had been up all along.)
 * - Elsewhere (a new or resumed schedule plans from now; repair plans from a run an operator
 *   cancelled), nothing is starting: a slot is missed when its run time is at or before now.
 * A slot that is due (run time at or before now) but not missed is enqueued, due at once,
 * whatever the policy: it is merely late by the claim's latency.
 *
 * A job already in the table always runs, late if need be (durable acceptance); the policy only
 * decides about missed slots, which have no job:
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

/**
 * The latest instant a slot may have and count as missed (see the file comment): on the claim
 * path the claimed slot plus how long its run waited past its due time; elsewhere now itself,
 * against each slot's run time.
 */
function missedThroughMs(input: MisfireInput): { slotMs: number; claimedRunAtMs: number } | { runAtMs: number } {
  if (!input.lastSlotRunsNow) return { runAtMs: input.now.getTime() };
  const claimed = plannedRun(input.schedule, input.lastSlotAt);
  const waitedMs = Math.max(0, input.now.getTime() - claimed.runAt.getTime());
  return { slotMs: input.lastSlotAt.getTime() + waitedMs, claimedRunAtMs: claimed.runAt.getTime() };
}

/** Applies the schedule's misfire policy: the runs to enqueue now, and the next run. */
export function planScheduleRuns(input: MisfireInput): MisfirePlan {
  const { schedule, lastSlotAt, now } = input;
  const nowMs = now.getTime();
  const lastMs = lastSlotAt.getTime();
  const through = missedThroughMs(input);
  const claimedRunAtMs = 'slotMs' in through ? through.claimedRunAtMs : Number.NEGATIVE_INFINITY;
  const isMissed = (run: PlannedRun) =>
    'slotMs' in through
      ? run.slot.getTime() <= through.slotMs && run.runAt.getTime() > claimedRunAtMs
      : run.runAt.getTime() <= through.runAtMs;
  // Slots after lastSlotAt fall into three stretches, so the work stays bounded by one jitter
  // window however long nothing ran:
  // - (lastSlotAt, prefixEnd]: slots the claimed run may have overtaken (a slot before the claimed
  //   run time), looked at one by one;
  // - (prefixEnd, boundary]: at or before now - jitterMs, missed whatever the offsets (offsets
  //   are < jitterMs, so this lies before both thresholds of isMissed), found by bisection;
  // - after the boundary: compared with now one by one, up to the first run still ahead (next).
  const boundaryMs = Math.max(lastMs, nowMs - schedule.jitterMs);
  const prefixEndMs = Math.max(lastMs, Math.min(boundaryMs, claimedRunAtMs));
  const boundary = new Date(boundaryMs);
  const bulkFloor = new Date(prefixEndMs);
  // Due but not missed: late only by the claim's latency, or overtaken by the claimed run.
  // They run, due at once, whatever the policy.
  const late: PlannedRun[] = [];
  const prefixMissed: PlannedRun[] = [];
  for (let slot = nextSlotAfter(schedule, lastSlotAt); slot !== null && slot.getTime() <= prefixEndMs; ) {
    const run = plannedRun(schedule, slot);
    if (isMissed(run)) prefixMissed.push(run);
    else late.push(run);
    slot = nextSlotAfter(schedule, slot);
  }

  const recentMissed: PlannedRun[] = [];
  let candidate = nextSlotAfter(schedule, boundary);
  let next: PlannedRun | null = null;
  while (candidate !== null) {
    const run = plannedRun(schedule, candidate);
    if (run.runAt.getTime() > nowMs) {
      next = run;
      break;
    }
    if (!isMissed(run)) {
      late.push(run);
    } else {
      recentMissed.push(run);
      if (recentMissed.length >= MAX_JITTER_WINDOW_SCAN) {
        // Every slot after now has a run time after now, so this is a valid next run.
        const afterNow = nextSlotAfter(schedule, now);
        next = afterNow === null ? null : plannedRun(schedule, afterNow);
        break;
      }
    }
    candidate = nextSlotAfter(schedule, candidate);
  }

  // The latest slot of the middle stretch, found without walking the whole outage.
  const justAfterBoundary = new Date(boundaryMs + 1);
  const latestBulk = previousSlotBefore(schedule, justAfterBoundary, bulkFloor);
  const missed = recentMissed.length > 0 || latestBulk !== null || prefixMissed.length > 0;

  const { misfire } = schedule;
  if (!missed || misfire.policy === 'skip') return { runs: late, next, missed };

  const bySlot = (a: PlannedRun, b: PlannedRun) => a.slot.getTime() - b.slot.getTime();
  if (misfire.policy === 'run_once') {
    if (input.lastSlotRunsNow) return { runs: late, next, missed };
    const latest =
      recentMissed.at(-1) ?? (latestBulk === null ? prefixMissed.at(-1) : plannedRun(schedule, latestBulk));
    return { runs: latest === undefined ? late : [...late, latest].sort(bySlot), next, missed };
  }

  // catch_up: the latest maxCatchUpRuns missed slots no older than the window.
  const windowStartMs = nowMs - misfire.catchUpWindowMs;
  const inWindow = (run: PlannedRun) => run.slot.getTime() >= windowStartMs;
  const runs = recentMissed.filter(inWindow).slice(-misfire.maxCatchUpRuns);
  if (runs.length < misfire.maxCatchUpRuns) {
    const floor = new Date(Math.max(prefixEndMs, windowStartMs - 1));
    runs.unshift(...olderMissedSlots(schedule, floor, justAfterBoundary, misfire.maxCatchUpRuns - runs.length));
  }
  if (runs.length < misfire.maxCatchUpRuns) {
    runs.unshift(...prefixMissed.filter(inWindow).slice(-(misfire.maxCatchUpRuns - runs.length)));
  }
  return { runs: [...late, ...runs].sort(bySlot), next, missed };
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
