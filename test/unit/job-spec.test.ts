/**
 * Submit validation: every bad input is refused with a ValidationError whose `field` names the
 * offending field, before any store sees it; store URLs with unknown schemes are refused too.
 */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/job/errors.js';
import {
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_QUEUE,
  DEFAULT_RETRY_POLICY,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  MAX_PAYLOAD_BYTES,
  normalizeSubmit,
} from '../../src/job/job-spec.js';
import { parseStoreUrl } from '../../src/store/open-store.js';

/** The ValidationError `fn` throws; fails the test if it throws nothing or something else. */
function validationErrorOf(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ValidationError) return error;
    throw new Error(`expected a ValidationError, got ${String(error)}`);
  }
  throw new Error('expected a ValidationError, but nothing was thrown');
}

const circular: Record<string, unknown> = { name: 'loop' };
circular.self = circular;

/** [what, input, the field the error must name]. */
const BAD_INPUTS: [string, unknown, string][] = [
  ['a non-object input', 'email.send', 'job'],
  ['a missing kind', { payload: 1 }, 'kind'],
  ['an empty kind', { kind: '  ' }, 'kind'],
  ['a kind over 200 characters', { kind: 'k'.repeat(201) }, 'kind'],
  ['an unknown option', { kind: 'k', runat: 5 }, 'runat'],
  ['an unknown retry option', { kind: 'k', retry: { base: 1 } }, 'retry.base'],
  ['runAt NaN', { kind: 'k', runAt: Number.NaN }, 'runAt'],
  ['runAt Infinity', { kind: 'k', runAt: Number.POSITIVE_INFINITY }, 'runAt'],
  ['runAt an Invalid Date', { kind: 'k', runAt: new Date('nope') }, 'runAt'],
  ['runAt an unparsable string', { kind: 'k', runAt: 'next tuesday' }, 'runAt'],
  ['runAt before 1970', { kind: 'k', runAt: -1 }, 'runAt'],
  ['runAt after 9999', { kind: 'k', runAt: Date.UTC(10000, 0, 1) }, 'runAt'],
  ['runAt a boolean', { kind: 'k', runAt: true }, 'runAt'],
  ['a negative delayMs', { kind: 'k', delayMs: -1 }, 'delayMs'],
  ['a fractional delayMs', { kind: 'k', delayMs: 1.5 }, 'delayMs'],
  ['delayMs NaN', { kind: 'k', delayMs: Number.NaN }, 'delayMs'],
  ['runAt and delayMs together', { kind: 'k', runAt: 1000, delayMs: 1000 }, 'delayMs'],
  ['a BigInt payload', { kind: 'k', payload: 10n }, 'payload'],
  ['a BigInt inside the payload', { kind: 'k', payload: { n: 10n } }, 'payload.n'],
  ['a function inside the payload', { kind: 'k', payload: { f: () => 1 } }, 'payload.f'],
  ['a function payload', { kind: 'k', payload: () => 1 }, 'payload'],
  ['a symbol inside the payload', { kind: 'k', payload: { s: Symbol('s') } }, 'payload.s'],
  ['a circular payload', { kind: 'k', payload: circular }, 'payload'],
  ['Infinity inside the payload', { kind: 'k', payload: { x: Number.POSITIVE_INFINITY } }, 'payload.x'],
  ['NaN inside the payload', { kind: 'k', payload: [1, Number.NaN] }, 'payload.1'],
  ['a payload one byte over the limit', { kind: 'k', payload: 'a'.repeat(MAX_PAYLOAD_BYTES - 1) }, 'payload'],
  ['a payload over the limit in UTF-8 bytes', { kind: 'k', payload: 'é'.repeat(MAX_PAYLOAD_BYTES / 2) }, 'payload'],
  ['maxAttempts 0', { kind: 'k', maxAttempts: 0 }, 'maxAttempts'],
  ['maxAttempts 1001', { kind: 'k', maxAttempts: 1001 }, 'maxAttempts'],
  ['a fractional maxAttempts', { kind: 'k', maxAttempts: 2.5 }, 'maxAttempts'],
  ['an empty queue', { kind: 'k', queue: '' }, 'queue'],
  ['a queue with a space', { kind: 'k', queue: 'high priority' }, 'queue'],
  ['a queue over 64 characters', { kind: 'k', queue: 'q'.repeat(65) }, 'queue'],
  ['a queue that is not a string', { kind: 'k', queue: 7 }, 'queue'],
  [
    'an idempotency key over the limit',
    { kind: 'k', idempotencyKey: 'x'.repeat(MAX_IDEMPOTENCY_KEY_LENGTH + 1) },
    'idempotencyKey',
  ],
  ['an empty idempotency key', { kind: 'k', idempotencyKey: '' }, 'idempotencyKey'],
  ['an idempotency key that is not a string', { kind: 'k', idempotencyKey: 42 }, 'idempotencyKey'],
  ['a negative jitterMs', { kind: 'k', jitterMs: -5 }, 'jitterMs'],
  ['jitterMs NaN', { kind: 'k', jitterMs: Number.NaN }, 'jitterMs'],
  ['a priority out of smallint range', { kind: 'k', priority: 40_000 }, 'priority'],
  ['a fractional priority', { kind: 'k', priority: 0.5 }, 'priority'],
  ['timeoutMs 0', { kind: 'k', timeoutMs: 0 }, 'timeoutMs'],
  ['a retry that is not an object', { kind: 'k', retry: 3 }, 'retry'],
  ['a retry factor below 1', { kind: 'k', retry: { factor: 0.5 } }, 'retry.factor'],
  ['a negative retry base delay', { kind: 'k', retry: { baseDelayMs: -1 } }, 'retry.baseDelayMs'],
  ['a retry jitterRatio over 1', { kind: 'k', retry: { jitterRatio: 1.5 } }, 'retry.jitterRatio'],
  ['a retry maxDelayMs NaN', { kind: 'k', retry: { maxDelayMs: Number.NaN } }, 'retry.maxDelayMs'],
];

describe('normalizeSubmit refuses bad input, naming the field', () => {
  it.each(BAD_INPUTS)('refuses %s', (_what, input, field) => {
    const error = validationErrorOf(() => normalizeSubmit(input, () => 0));
    expect(error.field).toBe(field);
    expect(error.code).toBe('invalid_input');
    expect(error.message.startsWith(`${field}: `)).toBe(true);
  });

  it('prefixes the field with the position in a batch', () => {
    const error = validationErrorOf(() => normalizeSubmit({ kind: 'k', runAt: 'never' }, () => 0, 'jobs[1].'));
    expect(error.field).toBe('jobs[1].runAt');
  });

  it('never puts the whole payload in the message', () => {
    const error = validationErrorOf(() => normalizeSubmit({ kind: 'k', payload: 'z'.repeat(MAX_PAYLOAD_BYTES) }));
    expect(error.message.length).toBeLessThan(300);
  });
});

describe('normalizeSubmit accepts good input', () => {
  it('fills the design’s defaults', () => {
    expect(normalizeSubmit({ kind: 'email.send' })).toEqual({
      kind: 'email.send',
      queue: DEFAULT_QUEUE,
      payloadJson: 'null',
      priority: 0,
      runAt: null,
      delayMs: 0,
      maxAttempts: DEFAULT_MAX_ATTEMPTS,
      retryPolicy: DEFAULT_RETRY_POLICY,
      timeoutMs: null,
      idempotencyKey: null,
      scheduleId: null,
      scheduleSlot: null,
    });
  });

  it('accepts a payload of exactly the limit and a key of exactly the limit', () => {
    const spec = normalizeSubmit({
      kind: 'k',
      payload: 'a'.repeat(MAX_PAYLOAD_BYTES - 2),
      idempotencyKey: 'x'.repeat(MAX_IDEMPOTENCY_KEY_LENGTH),
    });
    expect(Buffer.byteLength(spec.payloadJson, 'utf8')).toBe(MAX_PAYLOAD_BYTES);
  });

  it('takes runAt as a Date, epoch milliseconds or an ISO string', () => {
    const at = new Date(Date.UTC(2030, 0, 2, 3, 4, 5));
    for (const runAt of [at, at.getTime(), at.toISOString()]) {
      expect(normalizeSubmit({ kind: 'k', runAt }).runAt).toEqual(at);
    }
  });

  it('spreads jitter over [runAt, runAt + jitterMs), never earlier', () => {
    const runAt = new Date(3_600_000);
    expect(normalizeSubmit({ kind: 'k', runAt, jitterMs: 60_000 }, () => 0).runAt).toEqual(runAt);
    expect(normalizeSubmit({ kind: 'k', runAt, jitterMs: 60_000 }, () => 0.999_999).runAt).toEqual(
      new Date(3_600_000 + 59_999),
    );
    expect(normalizeSubmit({ kind: 'k', delayMs: 1000, jitterMs: 100 }, () => 0.5)).toMatchObject({
      runAt: null,
      delayMs: 1050,
    });
  });
});

describe('parseStoreUrl', () => {
  it.each([
    ['postgres://postgres@127.0.0.1:5432/test', { kind: 'postgres', url: 'postgres://postgres@127.0.0.1:5432/test' }],
    ['postgresql://h/db', { kind: 'postgres', url: 'postgresql://h/db' }],
    ['sqlite:docket.db', { kind: 'sqlite', path: 'docket.db' }],
    ['sqlite:///tmp/x.db', { kind: 'sqlite', path: '/tmp/x.db' }],
    ['sqlite::memory:', { kind: 'sqlite', path: ':memory:' }],
  ])('parses %s', (url, location) => {
    expect(parseStoreUrl(url)).toEqual(location);
  });

  it.each([
    ['mysql://localhost/db', 'mysql:'],
    ['redis://127.0.0.1:6379', 'redis:'],
    ['docket.db', 'docket.db'],
    ['', 'non-empty'],
    ['sqlite://', 'no SQLite file path'],
  ])('refuses %j, naming the url field', (url, mention) => {
    const error = validationErrorOf(() => parseStoreUrl(url));
    expect(error.field).toBe('url');
    expect(error.message).toContain(mention);
  });
});
