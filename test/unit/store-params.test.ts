/**
 * The parameter rules both stores and every face call (src/job/list-params.ts, re-exported by
 * src/store/store-params.ts): one page-size rule, one job-id rule, one cursor rule, one state
 * check, each refusing bad input with a ValidationError naming the field.
 */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/job/errors.js';
import type { JobState } from '../../src/job/job.js';
import * as listParams from '../../src/job/list-params.js';
import {
  JOB_ID_RULE,
  jobId,
  listText,
  MAX_PURGE_IDS,
  numberText,
  PAGE_SIZE_RULE,
  purgeIds,
} from '../../src/job/list-params.js';
import {
  afterJobId,
  claimLimit,
  DEFAULT_PAGE_SIZE,
  listStates,
  MAX_PAGE_SIZE,
  pageSize,
  parseJobId,
  positiveMs,
} from '../../src/store/store-params.js';

/** The field a call's ValidationError names (fails the test when it throws anything else). */
function refusedField(call: () => unknown): string {
  try {
    call();
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return (error as ValidationError).field;
  }
  throw new Error('the call was accepted');
}

/** The message a call's ValidationError carries. */
function refusal(call: () => unknown): string {
  try {
    call();
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return (error as ValidationError).message;
  }
  throw new Error('the call was accepted');
}

it('is one set of functions: the stores use the very parsers the faces call', () => {
  expect(pageSize).toBe(listParams.pageSize);
  expect(parseJobId).toBe(listParams.parseJobId);
  expect(afterJobId).toBe(listParams.afterJobId);
  expect(listStates).toBe(listParams.listStates);
});

describe('pageSize', () => {
  it('defaults to 100 and takes 1 to 1000', () => {
    expect(DEFAULT_PAGE_SIZE).toBe(100);
    expect(MAX_PAGE_SIZE).toBe(1000);
    expect(pageSize(undefined)).toBe(100);
    expect(pageSize(1)).toBe(1);
    expect(pageSize(1000)).toBe(1000);
  });

  it('refuses more than 1000 instead of silently returning a shorter page', () => {
    expect(() => pageSize(1001)).toThrow('limit: must be an integer from 1 to 1000, got 1001');
    expect(refusedField(() => pageSize(1_000_000))).toBe('limit');
  });

  it('refuses 0, negatives, fractions and non-numbers, naming limit (or the given field)', () => {
    for (const limit of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '10', null]) {
      expect(
        refusedField(() => pageSize(limit)),
        String(limit),
      ).toBe('limit');
    }
    expect(() => pageSize(0)).toThrow('limit: must be an integer from 1 to 1000, got 0');
    expect(refusal(() => pageSize('ten'))).toBe(`limit: ${PAGE_SIZE_RULE}, got "ten"`);
    expect(refusedField(() => pageSize(0, 'pageSize'))).toBe('pageSize');
  });
});

describe('parseJobId', () => {
  it('accepts decimal ids up to the largest safe integer', () => {
    expect(parseJobId('1')).toBe(1);
    expect(parseJobId('007')).toBe(7);
    expect(parseJobId(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('answers null for anything that cannot name a job', () => {
    for (const id of ['', 'abc', '-1', '1.5', ' 1', '1e3', '9007199254740993', '99999999999999999', 12, null]) {
      expect(parseJobId(id), String(id)).toBeNull();
    }
  });
});

describe('jobId and purgeIds', () => {
  it('returns a good id unchanged and refuses a bad one with the one job-id message', () => {
    expect(jobId('42')).toBe('42');
    expect(JOB_ID_RULE).toBe('must be a job id (decimal digits, at most 9007199254740991)');
    expect(refusal(() => jobId('1.5'))).toBe(`id: ${JOB_ID_RULE}, got "1.5"`);
    expect(refusal(() => jobId(7))).toBe(`id: ${JOB_ID_RULE}, got 7`);
    expect(refusal(() => jobId('9007199254740992'))).toBe(`id: ${JOB_ID_RULE}, got "9007199254740992"`);
    expect(refusedField(() => jobId(' 1', 'jobId'))).toBe('jobId');
  });

  it('checks purge ids by index, and refuses an empty, oversized or non-array list', () => {
    expect(purgeIds(undefined)).toBeUndefined();
    expect(purgeIds(['1', '2'])).toEqual(['1', '2']);
    expect(refusal(() => purgeIds(['1', 'x']))).toBe(`ids[1]: ${JOB_ID_RULE}, got "x"`);
    expect(refusedField(() => purgeIds([]))).toBe('ids');
    expect(refusedField(() => purgeIds('1'))).toBe('ids');
    expect(refusedField(() => purgeIds(Array.from({ length: MAX_PURGE_IDS + 1 }, () => '1')))).toBe('ids');
  });
});

describe('afterJobId and listStates', () => {
  it('reads a job-id cursor, 0 when omitted, and refuses a non-id naming afterId (or the given field)', () => {
    expect(afterJobId(undefined)).toBe(0);
    expect(afterJobId('42')).toBe(42);
    expect(refusedField(() => afterJobId('abc'))).toBe('afterId');
    expect(() => afterJobId('-1')).toThrow(`afterId: ${JOB_ID_RULE}, got "-1"`);
    expect(refusal(() => afterJobId('', 'after'))).toBe(`after: ${JOB_ID_RULE}, got ""`);
  });

  it('lists every state when omitted and refuses an unknown one by index', () => {
    expect(listStates(undefined)).toEqual(['pending', 'running', 'done', 'cancelled', 'dead']);
    expect(listStates(['dead', 'pending'])).toEqual(['dead', 'pending']);
    expect(refusedField(() => listStates(['pending', 'asleep' as JobState]))).toBe('states[1]');
    expect(refusal(() => listStates(['asleep']))).toBe(
      'states[0]: must be one of pending, running, done, cancelled, dead, got "asleep"',
    );
    expect(refusedField(() => listStates(['x'], () => 'state'))).toBe('state');
    expect(refusedField(() => listStates('pending'))).toBe('states');
  });
});

describe('text parameters', () => {
  it('reads number text as the number and keeps anything else as text', () => {
    expect(numberText('10')).toBe(10);
    expect(numberText(' 1.5 ')).toBe(1.5);
    expect(numberText('-1')).toBe(-1);
    expect(numberText('ten')).toBe('ten');
    expect(numberText('')).toBe('');
  });

  it('splits a list on commas only, keeping blanks and spaces for the item parser to refuse', () => {
    expect(listText('pending,dead')).toEqual(['pending', 'dead']);
    expect(listText('pending, dead')).toEqual(['pending', ' dead']);
    expect(listText('pending,')).toEqual(['pending', '']);
  });
});

describe('claimLimit and positiveMs', () => {
  it('lets a claim ask for 0 jobs but not for a negative or fractional number', () => {
    expect(claimLimit(0)).toBe(0);
    expect(claimLimit(5)).toBe(5);
    expect(refusedField(() => claimLimit(-1))).toBe('limit');
    expect(refusedField(() => claimLimit(0.5))).toBe('limit');
  });

  it('takes whole positive milliseconds, naming the field it checks', () => {
    expect(positiveMs('leaseMs', 30_000)).toBe(30_000);
    expect(refusedField(() => positiveMs('leaseMs', 0))).toBe('leaseMs');
    expect(refusedField(() => positiveMs('ttlMs', 1.5))).toBe('ttlMs');
  });
});
