/**
 * The array parameters of the batched lease writes (completeMany, heartbeatMany), written as
 * PostgreSQL array literals once per batch instead of handed to pg as JavaScript arrays.
 *
 * Why: pg serialises an array parameter element by element (each string through a regex escape,
 * the literal grown by concatenation), which was about 700 bytes of garbage per completed job,
 * the worker's third-largest allocation in a drain (docs/benchmarks.md, issue 17). Job ids
 * reach here as canonical decimal text (sqlJobId) and tokens as integers, so neither needs
 * quoting; text elements are quoted and escaped as array_in reads them.
 */

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
