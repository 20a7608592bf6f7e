/**
 * The library's strict input rules (issue 12), shared by every face: RFC 3339 instants with an
 * offset or integer epoch ms, bounded dates and delays, payload shape checked without recursion,
 * text every store can keep, and the reserved queue of built-in kinds.
 */
import { describe, expect, it } from 'vitest';
import { BUILTIN_QUEUE, WEBHOOK_KIND } from '../../src/job/builtin-kinds.js';
import { ValidationError } from '../../src/job/errors.js';
import {
  checkJsonValue,
  LATEST_RUN_AT_MS,
  MAX_DELAY_MS,
  MAX_PAYLOAD_DEPTH,
  normalizeSubmit,
  parseInstant,
  validateStorableText,
} from '../../src/job/job-spec.js';

function fieldOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return (error as ValidationError).field;
  }
  throw new Error('expected a ValidationError');
}

function deep(depth: number): unknown {
  let value: unknown = 0;
  for (let i = 0; i < depth; i++) value = { next: value };
  return value;
}

describe('parseInstant accepts only RFC 3339 with an offset, or integer epoch ms', () => {
  it.each([
    ['2030-06-01T09:00:00Z', '2030-06-01T09:00:00.000Z'],
    ['2030-06-01t09:00:00z', '2030-06-01T09:00:00.000Z'],
    ['2030-06-01T09:00:00+02:00', '2030-06-01T07:00:00.000Z'],
    ['2030-06-01T09:00:00.5-01:30', '2030-06-01T10:30:00.500Z'],
    ['2030-06-01T09:00:00.123456789Z', '2030-06-01T09:00:00.123Z'],
    ['1970-01-01T00:00:00Z', '1970-01-01T00:00:00.000Z'],
    ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
  ])('reads %s as %s', (text, iso) => {
    expect(parseInstant('runAt', text).toISOString()).toBe(iso);
  });

  it.each([
    '1',
    'Dec 25',
    '2030-06-01T09:00:00',
    '2030-06-01',
    '2030-06-01 09:00:00Z',
    '2030-06-01T09:00Z',
    '+002030-06-01T09:00:00Z',
    '2030-06-01T24:00:00Z',
    '2030-06-01T09:00:00+24:00',
    '2030-02-29T00:00:00Z',
    '9999-12-31T23:59:59.999-00:01',
    '',
    ' 2030-06-01T09:00:00Z',
  ])('refuses %j', (text) => {
    expect(fieldOf(() => parseInstant('runAt', text))).toBe('runAt');
  });

  it('takes integer epoch ms up to 9999-12-31T23:59:59.999Z and refuses fractions', () => {
    expect(parseInstant('runAt', LATEST_RUN_AT_MS).toISOString()).toBe('9999-12-31T23:59:59.999Z');
    for (const value of [LATEST_RUN_AT_MS + 1, -1, 0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(fieldOf(() => parseInstant('runAt', value))).toBe('runAt');
    }
  });

  it('bounds delayMs at 100 years, and jitter may not pass the latest instant', () => {
    expect(normalizeSubmit({ kind: 'k', delayMs: MAX_DELAY_MS }).delayMs).toBe(MAX_DELAY_MS);
    expect(fieldOf(() => normalizeSubmit({ kind: 'k', delayMs: MAX_DELAY_MS + 1 }))).toBe('delayMs');
    expect(fieldOf(() => normalizeSubmit({ kind: 'k', runAt: LATEST_RUN_AT_MS, jitterMs: 1 }))).toBe('jitterMs');
  });
});

describe('checkJsonValue walks payloads without recursion', () => {
  it(`admits ${MAX_PAYLOAD_DEPTH} levels and refuses ${MAX_PAYLOAD_DEPTH + 1}, naming the root`, () => {
    expect(() => checkJsonValue('payload', deep(MAX_PAYLOAD_DEPTH))).not.toThrow();
    expect(fieldOf(() => checkJsonValue('payload', deep(MAX_PAYLOAD_DEPTH + 1)))).toBe('payload');
  });

  it('refuses a million-deep value without overflowing the stack', () => {
    let value: unknown = [];
    for (let i = 0; i < 1_000_000; i++) value = [value];
    expect(fieldOf(() => normalizeSubmit({ kind: 'k', payload: value }))).toBe('payload');
  });

  it('refuses an oversized payload before serialising it', () => {
    const wide = Array.from({ length: 300_000 }, () => 0);
    expect(fieldOf(() => normalizeSubmit({ kind: 'k', payload: wide }))).toBe('payload');
  });

  it.each([
    [{ a: 'x\u0000' }, 'payload.a'],
    [{ 'k\u0000': 1 }, 'payload'],
    [['ok', '\ud800'], 'payload.1'],
    [{ s: '\udc00' }, 'payload.s'],
    [{ n: Number.NaN }, 'payload.n'],
    [{ b: 1n }, 'payload.b'],
    [{ f: () => 1 }, 'payload.f'],
    [new Map(), 'payload'],
  ])('refuses %o naming %s', (payload, field) => {
    expect(fieldOf(() => checkJsonValue('payload', payload))).toBe(field);
  });

  it('admits paired surrogates, dates and plain nested values', () => {
    expect(() =>
      checkJsonValue('payload', { emoji: '\ud83d\ude00', at: new Date(0), list: [null, true, 1, 'x'] }),
    ).not.toThrow();
    expect(normalizeSubmit({ kind: 'k', payload: { at: new Date(0) } }).payloadJson).toBe(
      '{"at":"1970-01-01T00:00:00.000Z"}',
    );
  });
});

describe('text every store can keep', () => {
  it('refuses NUL and lone surrogates in kind and idempotencyKey, on every face alike', () => {
    expect(fieldOf(() => normalizeSubmit({ kind: 'a\u0000' }))).toBe('kind');
    expect(fieldOf(() => normalizeSubmit({ kind: 'a', idempotencyKey: '\ud800' }))).toBe('idempotencyKey');
    expect(fieldOf(() => validateStorableText('workerId', 'w\u0000'))).toBe('workerId');
    expect(validateStorableText('workerId', 'w-1 ☃')).toBe('w-1 ☃');
  });
});

describe('built-in kinds live on their reserved queue', () => {
  it('puts a webhook without a queue on the reserved queue and refuses another', () => {
    expect(normalizeSubmit({ kind: WEBHOOK_KIND }).queue).toBe(BUILTIN_QUEUE);
    expect(normalizeSubmit({ kind: WEBHOOK_KIND, queue: BUILTIN_QUEUE }).queue).toBe(BUILTIN_QUEUE);
    expect(fieldOf(() => normalizeSubmit({ kind: WEBHOOK_KIND, queue: 'default' }))).toBe('queue');
  });

  it('refuses a user kind on the reserved queue, in batches with the job prefix', () => {
    expect(fieldOf(() => normalizeSubmit({ kind: 'email.send', queue: BUILTIN_QUEUE }, Math.random, 'jobs[2].'))).toBe(
      'jobs[2].queue',
    );
  });
});
