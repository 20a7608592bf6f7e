/**
 * Reading instants: a Date, integer epoch milliseconds, or an RFC 3339 string with an offset,
 * within the range every store can keep. The library, the CLI and HTTP all parse run times here.
 */
import { ValidationError } from './errors.js';
import { describe } from './field-checks.js';

/**
 * Latest run time accepted (9999-12-31T23:59:59.999Z), so a typo in seconds-vs-ms cannot park a
 * job for ever unnoticed, and every stored instant still prints as a four-digit RFC 3339 year.
 */
export const LATEST_RUN_AT_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
/**
 * RFC 3339 date-time with a mandatory offset (`Z` or `±hh:mm`). A string without an offset
 * would be read in the server's time zone, and `Date.parse` also accepts "1" or "Dec 25", so
 * nothing else is taken.
 */
export const RFC3339_INSTANT_PATTERN =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/** Epoch ms of an RFC 3339 instant with an offset, or a message saying what is wrong with it. */
function rfc3339Millis(value: string): number | string {
  const match = RFC3339_INSTANT_PATTERN.exec(value);
  if (!match) {
    return 'must be an RFC 3339 instant with an offset (e.g. 2030-06-01T09:00:00Z or 2030-06-01T09:00:00+02:00)';
  }
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const fraction = match[7] ?? '';
  if (hour > 23 || minute > 59 || second > 59) return 'names a time of day that does not exist';
  const probe = new Date(0);
  probe.setUTCFullYear(year, month - 1, day);
  if (month < 1 || month > 12 || probe.getUTCMonth() !== month - 1 || probe.getUTCDate() !== day) {
    // Date.parse("2026-02-30") quietly rolls over to March 2, a day nobody asked for.
    return 'names a day that does not exist';
  }
  let offsetMinutes = 0;
  if (match[8] === undefined) {
    const [offsetHours, offsetMins] = [Number(match[10]), Number(match[11])];
    if (offsetHours > 23 || offsetMins > 59) return 'has an offset that does not exist';
    offsetMinutes = (match[9] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMins);
  }
  const millis = fraction === '' ? 0 : Math.floor(Number(`0${fraction}`) * 1000);
  probe.setUTCHours(hour, minute, second, millis);
  return probe.getTime() - offsetMinutes * 60_000;
}

/**
 * Checks and converts a run time: a Date, integer epoch milliseconds, or an RFC 3339 string
 * with an offset. Every face (library, CLI, HTTP) reads instants through here, so "1", "Dec 25"
 * and offset-less strings are refused everywhere alike.
 */
export function parseInstant(field: string, value: unknown): Date {
  let ms: number;
  if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'number') {
    if (!Number.isInteger(value)) {
      throw new ValidationError(field, `must be whole epoch milliseconds, got ${describe(value)}`);
    }
    ms = value;
  } else if (typeof value === 'string') {
    const parsed = rfc3339Millis(value);
    if (typeof parsed === 'string') throw new ValidationError(field, `${parsed}, got ${describe(value)}`);
    ms = parsed;
  } else
    throw new ValidationError(
      field,
      `must be a Date, epoch milliseconds or an RFC 3339 string with an offset, got ${describe(value)}`,
    );
  if (!Number.isFinite(ms)) throw new ValidationError(field, `is not a valid time: ${describe(value)}`);
  if (ms < 0 || ms > LATEST_RUN_AT_MS) {
    throw new ValidationError(
      field,
      `must lie between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z, got ${describe(value)}`,
    );
  }
  return new Date(ms);
}
