/** Wake-up payloads (decision 0025): what a NOTIFY names, and whom it concerns. */
import { describe, expect, it } from 'vitest';
import { parseWakeUpPayload, wakeUpConcerns } from '../../src/store/wake-up.js';

describe('parseWakeUpPayload', () => {
  it('reads a named payload: run time, queue and kind', () => {
    expect(parseWakeUpPayload('[1796603263583, "emails", "send.welcome"]')).toEqual({
      runAt: new Date(1796603263583),
      queue: 'emails',
      kind: 'send.welcome',
    });
    // Names JSON escapes, as json_build_array writes them.
    expect(parseWakeUpPayload('[5, "q\\"1", "k\\\\2"]')).toEqual({ runAt: new Date(5), queue: 'q"1', kind: 'k\\2' });
  });

  it("reads an earlier release's bare epoch ms as a wake-up naming nothing", () => {
    expect(parseWakeUpPayload('1796603263583')).toEqual({ runAt: new Date(1796603263583) });
  });

  it('reads anything else as "look again" for everyone', () => {
    for (const payload of ['', undefined, 'soon', '[1, "q"]', '[1, 2, 3]', '[1, "q", "k"', '{"a":1}', '[]']) {
      expect(parseWakeUpPayload(payload)).toEqual({ runAt: null });
    }
    expect(parseWakeUpPayload('[null, "q", "k"]')).toEqual({ runAt: null, queue: 'q', kind: 'k' });
  });
});

describe('wakeUpConcerns', () => {
  const named = { runAt: null, queue: 'emails', kind: 'send' };

  it('passes a claimer by only when it names a queue or kind the claimer never claims', () => {
    expect(wakeUpConcerns(named, ['emails'], ['send'])).toBe(true);
    expect(wakeUpConcerns(named, ['emails', 'reports'], ['report', 'send'])).toBe(true);
    expect(wakeUpConcerns(named, ['reports'], ['send'])).toBe(false);
    expect(wakeUpConcerns(named, ['emails'], ['report'])).toBe(false);
  });

  it('concerns a claimer of every queue or every kind, and everyone when it names nothing', () => {
    expect(wakeUpConcerns(named, undefined, undefined)).toBe(true);
    expect(wakeUpConcerns(named, null, ['send'])).toBe(true);
    expect(wakeUpConcerns(named, ['emails'], null)).toBe(true);
    expect(wakeUpConcerns({ runAt: null }, ['reports'], ['report'])).toBe(true);
    expect(wakeUpConcerns({ runAt: new Date(0) }, ['reports'], ['report'])).toBe(true);
  });
});
