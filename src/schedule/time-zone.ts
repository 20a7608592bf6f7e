/**
 * Wall clocks of IANA time zones, from the platform's Intl database. Schedules are read against
 * a zone's wall clock, so this file answers the two questions the daylight-saving rule needs:
 * what a zone's clock reads at an instant, and at which instants (none, one or two) it reads a
 * given time. A "wall time" here is the clock reading encoded as if it were UTC epoch
 * milliseconds, so wall times compare and subtract like plain numbers.
 */
import { ValidationError } from '../job/errors.js';
import { describe } from '../job/field-checks.js';

/** Longest time-zone name accepted (the longest IANA name is 32 characters). */
export const MAX_TIME_ZONE_LENGTH = 64;

// As in Temporal's GetPossibleEpochNanoseconds: the offsets a day either side of a reading are
// the only ones it can be read with (real offsets stay within UTC-12..UTC+14 and no zone changes
// offset twice within two days), so a reading has at most these two candidate instants.
const DAY_MS = 86_400_000;

const formatters = new Map<string, Intl.DateTimeFormat>();
// What the en-US formatter below prints: "5/28/2026, 16:26:40".
const EN_US_PATTERN = /^(\d{1,2})\/(\d{1,2})\/(\d{1,6}), (\d{2}):(\d{2}):(\d{2})$/;

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/**
 * Checks that `value` names a time zone the platform knows (an IANA name such as
 * `Europe/London`, or `UTC`) and returns it unchanged.
 */
export function validateTimeZone(value: unknown, field = 'timeZone'): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new ValidationError(field, `must be an IANA time-zone name such as "Europe/London", got ${describe(value)}`);
  }
  if (value.length > MAX_TIME_ZONE_LENGTH) {
    throw new ValidationError(field, `must be at most ${MAX_TIME_ZONE_LENGTH} characters`);
  }
  try {
    formatterFor(value);
  } catch (error) {
    if (error instanceof RangeError) {
      throw new ValidationError(
        field,
        `unknown time zone ${describe(value)} (use an IANA name such as "Europe/London")`,
      );
    }
    throw error;
  }
  return value;
}

/** What the zone's clock reads at `instantMs`, as a wall time (see the file header). */
export function wallTimeAt(instantMs: number, timeZone: string): number {
  if (timeZone === 'UTC') return instantMs;
  const formatter = formatterFor(timeZone);
  const subSecondMs = ((instantMs % 1000) + 1000) % 1000;
  // format() and a regular expression cost a quarter of formatToParts(), and this runs several
  // times for every slot computed; formatToParts() stays as the fallback for any other layout.
  const match = EN_US_PATTERN.exec(formatter.format(instantMs));
  if (match) {
    const [, month, day, year, hour, minute, second] = match.map(Number) as number[];
    return Date.UTC(year ?? 1970, (month ?? 1) - 1, day ?? 1, hour ?? 0, minute ?? 0, second ?? 0) + subSecondMs;
  }
  const fields: Record<string, number> = {};
  for (const part of formatter.formatToParts(instantMs)) {
    if (part.type !== 'literal') fields[part.type] = Number(part.value);
  }
  return (
    Date.UTC(
      fields.year ?? 1970,
      (fields.month ?? 1) - 1,
      fields.day ?? 1,
      fields.hour ?? 0,
      fields.minute ?? 0,
      fields.second ?? 0,
    ) + subSecondMs
  );
}

/** The zone's offset from UTC at `instantMs`, in milliseconds (wall time minus instant). */
export function offsetAt(instantMs: number, timeZone: string): number {
  return wallTimeAt(instantMs, timeZone) - instantMs;
}

/**
 * Every instant at which the zone's clock reads `wallMs`, earliest first: none inside a
 * spring-forward gap, two inside a fall-back overlap, one otherwise.
 */
export function instantsAtWallTime(wallMs: number, timeZone: string): number[] {
  if (timeZone === 'UTC') return [wallMs];
  const earlier = offsetAt(wallMs - DAY_MS, timeZone);
  const later = offsetAt(wallMs + DAY_MS, timeZone);
  const instants: number[] = [];
  // The larger offset names the earlier instant, so this pushes in time order.
  for (const offset of earlier === later ? [earlier] : [Math.max(earlier, later), Math.min(earlier, later)]) {
    const candidate = wallMs - offset;
    if (offsetAt(candidate, timeZone) === offset) instants.push(candidate);
  }
  return instants;
}

/**
 * For a wall time inside a spring-forward gap, the first instant after the gap: the moment the
 * clocks jump, whose reading is the first wall time that exists again.
 */
export function gapEndAfterWallTime(wallMs: number, timeZone: string): number {
  // Before the gap the zone ran on the smaller offset; the jump lies between the instants the
  // two offsets name for this reading. Bisect to the millisecond where the offset changes.
  const before = offsetAt(wallMs - DAY_MS, timeZone);
  const after = offsetAt(wallMs + DAY_MS, timeZone);
  let low = wallMs - after; // read with the later, larger offset: an instant before the jump
  let high = wallMs - before; // read with the earlier, smaller offset: an instant after the jump
  const lowOffset = offsetAt(low, timeZone);
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (offsetAt(mid, timeZone) === lowOffset) low = mid;
    else high = mid;
  }
  return high;
}
