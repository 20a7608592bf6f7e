/**
 * ClaimedRowValues (src/store/claimed-row-values.ts): a claim reads each run of equal values once
 * and its rows share the result, which is therefore read-only.
 */
import { describe, expect, it } from 'vitest';
import { ReadonlyDate } from '../../src/job/readonly-date.js';
import { ClaimedRowValues } from '../../src/store/claimed-row-values.js';

describe('ClaimedRowValues', () => {
  it('shares one Date per run of equal instants in a column, from numbers and from decimal text', () => {
    const repeated = new ClaimedRowValues();
    const first = repeated.instant('runAt', 1_000);
    expect(repeated.instant('runAt', 1_000)).toBe(first);
    const text = repeated.instant('createdAt', '1000');
    expect(text).not.toBe(first); // another column keeps its own run
    expect(text.getTime()).toBe(1_000);
    expect(repeated.instant('createdAt', '1000')).toBe(text);
    const next = repeated.instant('runAt', 2_000);
    expect(next.getTime()).toBe(2_000);
    // A run is the previous row's value only: coming back to an earlier value makes a new Date.
    const again = repeated.instant('runAt', 1_000);
    expect(again).not.toBe(first);
    expect(again).toEqual(first);
  });

  it('gives read-only Dates that read, compare and serialise as ordinary ones', () => {
    const instant = new ClaimedRowValues().instant('leaseUntil', Date.UTC(2030, 5, 1, 9));
    expect(instant).toBeInstanceOf(Date);
    expect(instant).toBeInstanceOf(ReadonlyDate);
    expect(instant).toEqual(new Date('2030-06-01T09:00:00Z'));
    expect(instant.toISOString()).toBe('2030-06-01T09:00:00.000Z');
    expect(JSON.stringify({ at: instant })).toBe('{"at":"2030-06-01T09:00:00.000Z"}');
    expect(structuredClone(instant)).toEqual(new Date('2030-06-01T09:00:00Z'));
    expect(+instant).toBe(Date.UTC(2030, 5, 1, 9));
    expect(() => instant.setTime(0)).toThrow(
      "a claimed job's instants are read-only (the jobs of one claim share them): setTime() refused on 2030-06-01T09:00:00.000Z; copy it first with new Date(date)",
    );
    for (const setter of ['setMilliseconds', 'setUTCHours', 'setDate', 'setMonth', 'setFullYear'] as const) {
      expect(() => (instant[setter] as (value: number) => number)(1), setter).toThrow(TypeError);
    }
    expect(instant.getTime()).toBe(Date.UTC(2030, 5, 1, 9));
  });

  it('shares one frozen policy per run of equal texts', () => {
    const repeated = new ClaimedRowValues();
    const text = '{"baseDelayMs":1000,"factor":2}';
    const policy = repeated.policy(text);
    expect(repeated.policy(text)).toBe(policy);
    expect(Object.isFrozen(policy)).toBe(true);
    expect(repeated.policy('{"baseDelayMs":5}')).toEqual({ baseDelayMs: 5 });
  });
});
