/**
 * Cron expressions: which forms Docket accepts, and their daylight-saving class.
 *
 * Accepted: 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first,
 * croner's syntax inside each field (`*`, lists, ranges, `/` steps, names, `L`, `#`, `W`, `+`).
 * Refused, each with a message naming the `cron` field: any other field count (7 fields with a
 * year, or too few), `@` nicknames (write the 5 fields), `?` (croner fills it with the current
 * time, so two processes parsing the same schedule at different moments would disagree), and a
 * pattern that never matches (`0 0 31 2 *`).
 */
import { Cron } from 'croner';
import { ValidationError } from '../job/errors.js';
import { describe } from '../job/field-checks.js';

/** Longest cron expression accepted, in characters. */
export const MAX_CRON_LENGTH = 256;

/**
 * How a pattern meets a daylight-saving transition (docs/semantics.md, "Recurring schedules"):
 * `fixed_time` patterns name times of day and run each once (a time in a gap runs when the gap
 * ends, a repeated time runs at its first occurrence); `interval` patterns follow real elapsed
 * time (times in a gap never happen, repeated times happen twice).
 */
export type DstClass = 'fixed_time' | 'interval';

/** A validated cron expression, ready to enumerate wall-clock matches. */
export interface CompiledCron {
  /** The expression as given, whitespace-normalised. */
  pattern: string;
  dstClass: DstClass;
  /** The first match strictly after `wallMs`, as a wall time; null when there is none. */
  nextWallTimeAfter(wallMs: number): number | null;
}

const compiled = new Map<string, CompiledCron>();
// Bounded so a process that sees many distinct patterns cannot grow this cache without limit.
const MAX_COMPILED = 1000;

/** Parses and checks a cron expression, or throws a {@link ValidationError} naming `field`. */
export function compileCron(value: unknown, field = 'cron'): CompiledCron {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new ValidationError(field, `must be a cron expression such as "0 9 * * *", got ${describe(value)}`);
  }
  if (value.length > MAX_CRON_LENGTH) throw new ValidationError(field, `must be at most ${MAX_CRON_LENGTH} characters`);
  const fields = value.trim().split(/\s+/);
  const pattern = fields.join(' ');
  const cached = compiled.get(pattern);
  if (cached) return cached;

  if (pattern.startsWith('@')) {
    throw new ValidationError(field, `nicknames such as ${describe(pattern)} are not accepted; write the 5 fields`);
  }
  if (fields.length !== 5 && fields.length !== 6) {
    throw new ValidationError(
      field,
      `must have 5 fields (minute hour day month weekday) or 6 (seconds first), got ${fields.length} in ${describe(pattern)}`,
    );
  }
  if (pattern.includes('?')) {
    throw new ValidationError(field, `"?" is not accepted (croner reads it as the current time); use "*"`);
  }
  let cron: Cron;
  try {
    // Read against UTC on purpose: it enumerates wall-clock readings, and next-slot.ts maps
    // each reading to instants in the schedule's zone under Docket's own daylight-saving rule.
    // A fixed offset of 0 rather than `timezone: 'UTC'`: the same readings (checked against each
    // other over 63,000 random instants and 21 patterns), but croner then does plain date
    // arithmetic instead of an Intl conversion per step, about 4 µs a match instead of 45, and a
    // claim of recurring runs plans three or more matches per run.
    cron = new Cron(pattern, { utcOffset: 0, paused: true, mode: '5-or-6-parts' });
  } catch (error) {
    throw new ValidationError(field, `invalid cron expression ${describe(pattern)}: ${(error as Error).message}`);
  }
  if (cron.nextRun(new Date(Date.UTC(2000, 0, 1))) === null) {
    throw new ValidationError(field, `${describe(pattern)} never matches any date`);
  }
  // The seconds, minutes and hours fields decide the class; a 5-field pattern's seconds are 0.
  const timeFields = fields.length === 6 ? fields.slice(0, 3) : fields.slice(0, 2);
  const dstClass: DstClass = timeFields.some((part) => part.includes('*') || part.includes('/'))
    ? 'interval'
    : 'fixed_time';
  const result: CompiledCron = {
    pattern,
    dstClass,
    nextWallTimeAfter(wallMs) {
      return cron.nextRun(new Date(wallMs))?.getTime() ?? null;
    },
  };
  if (compiled.size >= MAX_COMPILED) compiled.clear();
  compiled.set(pattern, result);
  return result;
}
