/**
 * Errors a handler can throw (RetryAfterError, DoNotRetryError, SnoozeError), the one error
 * hierarchy, and the retry rule every path shares: the pure decision first, then what a real
 * worker on each store does with each error.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConfigurationError,
  Docket,
  DocketError,
  DoNotRetryError,
  IdempotencyConflictError,
  type Job,
  JobAbortError,
  RetryAfterError,
  SnoozeError,
  StaleLeaseError,
  seededRandom,
  ValidationError,
} from '../../src/index.js';
import { DEFAULT_RETRY_POLICY } from '../../src/job/job-spec.js';
import { backoffBand, decideAfterFailure, type RetryDecision } from '../../src/retry/backoff.js';
import { retryHints } from '../../src/worker/job-executor.js';
import { createTestDatabase, storeKinds, type TestDatabase } from '../support/stores.js';

const policy = { ...DEFAULT_RETRY_POLICY, jitterRatio: 0 };

describe('one error hierarchy', () => {
  it('every error Docket raises on purpose is a DocketError with a stable code and its own name', () => {
    const errors: [DocketError, string][] = [
      [new ValidationError('queue', 'bad'), 'invalid_input'],
      [new ConfigurationError('bad'), 'invalid_configuration'],
      [new IdempotencyConflictError('idempotencyKey', '1', 'bad'), 'idempotency_conflict'],
      [new StaleLeaseError('1', 2, 'gone'), 'stale_lease'],
      [new JobAbortError('shutdown', 'stopping'), 'job_aborted'],
      [new RetryAfterError('rate limited', { delayMs: 5000 }), 'retry_after'],
      [new DoNotRetryError('refused'), 'do_not_retry'],
      [new SnoozeError(1000), 'snoozed'],
    ];
    for (const [error, code] of errors) {
      expect(error).toBeInstanceOf(DocketError);
      expect(error).toBeInstanceOf(Error);
      expect(error.code).toBe(code);
      expect(error.name).toBe(error.constructor.name);
    }
  });

  it('keeps a cause', () => {
    const cause = new Error('429');
    expect(new RetryAfterError('later', { delayMs: 1, cause }).cause).toBe(cause);
    expect(new DoNotRetryError('never', { cause }).cause).toBe(cause);
  });

  it('refuses a delay that is not a finite number >= 0, naming the field', () => {
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new RetryAfterError('x', { delayMs: bad })).toThrow(ValidationError);
      expect(() => new RetryAfterError('x', { delayMs: bad })).toThrow(/^delayMs: /);
      expect(() => new SnoozeError(bad)).toThrow(/^delayMs: must be a finite number/);
    }
  });
});

describe('retryHints (read by property, so look-alike errors work too)', () => {
  it('reads each class', () => {
    expect(retryHints(new RetryAfterError('x', { delayMs: 1500 }))).toEqual({ retryAfterMs: 1500 });
    expect(retryHints(new DoNotRetryError('x'))).toEqual({ retryable: false });
    expect(retryHints(new SnoozeError(250))).toEqual({ snoozeMs: 250 });
  });

  it('reads the same properties off an error of the caller’s own, and ignores unusable values', () => {
    expect(retryHints(Object.assign(new Error('x'), { retryAfterMs: 10, retryable: false }))).toEqual({
      retryAfterMs: 10,
      retryable: false,
    });
    expect(retryHints({ snoozeMs: 5 })).toEqual({ snoozeMs: 5 });
    expect(retryHints({ retryAfterMs: -1, snoozeMs: Number.NaN, retryable: 0 })).toEqual({});
    expect(retryHints('a string')).toEqual({});
  });
});

describe('decideAfterFailure', () => {
  const base = { attempts: 1, maxAttempts: 5, policy, random: seededRandom(1) };

  it('snooze sets the delay outright, shorter or longer than the backoff', () => {
    expect(decideAfterFailure({ ...base, hints: { snoozeMs: 10 } })).toEqual({ kind: 'retry', delayMs: 10 });
    expect(decideAfterFailure({ ...base, hints: { snoozeMs: 99_999.2 } })).toEqual({ kind: 'retry', delayMs: 100_000 });
  });

  it('a snooze still counts the attempt: with none left the job is parked', () => {
    expect(decideAfterFailure({ ...base, attempts: 5, hints: { snoozeMs: 10 } })).toEqual({ kind: 'park' });
  });

  it('do-not-retry wins over a snooze and a Retry-After', () => {
    expect(decideAfterFailure({ ...base, hints: { retryable: false, snoozeMs: 10, retryAfterMs: 10 } })).toEqual({
      kind: 'park',
    });
  });

  it('covers the remote-worker rule: backoff, lengthened to retryAfterMs when that is longer', () => {
    // The rule the HTTP fail route applies to a remote worker's integer retryAfterMs, written out.
    const remoteRule = (decision: RetryDecision, retryAfterMs: number | undefined): RetryDecision =>
      decision.kind === 'retry' && retryAfterMs !== undefined && retryAfterMs > decision.delayMs
        ? { kind: 'retry', delayMs: retryAfterMs }
        : decision;
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 10 }),
        fc.option(fc.integer({ min: 0, max: 7 * 24 * 3_600_000 }), { nil: undefined }),
        fc.integer(),
        (attempts, maxAttempts, retryAfterMs, seed) => {
          const params = { attempts, maxAttempts, policy: DEFAULT_RETRY_POLICY };
          const plain = decideAfterFailure({ ...params, random: seededRandom(seed) });
          const hinted = decideAfterFailure({ ...params, random: seededRandom(seed), hints: { retryAfterMs } });
          expect(hinted).toEqual(remoteRule(plain, retryAfterMs));
        },
      ),
    );
  });

  it('a Retry-After never shortens the backoff band', () => {
    const decision = decideAfterFailure({ ...base, policy: DEFAULT_RETRY_POLICY, hints: { retryAfterMs: 1 } });
    expect(decision.kind === 'retry' && decision.delayMs).toBeGreaterThanOrEqual(
      backoffBand(DEFAULT_RETRY_POLICY, 1).minMs,
    );
  });
});

describe.each(storeKinds())('a worker on %s, given each error', (kind) => {
  let db: TestDatabase;
  let docket: Docket;

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    docket = await Docket.open({ url: db.url, random: seededRandom(3) });
    docket.handle<{ throw: 'retryAfter' | 'doNotRetry' | 'snooze' }>('steered', async (payload) => {
      if (payload.throw === 'retryAfter') throw new RetryAfterError('rate limited', { delayMs: 60_000 });
      if (payload.throw === 'doNotRetry') throw new DoNotRetryError('the destination refused this for good');
      throw new SnoozeError(45_000, 'not yet: waiting for the export');
    });
    await docket.worker({ pollIntervalMs: 50, leaseMs: 2000, heartbeatIntervalMs: 500 }).start();
  });

  afterAll(async () => {
    await docket?.close();
    await db?.drop();
  });

  /** Submits a job that throws `which` once and returns its row after that attempt is recorded. */
  async function afterOneAttempt(which: 'retryAfter' | 'doNotRetry' | 'snooze'): Promise<{ before: Date; job: Job }> {
    const before = await docket.store.now();
    const { id } = await docket.submit({ kind: 'steered', payload: { throw: which }, maxAttempts: 5 });
    let job: Job | null = null;
    await expect
      .poll(
        async () => {
          job = await docket.getJob(id);
          return job?.errors.length ?? 0;
        },
        { timeout: 10_000, interval: 20 },
      )
      .toBe(1);
    return { before, job: job! };
  }

  it('RetryAfterError: retried no sooner than its delay, the attempt counted', async () => {
    const { before, job } = await afterOneAttempt('retryAfter');
    expect(job).toMatchObject({ state: 'pending', attempts: 1, errors: [{ message: 'rate limited', kind: 'thrown' }] });
    expect(job.runAt.getTime() - before.getTime()).toBeGreaterThanOrEqual(60_000);
  });

  it('DoNotRetryError: parked at once with attempts left', async () => {
    const { job } = await afterOneAttempt('doNotRetry');
    expect(job).toMatchObject({ state: 'dead', attempts: 1, maxAttempts: 5 });
    expect(job.errors[0]?.message).toBe('the destination refused this for good');
  });

  it('SnoozeError: due again after its delay (shorter than the 60 s Retry-After above), recorded as an attempt', async () => {
    const { before, job } = await afterOneAttempt('snooze');
    expect(job).toMatchObject({
      state: 'pending',
      attempts: 1,
      errors: [{ message: 'not yet: waiting for the export' }],
    });
    const delayMs = job.runAt.getTime() - before.getTime();
    expect(delayMs).toBeGreaterThanOrEqual(45_000);
    expect(delayMs).toBeLessThan(60_000);
  });
});
