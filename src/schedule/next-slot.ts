/**
 * The next slot of a schedule, under Docket's daylight-saving rule.
 *
 * A slot is an instant a schedule is due, before jitter. The cron expression is read against the
 * wall clock of the schedule's zone; croner enumerates matching readings (wall times) and this
 * file maps each reading to instants:
 * - `interval` patterns (`*` or `/` in the seconds, minutes or hours field) follow real elapsed
 *   time: a reading inside a spring-forward gap never happens and is skipped, and a reading that
 *   happens twice (fall-back) is a slot both times. `*\/15 * * * *` stays 15 minutes apart.
 * - `fixed_time` patterns (only numbers, lists and ranges there) name times of day, each run once:
 *   a reading inside a gap runs at the first instant after the gap (the moment the clocks jump),
 *   several readings in one gap make one slot, and a repeated reading runs at its first occurrence.
 * Croner has its own DST handling (it counts lists and ranges as intervals); reading its matches
 * in UTC and mapping them here keeps the rule Docket documents, whatever croner does.
 */
import { compileCron, type DstClass } from './cron-pattern.js';
import { gapEndAfterWallTime, instantsAtWallTime, offsetAt, wallTimeAt } from './time-zone.js';

/** The part of a schedule that decides its slots. */
export interface SlotSource {
  cron: string;
  timeZone: string;
}

// Longer than any fall-back in the time-zone database (at most 2 h since 1970), so a transition
// this close to an instant is always seen by sampling offsets at both ends.
const TRANSITION_REACH_MS = 12 * 3_600_000;

function slotInstantsForWallTime(wallMs: number, timeZone: string, dstClass: DstClass): number[] {
  const instants = instantsAtWallTime(wallMs, timeZone);
  if (dstClass === 'interval') return instants;
  const first = instants[0];
  return first === undefined ? [gapEndAfterWallTime(wallMs, timeZone)] : [first];
}

// Recent answers of nextSlotAfter, by zone, pattern and instant. A schedule spike plans thousands
// of schedules that share all three (every tenant's report at 00:00, its runs claimed and planned
// at one database now), so the same question came thousands of times, at 6-18 µs each on the
// claim's path. The inputs are pure, so an answer never goes stale; bounded like compileCron's
// cache, and cleared whole when full.
const recentAnswers = new Map<string, number | null>();
const MAX_RECENT_ANSWERS = 4096;

/** The first slot strictly after `after`, or null when the pattern has no later match. */
export function nextSlotAfter(source: SlotSource, after: Date): Date | null {
  const key = `${source.timeZone}\n${source.cron}\n${after.getTime()}`;
  const known = recentAnswers.get(key);
  if (known !== undefined) return known === null ? null : new Date(known);
  const answer = firstSlotAfter(source, after);
  if (recentAnswers.size >= MAX_RECENT_ANSWERS) recentAnswers.clear();
  recentAnswers.set(key, answer === null ? null : answer.getTime());
  return answer;
}

function firstSlotAfter(source: SlotSource, after: Date): Date | null {
  const cron = compileCron(source.cron);
  const { timeZone } = source;
  const afterMs = after.getTime();
  // Readings slightly below the clock's current one still lie ahead when the clocks fall back
  // soon: start that far back, or the second pass through a repeated hour would be missed.
  const lookBackMs = Math.max(0, offsetAt(afterMs, timeZone) - offsetAt(afterMs + TRANSITION_REACH_MS, timeZone));
  let wallMs = wallTimeAt(afterMs, timeZone) - lookBackMs - 1;
  let bestMs: number | null = null;
  let stopWallMs = Number.POSITIVE_INFINITY;
  // Nothing read after stopWallMs can beat the best slot, so stop without asking croner again.
  while (wallMs < stopWallMs) {
    const next = cron.nextWallTimeAfter(wallMs);
    if (next === null || next > stopWallMs) break;
    wallMs = next;
    for (const instant of slotInstantsForWallTime(next, timeZone, cron.dstClass)) {
      if (instant > afterMs && (bestMs === null || instant < bestMs)) {
        bestMs = instant;
        // Matches are read in wall-time order, which is instant order except across a
        // fall-back: keep reading for as long as the clocks went back just before the best slot.
        const fallBackMs = Math.max(0, offsetAt(instant - TRANSITION_REACH_MS, timeZone) - offsetAt(instant, timeZone));
        stopWallMs = wallTimeAt(instant, timeZone) + fallBackMs;
      }
    }
  }
  return bestMs === null ? null : new Date(bestMs);
}

/**
 * The latest slot strictly between `notBefore` and `before`, or null. Found by galloping back
 * from `before` and bisecting on {@link nextSlotAfter}, so it costs a few dozen look-ups however
 * many slots lie in the range.
 */
export function previousSlotBefore(source: SlotSource, before: Date, notBefore: Date): Date | null {
  const beforeMs = before.getTime();
  const floorMs = notBefore.getTime();
  const isBefore = (fromMs: number): boolean => {
    const next = nextSlotAfter(source, new Date(fromMs));
    return next !== null && next.getTime() < beforeMs;
  };
  if (floorMs >= beforeMs || !isBefore(floorMs)) return null;
  // Invariant: the first slot after `lowMs` is before `before`; the first after `highMs` is not.
  let highMs = beforeMs - 1;
  let lowMs = floorMs;
  for (let stepMs = 1000; beforeMs - stepMs > floorMs; stepMs *= 2) {
    if (isBefore(beforeMs - stepMs)) {
      lowMs = beforeMs - stepMs;
      break;
    }
    highMs = beforeMs - stepMs;
  }
  while (highMs - lowMs > 1) {
    const midMs = Math.floor((lowMs + highMs) / 2);
    if (isBefore(midMs)) lowMs = midMs;
    else highMs = midMs;
  }
  return nextSlotAfter(source, new Date(lowMs));
}

/** The slots in (`from`, `to`], earliest first, at most `max` of them. */
export function slotsBetween(source: SlotSource, from: Date, to: Date, max: number): Date[] {
  const slots: Date[] = [];
  let cursor: Date | null = from;
  while (slots.length < max) {
    cursor = nextSlotAfter(source, cursor);
    if (cursor === null || cursor.getTime() > to.getTime()) break;
    slots.push(cursor);
  }
  return slots;
}
