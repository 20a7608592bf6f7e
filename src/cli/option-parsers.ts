/**
 * Parsers for flag values, run by commander before any database is opened. Generic ones throw
 * commander's InvalidArgumentError ("option '--port <n>' argument 'x' is invalid. <reason>");
 * job ids, `--after`, `--limit` and `--state` call the library's own parsers
 * (src/job/list-params.ts) and throw its ValidationError, which runCli prints as
 * "invalid --limit: limit: <reason>": the reason the library and the HTTP API give. Exit 2.
 */
import { InvalidArgumentError } from '@commander-js/extra-typings';
import { parseInstant } from '../job/instant.js';
import type { JobState, JsonValue } from '../job/job.js';
import { type ListOrder, listOrder, type PayloadEquality, parsePayloadFilter } from '../job/job-filter.js';
import { afterJobId, jobId, listStates, listText, numberText, pageSize, purgeIds } from '../job/list-params.js';

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

/**
 * A number-valued flag's text as the library should see it: a decimal number literal becomes a
 * number, anything else stays text. The CLI does not judge the value itself: Docket's own
 * validation refuses it, by the same rule and with the same field name and message as the
 * library and the HTTP API (`priority: must be an integer, got 1.5`). The HTTP API reads its
 * number query parameters by this same function.
 */
export { numberText };

/**
 * An instant flag's text as the library should see it: number text is epoch milliseconds,
 * anything else an RFC 3339 string, both checked by Docket's one instant parser (parseInstant).
 */
export function instantText(value: string): number | string {
  return numberText(value);
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

/** `--state`: a comma-separated list of job states, as the library's `states` (field `states[i]`). */
export function statesFlag(value: string): JobState[] {
  return listStates(listText(value));
}

/** A job id argument (`jobs show <id>`), by the library's job-id rule (field `id`). */
export function jobIdArgument(value: string): string {
  return jobId(value, 'id');
}

/** `--after`: a job-id cursor, as the library's `afterId`. */
export function afterFlag(value: string): string {
  afterJobId(value);
  return value;
}

/** `--limit`: a page size, 1 to 1000, as the library's `limit` (text read as `numberText` reads it). */
export function limitFlag(value: string): number {
  return pageSize(numberText(value));
}

/**
 * Collects a repeatable id flag into an array (`--id 1 --id 2` or `--id 1,2`), checked as the
 * library's purge `ids` (field `ids[i]`, counted over every `--id` given).
 */
export function collectJobIds(value: string, previous: string[] | undefined): string[] {
  return purgeIds([...(previous ?? []), ...listText(value)]) ?? [];
}

/**
 * The job-filter flags of `jobs list` and `dead list` (--id-from, --id-to, --run-at-from,
 * --run-at-to, --payload, --order), each read by the one filter parser the library and the HTTP
 * API call (src/job/job-filter.ts), so a refusal gives the same reason on every face.
 */
export const filterFlags = {
  idFrom: (value: string): string => jobId(value, 'idFrom'),
  idTo: (value: string): string => jobId(value, 'idTo'),
  runAtFrom: (value: string): Date => parseInstant('runAtFrom', instantText(value)),
  runAtTo: (value: string): Date => parseInstant('runAtTo', instantText(value)),
  payload: (value: string): PayloadEquality => parsePayloadFilter(value),
  order: (value: string): ListOrder => listOrder(value),
};
