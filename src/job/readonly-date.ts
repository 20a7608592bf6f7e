/**
 * A Date whose setters throw: the instants a claim hands out (see ClaimedRowValues in
 * ../store/claimed-row-values.ts) are shared between the jobs of one claim, so a change made
 * through one job's `runAt` must not move another's. Everything that reads a Date works on it
 * (`getTime`, `toISOString`, comparisons, `instanceof Date`, JSON, structuredClone); to change
 * one, copy it first: `new Date(job.runAt)`.
 */

const SETTERS = [
  'setTime',
  'setMilliseconds',
  'setUTCMilliseconds',
  'setSeconds',
  'setUTCSeconds',
  'setMinutes',
  'setUTCMinutes',
  'setHours',
  'setUTCHours',
  'setDate',
  'setUTCDate',
  'setMonth',
  'setUTCMonth',
  'setFullYear',
  'setUTCFullYear',
  'setYear',
] as const;

/** A read-only instant; see the module comment. */
export class ReadonlyDate extends Date {}

for (const setter of SETTERS) {
  Object.defineProperty(ReadonlyDate.prototype, setter, {
    value: function refuseChange(this: ReadonlyDate): never {
      throw new TypeError(
        `a claimed job's instants are read-only (the jobs of one claim share them): ${setter}() refused on ${this.toISOString()}; copy it first with new Date(date)`,
      );
    },
    writable: false,
    enumerable: false,
    configurable: false,
  });
}
