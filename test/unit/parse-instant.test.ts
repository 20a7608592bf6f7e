import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/job/errors.js';
import { normalizeSubmit, parseInstant } from '../../src/job/job-spec.js';

describe('parseInstant', () => {
  it('refuses a calendar day that does not exist instead of rolling it into the next month', () => {
    for (const text of ['2026-02-30T00:00:00Z', '2026-04-31', '2026-13-01T00:00:00Z', '2025-02-29T12:00:00Z']) {
      expect(() => parseInstant('runAt', text), text).toThrow(ValidationError);
    }
  });

  it('accepts real days, including a leap day', () => {
    expect(parseInstant('runAt', '2028-02-29T12:00:00Z').toISOString()).toBe('2028-02-29T12:00:00.000Z');
    expect(parseInstant('runAt', '2026-12-31T23:59:59.999+01:00').toISOString()).toBe('2026-12-31T22:59:59.999Z');
  });

  it('names the field of the job in a submit', () => {
    try {
      normalizeSubmit({ kind: 'k', runAt: '2026-02-30T09:00:00Z' });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).field).toBe('runAt');
      expect((error as ValidationError).message).toMatch(/day that does not exist/);
    }
  });
});
