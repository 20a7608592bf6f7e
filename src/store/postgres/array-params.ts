/**
 * The array parameters of the batched lease writes (completeMany, heartbeatMany, and the
 * repeated-completion check after a completion batch), written as PostgreSQL array literals once
 * per batch instead of handed to pg as JavaScript arrays.
 *
 * Why: pg serialises an array parameter element by element (each string through a regex escape,
 * the literal grown by concatenation), which was about 700 bytes of garbage per completed job,
 * the worker's third-largest allocation in a drain (docs/benchmarks.md, issue 17). Job ids
 * reach here as canonical decimal text (sqlJobId) and tokens as integers, so neither needs
 * quoting; text elements are quoted and escaped as array_in reads them.
 */
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

/** An `int[]` literal; every element must be an integer. */
export function intArrayParam(values: readonly number[]): string {
  for (const value of values) {
    if (!Number.isInteger(value)) throw new TypeError(`intArrayParam: ${value} is not an integer`);
  }
  return `{${values.join(',')}}`;
}

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
