/**
 * Small field checks shared by every validator of caller input (jobs, schedules, list params):
 * each throws a {@link ValidationError} naming the field, with the bad value described briefly.
 */
import { ValidationError } from './errors.js';

/** A short description of a bad value for error messages (never the whole payload). */
export function describe(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString();
  if (value === null) return 'null';
  return typeof value;
}

/** True for a plain object literal (not null, an array or a Date): the shape of an options bag. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

/** Refuses any key of `value` not in `known`, naming it as `prefix + key` and listing the known ones. */
export function rejectUnknownFields(value: Record<string, unknown>, known: Set<string>, prefix: string): void {
  for (const key of Object.keys(value)) {
    if (!known.has(key)) {
      throw new ValidationError(`${prefix}${key}`, `unknown option (known: ${[...known].join(', ')})`);
    }
  }
}

/** `value` as an integer in [min, max], or a ValidationError naming `field`. */
export function integerIn(field: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new ValidationError(field, `must be an integer, got ${describe(value)}`);
  }
  if (value < min || value > max) {
    throw new ValidationError(field, `must be between ${min} and ${max}, got ${value}`);
  }
  return value;
}

/** `value` as a finite number of at least `min`, or a ValidationError naming `field`. */
export function finiteAtLeast(field: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new ValidationError(field, `must be a finite number, got ${describe(value)}`);
  }
  if (value < min) throw new ValidationError(field, `must be at least ${min}, got ${value}`);
  return value;
}
