/**
 * The job filter: which jobs a list, a count or a bulk action selects (state, queue, kind, an id
 * range, a run-at range and one payload equality), and the one parser every face calls. Pure.
 *
 * The HTTP query string, an HTTP body's `filter` object and the CLI all give the filter as text
 * fields; {@link parseJobFilterText} turns them into a {@link JobFilter}, refusing bad input with a
 * ValidationError naming the field in the caller's spelling. The library passes a JobFilter
 * directly and the stores check it again with {@link checkJobFilter}, so no face can send a store
 * something it would refuse from another.
 *
 * The payload grammar is deliberately tiny (one path of object keys, `=`, one JSON scalar): the
 * stores bind the path and the value as SQL parameters, so nothing a caller writes becomes SQL.
 */
import { ValidationError } from './errors.js';
import { describe, isPlainObject } from './field-checks.js';
import { parseInstant } from './instant.js';
import { JOB_STATES, type JobState } from './job.js';
import { jobId, listStates, listText, parseJobId } from './list-params.js';

/** One payload equality: the value at `path` (object keys, outermost first) equals `value` as JSON. */
export interface PayloadEquality {
  path: readonly string[];
  value: string | number | boolean | null;
}

/** Which jobs a list, a count or a bulk action selects; every field optional, fields combine with AND. */
export interface JobFilter {
  /** Only jobs in these states; all states when omitted. `dead` reads the dead-letter table. */
  states?: readonly JobState[] | undefined;
  queue?: string | undefined;
  kind?: string | undefined;
  /** Ids from this one, inclusive. */
  idFrom?: string | undefined;
  /** Ids up to this one, inclusive. */
  idTo?: string | undefined;
  /** Run-at from this instant, inclusive. */
  runAtFrom?: Date | undefined;
  /** Run-at before this instant (exclusive). */
  runAtTo?: Date | undefined;
  /** The payload holds this JSON value at this path. */
  payload?: PayloadEquality | undefined;
}

/** The order of a job list: by id (submit order), ascending or descending. */
export const LIST_ORDERS = ['asc', 'desc'] as const;

/** One of {@link LIST_ORDERS}. */
export type ListOrder = (typeof LIST_ORDERS)[number];

/** What a bulk action does to every job a filter matches. */
export const BULK_ACTIONS = ['retry', 'purge', 'cancel', 'reschedule'] as const;

/** One of {@link BULK_ACTIONS}. */
export type BulkAction = (typeof BULK_ACTIONS)[number];

/** The states each bulk action acts on: retry and purge take dead letters, cancel live jobs, reschedule pending ones. */
export const BULK_ACTION_STATES: Readonly<Record<BulkAction, readonly JobState[]>> = {
  retry: ['dead'],
  purge: ['dead'],
  cancel: ['pending', 'running'],
  reschedule: ['pending'],
};

/** Longest payload filter text. */
export const MAX_PAYLOAD_FILTER_LENGTH = 200;
/** Deepest payload path. */
export const MAX_PAYLOAD_PATH_DEPTH = 8;
/** Longest key of a payload path. */
export const MAX_PAYLOAD_KEY_LENGTH = 64;

const NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}/;
const QUOTED_KEY = /^\["([^"\\]{1,64})"\]/;
const NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;
const STRING = /^"([^"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"$/;

/** The reason every face gives for a payload filter it cannot read, ending with where and what was expected. */
function payloadError(field: string, text: string, position: number, expected: string): ValidationError {
  return new ValidationError(
    field,
    `must be a payload filter like payload.customerId = 42 (at character ${position + 1}: expected ${expected}), got ${describe(text)}`,
  );
}

/**
 * Parses `payload.a.b = <JSON scalar>` (grammar in docs/dashboard-api.md). Anything else is
 * refused naming `field`: another operator, a missing or non-scalar value, trailing text, an
 * array index, a path deeper than {@link MAX_PAYLOAD_PATH_DEPTH}.
 */
export function parsePayloadFilter(text: unknown, field = 'payload'): PayloadEquality {
  if (typeof text !== 'string') throw new ValidationError(field, `must be text, got ${describe(text)}`);
  if (text.length > MAX_PAYLOAD_FILTER_LENGTH) {
    throw new ValidationError(field, `must be at most ${MAX_PAYLOAD_FILTER_LENGTH} characters, got ${text.length}`);
  }
  let at = 0;
  const skipSpace = () => {
    while (text[at] === ' ' || text[at] === '\t') at += 1;
  };
  skipSpace();
  if (!text.startsWith('payload', at)) throw payloadError(field, text, at, '"payload"');
  at += 'payload'.length;
  const path: string[] = [];
  while (text[at] === '.' || text[at] === '[') {
    if (path.length === MAX_PAYLOAD_PATH_DEPTH) {
      throw payloadError(field, text, at, `"=" (a path has at most ${MAX_PAYLOAD_PATH_DEPTH} keys)`);
    }
    if (text[at] === '.') {
      const name = NAME.exec(text.slice(at + 1));
      if (!name) throw payloadError(field, text, at + 1, 'a key (letters, digits, _ or -, not starting with a digit)');
      path.push(name[0]);
      at += 1 + name[0].length;
    } else {
      const quoted = QUOTED_KEY.exec(text.slice(at));
      if (!quoted?.[1]) throw payloadError(field, text, at, '["key"] (a quoted key of 1 to 64 characters, no " or \\)');
      path.push(quoted[1]);
      at += quoted[0].length;
    }
  }
  if (path.length === 0) throw payloadError(field, text, at, '".key" after payload');
  skipSpace();
  if (text[at] !== '=') throw payloadError(field, text, at, '"=" (the only operator)');
  at += 1;
  if (text[at] === '=') throw payloadError(field, text, at, 'a value ("=" is written once)');
  skipSpace();
  const valueText = text.slice(at).trimEnd();
  return {
    path,
    value: scalarOf(valueText, () => payloadError(field, text, at, 'a JSON number, string, true, false or null')),
  };
}

function scalarOf(valueText: string, refuse: () => ValidationError): PayloadEquality['value'] {
  if (valueText === 'true') return true;
  if (valueText === 'false') return false;
  if (valueText === 'null') return null;
  if (NUMBER.test(valueText)) {
    const value = Number(valueText);
    if (!Number.isFinite(value)) throw refuse();
    return value;
  }
  if (STRING.test(valueText)) return JSON.parse(valueText) as string;
  throw refuse();
}

/** The payload filter as text again (for operation summaries and logs); parses back to the same filter. */
export function payloadFilterText(filter: PayloadEquality): string {
  const path = filter.path.map((key) => (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) ? `.${key}` : `["${key}"]`)).join('');
  return `payload${path} = ${JSON.stringify(filter.value)}`;
}

/** The text fields of a filter, as a query string or a JSON body's `filter` carries them. */
export interface JobFilterText {
  state?: string | undefined;
  queue?: string | undefined;
  kind?: string | undefined;
  idFrom?: string | undefined;
  idTo?: string | undefined;
  runAtFrom?: string | undefined;
  runAtTo?: string | undefined;
  payload?: string | undefined;
}

/** The text fields a filter may have; any other is refused. */
export const JOB_FILTER_TEXT_FIELDS = [
  'state',
  'queue',
  'kind',
  'idFrom',
  'idTo',
  'runAtFrom',
  'runAtTo',
  'payload',
] as const;

/** Reads an instant given as text: RFC 3339, or decimal epoch milliseconds (the submit `runAt` rule). */
function instantText(field: string, value: string): Date {
  return parseInstant(field, /^[0-9]{1,16}$/.test(value) ? Number(value) : value);
}

/**
 * The filter of a text face (HTTP query or body, CLI flags). `prefix` goes before each field's
 * name in errors (`filter.` for a body). Queue and kind are checked by the face's own schema and
 * again by {@link checkJobFilter}.
 */
export function parseJobFilterText(input: JobFilterText, prefix = ''): JobFilter {
  const filter: JobFilter = {};
  if (input.state !== undefined) filter.states = listStates(listText(input.state), () => `${prefix}state`);
  if (input.queue !== undefined) filter.queue = input.queue;
  if (input.kind !== undefined) filter.kind = input.kind;
  if (input.idFrom !== undefined) filter.idFrom = jobId(input.idFrom, `${prefix}idFrom`);
  if (input.idTo !== undefined) filter.idTo = jobId(input.idTo, `${prefix}idTo`);
  if (input.runAtFrom !== undefined) filter.runAtFrom = instantText(`${prefix}runAtFrom`, input.runAtFrom);
  if (input.runAtTo !== undefined) filter.runAtTo = instantText(`${prefix}runAtTo`, input.runAtTo);
  if (input.payload !== undefined) filter.payload = parsePayloadFilter(input.payload, `${prefix}payload`);
  return checkJobFilter(filter, prefix);
}

/**
 * Checks a filter given as values (the library, and every store before its SQL): known states,
 * job ids, valid Dates, ordered ranges, a payload path and scalar the grammar could have produced.
 * Returns the filter unchanged; refuses naming `prefix + field`.
 */
export function checkJobFilter(filter: JobFilter, prefix = ''): JobFilter {
  const given: unknown = filter;
  if (!isPlainObject(given)) throw new ValidationError(`${prefix}filter`, `must be an object, got ${describe(given)}`);
  if (filter.states !== undefined) listStates(filter.states, (i) => `${prefix}states[${i}]`);
  for (const key of ['queue', 'kind'] as const) {
    const value = filter[key];
    if (value !== undefined && (typeof value !== 'string' || value.length === 0)) {
      throw new ValidationError(`${prefix}${key}`, `must be a non-empty string, got ${describe(value)}`);
    }
  }
  for (const key of ['idFrom', 'idTo'] as const) {
    if (filter[key] !== undefined) jobId(filter[key], `${prefix}${key}`);
  }
  for (const key of ['runAtFrom', 'runAtTo'] as const) {
    const value = filter[key];
    if (value !== undefined && (!(value instanceof Date) || Number.isNaN(value.getTime()))) {
      throw new ValidationError(`${prefix}${key}`, `must be a valid Date, got ${describe(value)}`);
    }
  }
  if (filter.idFrom !== undefined && filter.idTo !== undefined) {
    if ((parseJobId(filter.idFrom) ?? 0) > (parseJobId(filter.idTo) ?? 0)) {
      throw new ValidationError(`${prefix}idTo`, `must not be below idFrom (${filter.idFrom}), got ${filter.idTo}`);
    }
  }
  if (filter.runAtFrom && filter.runAtTo && filter.runAtFrom.getTime() > filter.runAtTo.getTime()) {
    throw new ValidationError(`${prefix}runAtTo`, `must not be before runAtFrom (${filter.runAtFrom.toISOString()})`);
  }
  if (filter.payload !== undefined) checkPayloadEquality(filter.payload, `${prefix}payload`);
  return filter;
}

function checkPayloadEquality(payload: PayloadEquality, field: string): void {
  const given: unknown = payload;
  if (!isPlainObject(given) || !Array.isArray(given.path)) {
    throw new ValidationError(field, 'must be { path: string[], value: JSON scalar }');
  }
  if (payload.path.length < 1 || payload.path.length > MAX_PAYLOAD_PATH_DEPTH) {
    throw new ValidationError(
      `${field}.path`,
      `must hold 1 to ${MAX_PAYLOAD_PATH_DEPTH} keys, got ${payload.path.length}`,
    );
  }
  for (const [i, key] of payload.path.entries()) {
    if (typeof key !== 'string' || key.length < 1 || key.length > MAX_PAYLOAD_KEY_LENGTH || /["\\]/.test(key)) {
      throw new ValidationError(
        `${field}.path[${i}]`,
        `must be a key of 1 to ${MAX_PAYLOAD_KEY_LENGTH} characters without " or \\, got ${describe(key)}`,
      );
    }
  }
  const { value } = payload;
  const scalar =
    value === null ||
    typeof value === 'boolean' ||
    typeof value === 'string' ||
    (typeof value === 'number' && Number.isFinite(value));
  if (!scalar)
    throw new ValidationError(
      `${field}.value`,
      `must be a JSON number, string, boolean or null, got ${describe(value)}`,
    );
}

/**
 * The states a bulk action reads for `filter`: the action's own states, narrowed to the filter's
 * when it names some. A filter state the action does not act on is refused naming `field`.
 */
export function bulkActionStates(action: BulkAction, filter: JobFilter, field = 'filter.state'): JobState[] {
  const own = BULK_ACTION_STATES[action];
  if (filter.states === undefined) return [...own];
  for (const state of filter.states) {
    if (!own.includes(state)) {
      throw new ValidationError(field, `${action} acts on ${own.join(' and ')} jobs only, got ${state}`);
    }
  }
  return [...new Set(filter.states)];
}

/** A bulk action name, refused naming `field` unless it is one of {@link BULK_ACTIONS}. */
export function bulkAction(value: unknown, field = 'action'): BulkAction {
  if (typeof value !== 'string' || !(BULK_ACTIONS as readonly string[]).includes(value)) {
    throw new ValidationError(field, `must be one of ${BULK_ACTIONS.join(', ')}, got ${describe(value)}`);
  }
  return value as BulkAction;
}

/** A list order, `asc` when omitted; anything else is refused naming `field`. */
export function listOrder(value: unknown, field = 'order'): ListOrder {
  if (value === undefined) return 'asc';
  if (typeof value !== 'string' || !(LIST_ORDERS as readonly string[]).includes(value)) {
    throw new ValidationError(field, `must be one of ${LIST_ORDERS.join(', ')}, got ${describe(value)}`);
  }
  return value as ListOrder;
}

/** Whether every state of `filter` (all when omitted) is one of `states`. */
export function filterStatesWithin(filter: JobFilter, states: readonly JobState[]): boolean {
  return (filter.states ?? JOB_STATES).every((state) => states.includes(state));
}
