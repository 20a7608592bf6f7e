/**
 * Parsers for flag values. Each throws commander's InvalidArgumentError, so a bad value is
 * reported as "option '--limit <n>' argument 'x' is invalid. <reason>" and exits 2 before any
 * database is opened.
 */
import { InvalidArgumentError } from '@commander-js/extra-typings';
import { JOB_STATES, type JobState, type JsonValue } from '../job/job.js';

/** A parser for a whole number in [min, max]. */
export function integerFlag(min: number, max: number = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    if (!/^-?\d+$/.test(value.trim())) throw new InvalidArgumentError('Must be a whole number.');
    const parsed = Number(value);
    if (parsed < min || parsed > max) throw new InvalidArgumentError(`Must be between ${min} and ${max}.`);
    return parsed;
  };
}

/** Parses a JSON text into a value. */
export function jsonFlag(value: string): JsonValue {
  try {
    return JSON.parse(value) as JsonValue;
  } catch (error) {
    throw new InvalidArgumentError(`Not valid JSON (${(error as Error).message}).`);
  }
}

/** Parses an ISO-8601 instant; the full range check is Docket's own validation. */
export function instantFlag(value: string): Date {
  const ms = Date.parse(value);
  if (!Number.isFinite(ms)) throw new InvalidArgumentError('Not an ISO-8601 time such as 2030-01-01T09:00:00Z.');
  return new Date(ms);
}

/** Splits a comma-separated list, dropping blanks; refuses an empty list. */
export function listFlag(value: string): string[] {
  const items = value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  if (items.length === 0) throw new InvalidArgumentError('Give at least one name (comma-separated).');
  return items;
}

/** Parses a comma-separated list of job states. */
export function statesFlag(value: string): JobState[] {
  return listFlag(value).map((state) => {
    if (!(JOB_STATES as readonly string[]).includes(state)) {
      throw new InvalidArgumentError(`Unknown state "${state}" (known: ${JOB_STATES.join(', ')}).`);
    }
    return state as JobState;
  });
}

/** Job ids are positive integers; checked here so a typo is a usage error, not a database error. */
export function jobIdArgument(value: string): string {
  if (!/^[1-9]\d{0,18}$/.test(value)) throw new InvalidArgumentError('A job id is a positive whole number.');
  return value;
}

/** Collects a repeatable id flag into an array (`--id 1 --id 2` or `--id 1,2`). */
export function collectJobIds(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), ...listFlag(value).map(jobIdArgument)];
}
