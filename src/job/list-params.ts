/**
 * The one parser for each list and lookup parameter: job ids, `after` cursors, page limits and
 * state lists. The library (Docket), the HTTP API, the CLI and both stores call these, so the same
 * bad input gets the same reason from every face, naming the field in that face's spelling
 * (library `afterId`, HTTP `after`), before any store is opened or written. Pure.
 */
import { ValidationError } from './errors.js';
import { describe } from './field-checks.js';
import { JOB_STATES, type JobState } from './job.js';

/** Page size of a list when the caller names none. */
export const DEFAULT_PAGE_SIZE = 100;

/** The largest page a list returns; a larger `limit` is refused (never silently shortened). */
export const MAX_PAGE_SIZE = 1000;

/**
 * The largest job id every store can hold: SQLite ids are JavaScript-safe integers, so a larger
 * one (a valid PostgreSQL bigint) is refused on both alike rather than answered differently.
 */
export const MAX_JOB_ID = Number.MAX_SAFE_INTEGER;

/** Most ids one dead-letter purge may name. */
export const MAX_PURGE_IDS = 10_000;

/** The reason every face gives for a malformed or out-of-range job id (or `after` cursor). */
export const JOB_ID_RULE = `must be a job id (decimal digits, at most ${MAX_JOB_ID})`;

/** The reason every face gives for a bad page size. */
export const PAGE_SIZE_RULE = `must be an integer from 1 to ${MAX_PAGE_SIZE}`;

/** The reason every face gives for an unknown job state. */
export const JOB_STATE_RULE = `must be one of ${JOB_STATES.join(', ')}`;

/**
 * Parses a job id: a decimal integer of at most 16 digits that is a safe JavaScript integer
 * (ids start at 1 and count up, so real ids are far below that bound, and both stores compare
 * them exactly). Null for anything else: it cannot name a job, so a store answers not-found or
 * stale instead of letting the database raise a type error.
 */
export function parseJobId(id: unknown): number | null {
  if (typeof id !== 'string' || !/^[0-9]{1,16}$/.test(id)) return null;
  const value = Number(id);
  return Number.isSafeInteger(value) ? value : null;
}

/** A job id given by a caller, checked by {@link parseJobId}; anything else is refused naming `field`. */
export function jobId(id: unknown, field = 'id'): string {
  if (parseJobId(id) === null) throw new ValidationError(field, `${JOB_ID_RULE}, got ${describe(id)}`);
  return id as string;
}

/**
 * The keyset cursor of a job list: 0 (from the start) when omitted; anything but a job id is
 * refused naming `field` (`afterId` in the library and the CLI, `after` over HTTP).
 */
export function afterJobId(afterId: unknown, field = 'afterId'): number {
  if (afterId === undefined) return 0;
  const value = parseJobId(afterId);
  if (value === null) throw new ValidationError(field, `${JOB_ID_RULE}, got ${describe(afterId)}`);
  return value;
}

/**
 * A list's page size: {@link DEFAULT_PAGE_SIZE} when omitted. Anything but an integer from 1 to
 * {@link MAX_PAGE_SIZE} is refused: 0 would answer an empty page, and a larger one would
 * otherwise be cut short without the caller knowing.
 */
export function pageSize(limit: unknown, field = 'limit'): number {
  if (limit === undefined) return DEFAULT_PAGE_SIZE;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) {
    throw new ValidationError(field, `${PAGE_SIZE_RULE}, got ${describe(limit)}`);
  }
  return limit;
}

/**
 * The states a job list reads: every state when omitted; an unknown state is refused naming
 * `fieldAt(index)` (`states[1]` in the library; HTTP names its one `state` parameter).
 */
export function listStates(
  states: unknown,
  fieldAt: (index: number) => string = (index) => `states[${index}]`,
): JobState[] {
  if (states === undefined) return [...JOB_STATES];
  if (!Array.isArray(states)) {
    throw new ValidationError('states', `must be an array of job states, got ${describe(states)}`);
  }
  for (const [index, state] of states.entries()) {
    if (!(JOB_STATES as readonly unknown[]).includes(state)) {
      throw new ValidationError(fieldAt(index), `${JOB_STATE_RULE}, got ${describe(state)}`);
    }
  }
  return [...(states as JobState[])];
}

/** The ids of a dead-letter purge: undefined when omitted, else 1 to {@link MAX_PURGE_IDS} job ids. */
export function purgeIds(ids: unknown, field = 'ids'): string[] | undefined {
  if (ids === undefined) return undefined;
  if (!Array.isArray(ids)) throw new ValidationError(field, `must be an array of job ids, got ${describe(ids)}`);
  if (ids.length === 0 || ids.length > MAX_PURGE_IDS) {
    throw new ValidationError(field, `must hold 1 to ${MAX_PURGE_IDS} job ids, got ${ids.length}`);
  }
  return ids.map((id, index) => jobId(id, `${field}[${index}]`));
}

/**
 * A number-valued text parameter (a CLI flag, an HTTP query value) as the library sees it: a
 * decimal number literal becomes that number, anything else stays text for the parser to refuse.
 * One rule for every text face, so `limit=1.5`, `--limit 1.5` and `{ limit: 1.5 }` read alike.
 */
export function numberText(value: string): number | string {
  const trimmed = value.trim();
  return /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(trimmed) ? Number(trimmed) : value;
}

/**
 * A comma-separated text list (`state=pending,dead`, `--state pending,dead`, `--id 1,2`) as the
 * library's array. Items are not trimmed and blanks are kept, so `pending, dead` or `pending,`
 * is refused by the item's parser instead of read as something the caller did not write.
 */
export function listText(value: string): string[] {
  return value.split(',');
}
