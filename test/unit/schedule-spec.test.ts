import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/job/errors.js';
import { DEFAULT_RETRY_POLICY } from '../../src/job/job-spec.js';
import { compileCron } from '../../src/schedule/cron-pattern.js';
import { plannedRun } from '../../src/schedule/misfire.js';
import {
  DEFAULT_MISFIRE_POLICY,
  jobSpecForRun,
  normalizeScheduleSpec,
  type ScheduleInput,
} from '../../src/schedule/schedule.js';

const valid: ScheduleInput = { id: 'nightly-report', cron: '0 3 * * *', job: { kind: 'report.build' } };

function fieldOf(input: unknown): string {
  try {
    normalizeScheduleSpec(input);
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return (error as ValidationError).field;
  }
  throw new Error('expected a ValidationError, but the input was accepted');
}

describe('normalizeScheduleSpec', () => {
  it('fills in the defaults', () => {
    expect(normalizeScheduleSpec(valid)).toEqual({
      id: 'nightly-report',
      cron: '0 3 * * *',
      timeZone: 'UTC',
      job: {
        kind: 'report.build',
        queue: 'default',
        payloadJson: 'null',
        priority: 0,
        maxAttempts: 5,
        retryPolicy: DEFAULT_RETRY_POLICY,
        timeoutMs: null,
      },
      jitterMs: 0,
      jitterMode: 'stable',
      misfire: DEFAULT_MISFIRE_POLICY,
      paused: false,
    });
  });

  it('keeps every option given, normalising whitespace in the cron expression', () => {
    const spec = normalizeScheduleSpec({
      id: 'tenant:42.sync_v2',
      cron: ' 0  */5 * * * 1-5 ',
      timeZone: 'Australia/Lord_Howe',
      job: {
        kind: 'sync',
        payload: { tenant: 42 },
        queue: 'slow',
        priority: -3,
        maxAttempts: 9,
        retry: { factor: 3 },
        timeoutMs: 5000,
      },
      jitterMs: 60_000,
      jitterMode: 'per_occurrence',
      misfire: { policy: 'catch_up', catchUpWindowMs: 600_000, maxCatchUpRuns: 3 },
      paused: true,
    });
    expect(spec).toMatchObject({
      cron: '0 */5 * * * 1-5',
      timeZone: 'Australia/Lord_Howe',
      jitterMs: 60_000,
      jitterMode: 'per_occurrence',
      misfire: { policy: 'catch_up', catchUpWindowMs: 600_000, maxCatchUpRuns: 3 },
      paused: true,
      job: { queue: 'slow', payloadJson: '{"tenant":42}', priority: -3, maxAttempts: 9, timeoutMs: 5000 },
    });
    expect(spec.job.retryPolicy.factor).toBe(3);
  });

  it.each([
    ['a cron expression croner cannot parse', { cron: '61 * * * *' }, 'cron'],
    ['illegal characters in cron', { cron: 'every day' }, 'cron'],
    ['7 fields (a year)', { cron: '0 0 3 * * * 2027' }, 'cron'],
    ['4 fields', { cron: '0 3 * *' }, 'cron'],
    ['a nickname', { cron: '@daily' }, 'cron'],
    ['"?" (read as the current time by croner)', { cron: '0 ? * * *' }, 'cron'],
    ['a pattern that never matches', { cron: '0 0 31 2 *' }, 'cron'],
    ['a cron that is not a string', { cron: 5 }, 'cron'],
    ['an unknown time zone', { timeZone: 'Mars/Olympus_Mons' }, 'timeZone'],
    ['an empty time zone', { timeZone: '' }, 'timeZone'],
    ['a negative jitter', { jitterMs: -1 }, 'jitterMs'],
    ['a NaN jitter', { jitterMs: Number.NaN }, 'jitterMs'],
    ['an infinite jitter', { jitterMs: Number.POSITIVE_INFINITY }, 'jitterMs'],
    ['a jitter over a day', { jitterMs: 24 * 3_600_000 + 1 }, 'jitterMs'],
    ['an unknown jitter mode', { jitterMode: 'random' }, 'jitterMode'],
    ['an id over 200 characters', { id: 'x'.repeat(201) }, 'id'],
    ['an id with a space', { id: 'nightly report' }, 'id'],
    ['an empty id', { id: '' }, 'id'],
    ['an unknown top-level field', { every: '5m' }, 'every'],
    ['a missing job', { job: undefined }, 'job'],
    ['a job without a kind', { job: {} }, 'job.kind'],
    ['a one-off option in the job template', { job: { kind: 'k', runAt: 0 } }, 'job.runAt'],
    ['an idempotency key in the job template', { job: { kind: 'k', idempotencyKey: 'a' } }, 'job.idempotencyKey'],
    ['a bad queue in the job template', { job: { kind: 'k', queue: 'no spaces' } }, 'job.queue'],
    ['a non-JSON payload', { job: { kind: 'k', payload: { n: Number.NaN } } }, 'job.payload.n'],
    ['a bad retry override', { job: { kind: 'k', retry: { factor: 0.5 } } }, 'job.retry.factor'],
    ['an unknown misfire policy', { misfire: { policy: 'burst' } }, 'misfire.policy'],
    ['an unknown misfire field', { misfire: { policy: 'skip', window: 5 } }, 'misfire.window'],
    ['a catch-up window on skip', { misfire: { catchUpWindowMs: 5000 } }, 'misfire.catchUpWindowMs'],
    ['a zero catch-up window', { misfire: { policy: 'catch_up', catchUpWindowMs: 0 } }, 'misfire.catchUpWindowMs'],
    ['a NaN catch-up cap', { misfire: { policy: 'catch_up', maxCatchUpRuns: Number.NaN } }, 'misfire.maxCatchUpRuns'],
    ['a catch-up cap over 1000', { misfire: { policy: 'catch_up', maxCatchUpRuns: 1001 } }, 'misfire.maxCatchUpRuns'],
    ['a paused flag that is not a boolean', { paused: 'yes' }, 'paused'],
  ])('refuses %s, naming the field', (_name, override, field) => {
    expect(fieldOf({ ...valid, ...override })).toBe(field);
  });

  it('refuses a value that is not an object', () => {
    expect(fieldOf('0 3 * * *')).toBe('schedule');
    expect(fieldOf(null)).toBe('schedule');
  });

  it('says what is wrong in the message', () => {
    expect(() => normalizeScheduleSpec({ ...valid, cron: '0 0 3 * * * 2027' })).toThrow(
      /cron: must have 5 fields .* or 6 .*, got 7/,
    );
    expect(() => normalizeScheduleSpec({ ...valid, timeZone: 'Mars/Olympus_Mons' })).toThrow(
      /timeZone: unknown time zone/,
    );
    expect(() => normalizeScheduleSpec({ ...valid, jitterMs: Number.NaN })).toThrow(
      /jitterMs: must be an integer, got NaN/,
    );
    expect(() => normalizeScheduleSpec({ ...valid, id: 'x'.repeat(201) })).toThrow(
      /id: is 201 characters, over the 200/,
    );
  });

  it('classifies patterns for the daylight-saving rule by their seconds, minutes and hours fields', () => {
    expect(compileCron('30 2 * * *').dstClass).toBe('fixed_time');
    expect(compileCron('0,30 1-3 * * 1-5').dstClass).toBe('fixed_time');
    expect(compileCron('0 30 2 * * *').dstClass).toBe('fixed_time');
    expect(compileCron('*/15 * * * *').dstClass).toBe('interval');
    expect(compileCron('0 * * * *').dstClass).toBe('interval');
    expect(compileCron('0-59/10 2 * * *').dstClass).toBe('interval');
    expect(compileCron('* 30 2 * * *').dstClass).toBe('interval');
  });
});

describe('jobSpecForRun', () => {
  it('fills the template with the slot, its run time and the schedule id', () => {
    const spec = normalizeScheduleSpec({ ...valid, jitterMs: 60_000, job: { kind: 'report.build', queue: 'reports' } });
    const run = plannedRun(spec, new Date('2026-06-01T03:00:00Z'));
    expect(jobSpecForRun(spec, run)).toMatchObject({
      kind: 'report.build',
      queue: 'reports',
      runAt: run.runAt,
      delayMs: 0,
      idempotencyKey: null,
      scheduleId: 'nightly-report',
      scheduleSlot: run.slot,
    });
  });
});
