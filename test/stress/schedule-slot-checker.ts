/**
 * I7 (one run per recurring slot) and the recurring part of I4 (never before slot + jitter
 * offset), checked from the final rows of a run. Shared by the chaos checker and the simulator.
 *
 * Docket plans a schedule's next run when its latest run is claimed, in the claim's transaction,
 * with the database's now (the repair sweep, a create and a resume plan the same way); the jobs a
 * plan inserts carry that now as their `created_at`. So for two consecutive jobs A and B of one
 * schedule (by slot), B's `created_at` is the instant t at which the store planned the slots after
 * A, and the slots strictly between A and B are exactly the ones that plan left without a job.
 * Checked, per schedule, with slots and jitter offsets recomputed from the schedule's definition:
 *
 * - Duplicates: no (schedule, slot) has two jobs, across the jobs and dead-letter tables.
 * - Never planned: every slot between A and B was missed at t (its run time, slot + offset, at or
 *   before t). A slot still in the future at t with no job is a lost run: exactly one is broken.
 * - Overtaken: a slot between A and B must also have been due after A was (run time later than
 *   A's): otherwise nothing being late or down explains its loss, only a per-occurrence jitter
 *   wider than the slot spacing (see test/simulation/schedule-jitter-order.test.ts).
 * - Policy: `skip` leaves every missed slot without a job; `run_once` too on the claim path (the
 *   late job starting is the one run; semantics.md), so both allow a gap of missed slots only;
 *   `catch_up` allows a missed slot without a job only when it is older than catchUpWindowMs at t,
 *   or when the plan already enqueued maxCatchUpRuns later missed slots (the cap); and no plan
 *   enqueues more than maxCatchUpRuns overdue runs (jobs stamped with one plan instant whose run
 *   time had passed at it): the burst bound.
 * - Early: no claim of a recurring run happened before its slot + jitter offset (database clock).
 *
 * A gap is therefore allowed only when the plan came after the skipped slots' run times: when the
 * previous run was claimed late. Why it was late (a database restart, a killed or frozen worker,
 * a loaded host) is reported by the caller's `causeOf`, not judged: any claim later than the next
 * slot's run time legitimately skips it under these policies.
 */
import type { Job } from '../../src/job/job.js';
import { jitterOffsetMs } from '../../src/schedule/jitter.js';
import { nextSlotAfter } from '../../src/schedule/next-slot.js';
import type { ScheduleSpec } from '../../src/schedule/schedule.js';

/** The schedule fields the check reads. */
export type CheckedSchedule = Pick<ScheduleSpec, 'id' | 'cron' | 'timeZone' | 'jitterMs' | 'jitterMode' | 'misfire'>;

/** One claim of a job, by the database clock. */
export interface RunClaim {
  jobId: string;
  token: number;
  claimedAtMs: number;
}

/** What the check reads. */
export interface SlotCheckInput {
  schedules: CheckedSchedule[];
  /** Every job row at the end (jobs and dead-letter tables); rows of other jobs are ignored. */
  jobs: Job[];
  /** Pending runs seen just before the schedules were paused at the end (pausing deletes them). */
  removedByPause?: Job[];
  claims: RunClaim[];
  /** Names why the schedule waited from `fromMs` (previous run due) to `toMs` (plan); free text. */
  causeOf?: (fromMs: number, toMs: number) => string;
}

/** One gap: consecutive jobs of a schedule with slots between them that got no job. */
export interface SlotGap {
  scheduleId: string;
  policy: string;
  afterSlotMs: number;
  beforeSlotMs: number;
  missedSlots: number;
  /** When the slots after the earlier job were planned (database clock). */
  plannedAtMs: number;
  /** plannedAtMs minus the earlier job's run time: how late its claim came. */
  lateMs: number;
  allowed: boolean;
  cause: string;
}

/** Per-schedule figures. */
export interface ScheduleSlotLine {
  id: string;
  policy: string;
  jitterMs: number;
  runs: number;
  gaps: number;
  missedSlots: number;
  gapsNotAllowed: number;
}

/** The figures and violations of the check. */
export interface ScheduleSlotVerdict {
  schedules: number;
  slotsRun: number;
  removedByPause: number;
  duplicateSlots: number;
  slotsNeverPlanned: number;
  /** Slots skipped although due before the previous run (jitter wider than the spacing). */
  slotsOvertaken: number;
  /** catch_up plans that enqueued more overdue runs than maxCatchUpRuns. */
  catchUpBursts: number;
  runsStartedEarly: number;
  gaps: number;
  gapsAllowed: number;
  gapsNotAllowed: number;
  missedSlots: number;
  gapCauses: Record<string, number>;
  /**
   * How each run after the first was planned: at the previous run's first claim, in the same
   * plan as the previous run (a catch-up batch), later than that claim (the repair sweep), or
   * unknown (the previous run's first claim was not seen: its worker died before starting it).
   */
  plansAtClaim: number;
  plansInBatch: number;
  plansLater: number;
  plansUnknown: number;
  worstGap: SlotGap | null;
  perSchedule: ScheduleSlotLine[];
  gapList: SlotGap[];
  violations: string[];
}

// Enumerating slots between two jobs stops here: a gap this long is reported, not walked.
const MAX_SLOTS_WALKED = 100_000;

/** Checks I7 and recurring I4 (see the file header). */
export function checkScheduleSlots(input: SlotCheckInput): ScheduleSlotVerdict {
  const violations: string[] = [];
  const violate = (line: string) => {
    if (violations.length < 200) violations.push(line);
  };
  const causeOf = input.causeOf ?? (() => 'unknown');
  const claimsByJob = new Map<string, RunClaim[]>();
  for (const claim of input.claims) {
    const list = claimsByJob.get(claim.jobId) ?? [];
    if (list.length === 0) claimsByJob.set(claim.jobId, list);
    list.push(claim);
  }
  const verdict: ScheduleSlotVerdict = {
    schedules: input.schedules.length,
    slotsRun: 0,
    removedByPause: 0,
    duplicateSlots: 0,
    slotsNeverPlanned: 0,
    slotsOvertaken: 0,
    catchUpBursts: 0,
    runsStartedEarly: 0,
    gaps: 0,
    gapsAllowed: 0,
    gapsNotAllowed: 0,
    missedSlots: 0,
    gapCauses: {},
    plansAtClaim: 0,
    plansInBatch: 0,
    plansLater: 0,
    plansUnknown: 0,
    worstGap: null,
    perSchedule: [],
    gapList: [],
    violations,
  };

  for (const schedule of input.schedules) {
    const runAtOf = (slotMs: number) =>
      slotMs + jitterOffsetMs(schedule.id, new Date(slotMs), schedule.jitterMs, schedule.jitterMode);
    const line: ScheduleSlotLine = {
      id: schedule.id,
      policy: schedule.misfire.policy,
      jitterMs: schedule.jitterMs,
      runs: 0,
      gaps: 0,
      missedSlots: 0,
      gapsNotAllowed: 0,
    };
    verdict.perSchedule.push(line);

    // Duplicates: one job per (schedule, slot) across both tables (ids are unique across them).
    const bySlot = new Map<number, Job[]>();
    const seenIds = new Set<string>();
    for (const job of input.jobs) {
      if (job.scheduleId !== schedule.id || job.scheduleSlot === null || seenIds.has(job.id)) continue;
      seenIds.add(job.id);
      const slotMs = job.scheduleSlot.getTime();
      const list = bySlot.get(slotMs) ?? [];
      if (list.length === 0) bySlot.set(slotMs, list);
      list.push(job);
    }
    for (const [slotMs, list] of bySlot) {
      if (list.length > 1) {
        verdict.duplicateSlots += 1;
        violate(
          `I7 schedule ${schedule.id} slot ${new Date(slotMs).toISOString()}: ${list.length} jobs (${list.map((j) => j.id).join(', ')})`,
        );
      }
    }
    line.runs = bySlot.size;
    verdict.slotsRun += bySlot.size;

    // I4 for recurring runs: every claim at or after slot + jitter offset, by the database clock.
    for (const [slotMs, list] of bySlot) {
      for (const job of list) {
        for (const claim of claimsByJob.get(job.id) ?? []) {
          if (claim.claimedAtMs < runAtOf(slotMs)) {
            verdict.runsStartedEarly += 1;
            violate(
              `I4 schedule ${schedule.id} job ${job.id} token ${claim.token}: claimed at ${claim.claimedAtMs}, ` +
                `before slot ${slotMs} + jitter offset ${runAtOf(slotMs) - slotMs} ms`,
            );
          }
        }
      }
    }

    // Runs deleted by the final pause still held their slot: count them as existing.
    const present = new Map<number, Job>();
    for (const [slotMs, list] of bySlot) if (list[0]) present.set(slotMs, list[0]);
    for (const job of input.removedByPause ?? []) {
      if (job.scheduleId !== schedule.id || job.scheduleSlot === null) continue;
      const slotMs = job.scheduleSlot.getTime();
      if (!present.has(slotMs)) {
        present.set(slotMs, job);
        verdict.removedByPause += 1;
      }
    }

    const slots = [...present.keys()].sort((a, b) => a - b);
    if (schedule.misfire.policy === 'catch_up') {
      const overdueByPlan = new Map<number, number>();
      for (const slotMs of slots) {
        const plannedAtMs = (present.get(slotMs) as Job).createdAt.getTime();
        if (runAtOf(slotMs) <= plannedAtMs) overdueByPlan.set(plannedAtMs, (overdueByPlan.get(plannedAtMs) ?? 0) + 1);
      }
      for (const [plannedAtMs, count] of overdueByPlan) {
        if (count > schedule.misfire.maxCatchUpRuns) {
          verdict.catchUpBursts += 1;
          violate(
            `I7 schedule ${schedule.id}: the plan at ${new Date(plannedAtMs).toISOString()} enqueued ${count} overdue runs, cap ${schedule.misfire.maxCatchUpRuns}`,
          );
        }
      }
    }
    for (let i = 0; i + 1 < slots.length; i += 1) {
      const aMs = slots[i] as number;
      const bMs = slots[i + 1] as number;
      const a = present.get(aMs) as Job;
      const b = present.get(bMs) as Job;
      const plannedAtMs = b.createdAt.getTime();
      const firstClaim = (claimsByJob.get(a.id) ?? []).reduce<RunClaim | undefined>(
        (min, c) => (min === undefined || c.token < min.token ? c : min),
        undefined,
      );
      if (plannedAtMs === a.createdAt.getTime()) verdict.plansInBatch += 1;
      else if (firstClaim === undefined || firstClaim.token !== 1) verdict.plansUnknown += 1;
      else if (Math.abs(firstClaim.claimedAtMs - plannedAtMs) <= 1) verdict.plansAtClaim += 1;
      else verdict.plansLater += 1;

      const missed: number[] = [];
      let walked = 0;
      for (let s = nextSlotAfter(schedule, new Date(aMs)); s !== null && s.getTime() < bMs; ) {
        missed.push(s.getTime());
        if (++walked >= MAX_SLOTS_WALKED) break;
        s = nextSlotAfter(schedule, s);
      }
      if (missed.length === 0) continue;

      const notYetDue = missed.filter((m) => runAtOf(m) > plannedAtMs);
      const overtaken = missed.filter((m) => runAtOf(m) <= runAtOf(aMs));
      let allowed = notYetDue.length === 0 && (overtaken.length === 0 || schedule.misfire.policy === 'catch_up');
      if (notYetDue.length > 0) {
        verdict.slotsNeverPlanned += notYetDue.length;
        violate(
          `I7 schedule ${schedule.id}: slot ${new Date(notYetDue[0] as number).toISOString()} (and ${notYetDue.length - 1} more) ` +
            `was not yet due when the slots after ${new Date(aMs).toISOString()} were planned at ${new Date(plannedAtMs).toISOString()}, yet has no job`,
        );
      }
      if (notYetDue.length === 0 && overtaken.length > 0 && schedule.misfire.policy !== 'catch_up') {
        verdict.slotsOvertaken += overtaken.length;
        violate(
          `I7 schedule ${schedule.id}: slot ${new Date(overtaken[0] as number).toISOString()} (and ${overtaken.length - 1} more) ` +
            `got no job though its run time came before that of the previous run ${new Date(aMs).toISOString()}: nothing was late`,
        );
      }
      if (allowed && schedule.misfire.policy === 'catch_up') {
        const windowStartMs = plannedAtMs - schedule.misfire.catchUpWindowMs;
        // The plan's catch-up runs: jobs after A whose run time had passed at the plan.
        const caughtUp = slots.filter((s) => s > aMs && runAtOf(s) <= plannedAtMs).length;
        const capped = caughtUp >= schedule.misfire.maxCatchUpRuns;
        const outsideWindow = missed.every((m) => m < windowStartMs);
        allowed = capped || outsideWindow;
        if (!allowed) {
          violate(
            `I7 schedule ${schedule.id} (catch_up, window ${schedule.misfire.catchUpWindowMs} ms, cap ${schedule.misfire.maxCatchUpRuns}): ` +
              `${missed.length} missed slots after ${new Date(aMs).toISOString()} got no job though only ${caughtUp} were caught up at ${new Date(plannedAtMs).toISOString()}`,
          );
        }
      }
      const cause = causeOf(runAtOf(aMs), plannedAtMs);
      const gap: SlotGap = {
        scheduleId: schedule.id,
        policy: schedule.misfire.policy,
        afterSlotMs: aMs,
        beforeSlotMs: bMs,
        missedSlots: missed.length,
        plannedAtMs,
        lateMs: plannedAtMs - runAtOf(aMs),
        allowed,
        cause,
      };
      verdict.gapList.push(gap);
      verdict.gaps += 1;
      verdict.missedSlots += missed.length;
      line.gaps += 1;
      line.missedSlots += missed.length;
      if (allowed) verdict.gapsAllowed += 1;
      else {
        verdict.gapsNotAllowed += 1;
        line.gapsNotAllowed += 1;
      }
      verdict.gapCauses[cause] = (verdict.gapCauses[cause] ?? 0) + 1;
      if (verdict.worstGap === null || gap.missedSlots > verdict.worstGap.missedSlots) verdict.worstGap = gap;
    }
  }
  return verdict;
}

/** The figures as printed lines (chaos and simulator). */
export function formatScheduleSlots(v: ScheduleSlotVerdict, indent = ''): string[] {
  const policies: Record<string, number> = {};
  for (const s of v.perSchedule) policies[s.policy] = (policies[s.policy] ?? 0) + 1;
  const lines = [
    `schedules                     ${v.schedules} ${JSON.stringify(policies)}, ${v.perSchedule.filter((s) => s.jitterMs > 0).length} with jitter`,
    `recurring slots run           ${v.slotsRun} (+ ${v.removedByPause} pending runs removed by the final pause)`,
    `duplicate slots               ${v.duplicateSlots} (must be 0)`,
    `slots never planned           ${v.slotsNeverPlanned} (must be 0: due after their plan, yet no job)`,
    `slots skipped, none late      ${v.slotsOvertaken} (must be 0: due before the previous run, yet no job)`,
    `catch-up plans over the cap   ${v.catchUpBursts} (must be 0)`,
    `recurring runs started early  ${v.runsStartedEarly} (must be 0: before slot + jitter offset)`,
    `gaps                          ${v.gaps} (${v.missedSlots} missed slots): allowed ${v.gapsAllowed}, not allowed ${v.gapsNotAllowed} (must be 0); causes ${JSON.stringify(v.gapCauses)}`,
    `  worst gap                   ${v.worstGap ? `${v.worstGap.missedSlots} slots of ${v.worstGap.scheduleId} (${v.worstGap.policy}), planned ${v.worstGap.lateMs} ms after the previous run was due (${v.worstGap.cause})` : '-'}`,
    `plans at the previous claim   ${v.plansAtClaim} (in the same catch-up batch: ${v.plansInBatch}; later, by repair: ${v.plansLater}; first claim not seen: ${v.plansUnknown})`,
  ];
  for (const s of v.perSchedule) {
    lines.push(
      `  ${s.id.padEnd(28)}${s.policy.padEnd(9)} jitter ${String(s.jitterMs).padStart(4)} ms: ${s.runs} runs, ${s.gaps} gaps (${s.missedSlots} slots), ${s.gapsNotAllowed} not allowed`,
    );
  }
  return lines.map((l) => indent + l);
}
