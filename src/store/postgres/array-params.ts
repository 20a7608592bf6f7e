/**
 * Array parameters written as PostgreSQL array literals once per batch instead of handed to pg as
 * JavaScript arrays: the batched lease writes (completeMany, heartbeatMany, and the
 * repeated-completion check after a completion batch) and the submit inserts' column arrays.
 *
 * Why: pg serialises an array parameter element by element (each string through a regex escape,
 * each Date through its local-time formatter, the literal grown by concatenation), which was
 * about 700 bytes of garbage per completed job, the worker's third-largest allocation in a drain,
 * and a tenth of a batch submit's client CPU (docs/benchmarks.md, issue 17). Job ids reach here
 * as canonical decimal text (sqlJobId) and numbers as integers, so neither needs quoting; text
 * elements are quoted and escaped as array_in reads them.
 */
import { LATEST_RUN_AT_MS } from '../../job/instant.js';
import type { JobLease } from '../store.js';
import { sqlJobId } from './job-row.js';

/** Leases as the parallel arrays a batched lease write binds. */
export interface LeaseBatch {
  ids: string[];
  tokens: number[];
  owners: (string | null)[];
  /** Each element's position in the caller's list. */
  indexes: number[];
}

/**
 * The leases a batched write sends (those `include` accepts, by position; all when omitted),
 * skipping ids no job can have (their answer stays the caller's default, stale or null).
 */
export function leaseBatch(leases: readonly JobLease[], include?: (index: number) => boolean): LeaseBatch {
  const batch: LeaseBatch = { ids: [], tokens: [], owners: [], indexes: [] };
  for (let index = 0; index < leases.length; index += 1) {
    if (include && !include(index)) continue;
    const lease = leases[index]!;
    const id = sqlJobId(lease.id);
    if (id === null) continue;
    batch.ids.push(id);
    batch.tokens.push(lease.token);
    batch.owners.push(lease.leaseOwner ?? null);
    batch.indexes.push(index);
  }
  return batch;
}

/** A batch's ids, tokens and owners as the `bigint[]`, `int[]` and `text[]` literals the writes bind. */
export function leaseBatchParams(batch: LeaseBatch): [ids: string, tokens: string, owners: string] {
  return [bigintArrayParam(batch.ids), intArrayParam(batch.tokens), textArrayParam(batch.owners)];
}

/** A `bigint[]` literal of canonical decimal ids (sqlJobId's output): `{1,2,3}`. */
export function bigintArrayParam(ids: readonly string[]): string {
  return `{${ids.join(',')}}`;
}

/** An `int[]` (or `bigint[]`) literal; every element must be an integer or null (NULL). */
export function intArrayParam(values: readonly (number | null)[]): string {
  return numberArrayParam(values, true);
}

/** A `double precision[]` literal; every element must be a finite number or null (NULL). */
export function floatArrayParam(values: readonly (number | null)[]): string {
  return numberArrayParam(values, false);
}

/** The literal of {@link intArrayParam} (`integers`) or {@link floatArrayParam}. */
function numberArrayParam(values: readonly (number | null)[], integers: boolean): string {
  let literal = '{';
  for (let i = 0; i < values.length; i += 1) {
    const value = values[i];
    if (i > 0) literal += ',';
    if (value === null || value === undefined) literal += 'NULL';
    else if (integers ? Number.isSafeInteger(value) : Number.isFinite(value)) literal += value;
    else if (integers) throw new TypeError(`intArrayParam: ${value} is not an integer`);
    else throw new TypeError(`floatArrayParam: ${value} is not a finite number`);
  }
  return `${literal}}`;
}

/**
 * A `timestamptz[]` literal of instants in years 1 to 9999 (submits accept 1970 to 9999), null as
 * NULL: each element in ISO 8601 UTC, exact to the millisecond like the Date itself.
 */
export function timestamptzArrayParam(values: readonly (Date | null)[]): string {
  let literal = '{';
  for (let i = 0; i < values.length; i += 1) {
    const value = values[i];
    if (i > 0) literal += ',';
    if (value === null || value === undefined) {
      literal += 'NULL';
      continue;
    }
    const ms = value.getTime();
    if (!(ms >= EARLIEST_ISO_MS && ms <= LATEST_RUN_AT_MS)) {
      throw new TypeError(`timestamptzArrayParam: ${String(value)} is outside years 1 to 9999`);
    }
    literal += `"${value.toISOString()}"`;
  }
  return `${literal}}`;
}

/**
 * The first instant whose toISOString() PostgreSQL reads as written (year 0 is PostgreSQL's 1 BC,
 * and earlier years gain a sign). The last is the last one a submit accepts, which is also the
 * last of year 9999, after which the year gains a sign too.
 */
const EARLIEST_ISO_MS = Date.parse('0001-01-01T00:00:00.000Z');

/** A `text[]` literal: each element double-quoted (backslash and quote escaped), null as NULL. */
export function textArrayParam(values: readonly (string | null)[]): string {
  let literal = '{';
  for (let i = 0; i < values.length; i += 1) {
    const value = values[i];
    if (i > 0) literal += ',';
    if (value === null || value === undefined) literal += 'NULL';
    else if (value.includes('"') || value.includes('\\')) literal += `"${value.replace(/[\\"]/g, '\\$&')}"`;
    else literal += `"${value}"`;
  }
  return `${literal}}`;
}

/**
 * A batch column as the array a submit statement binds: `[value]` when every element has the
 * same `key` (the statements read an array of one element as every row's value: batchColumn in
 * sql-fragments.ts), else `values` itself. A batch of one is the same either way.
 */
export function sharedOrEach<T>(values: readonly T[], key: (value: T) => unknown = (value) => value): readonly T[] {
  if (values.length <= 1) return values;
  const first = key(values[0]!);
  for (let i = 1; i < values.length; i += 1) {
    if (key(values[i]!) !== first) return values;
  }
  return [values[0]!];
}
