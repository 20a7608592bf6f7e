/** Wake-up payloads (decision 0025): what a NOTIFY names, and whom it concerns. */
import { describe, expect, it } from 'vitest';
import { MAX_NAMED_WAKE_UPS, parseWakeUpPayload, wakeUpConcerns, wakeUpsFor } from '../../src/store/wake-up.js';

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

describe('wakeUpsFor', () => {
  it('names each queue and kind once, with its earliest run time', () => {
    expect(
      wakeUpsFor([
        { queue: 'q', kind: 'a', runAtMs: 30 },
        { queue: 'q', kind: 'b', runAtMs: 20 },
        { queue: 'q', kind: 'a', runAtMs: 10 },
        { queue: 'r', kind: 'a', runAtMs: 40 },
      ]),
    ).toEqual([
      { runAt: new Date(10), queue: 'q', kind: 'a' },
      { runAt: new Date(20), queue: 'q', kind: 'b' },
      { runAt: new Date(40), queue: 'r', kind: 'a' },
    ]);
    expect(wakeUpsFor([])).toEqual([]);
  });

  it('names nothing past MAX_NAMED_WAKE_UPS groups: one wake-up with the earliest of all', () => {
    const groups = (count: number) =>
      Array.from({ length: count }, (_, i) => ({ queue: 'q', kind: `k${i}`, runAtMs: 100 - i }));
    expect(wakeUpsFor(groups(MAX_NAMED_WAKE_UPS))).toHaveLength(MAX_NAMED_WAKE_UPS);
    expect(wakeUpsFor(groups(MAX_NAMED_WAKE_UPS + 1))).toEqual([{ runAt: new Date(100 - MAX_NAMED_WAKE_UPS) }]);
  });

  it('keeps apart a queue and kind that would read alike joined by a separator', () => {
    expect(
      wakeUpsFor([
        { queue: 'a/b', kind: 'c', runAtMs: 1 },
        { queue: 'a', kind: 'b/c', runAtMs: 2 },
      ]),
    ).toHaveLength(2);
  });
});
