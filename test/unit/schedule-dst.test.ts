import { Cron } from 'croner';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextSlotAfter, previousSlotBefore, slotsBetween } from '../../src/schedule/next-slot.js';

/** The first `count` slots after `from`, as ISO strings. */
function slots(cron: string, timeZone: string, from: string, count: number): string[] {
  return slotsBetween({ cron, timeZone }, new Date(from), new Date('2100-01-01T00:00:00Z'), count).map((slot) =>
    slot.toISOString(),
  );
}

// 2026 transitions (tzdb): New York 8 Mar 02:00 EST -> 03:00 EDT and 1 Nov 02:00 EDT -> 01:00 EST;
// London 29 Mar 01:00 GMT -> 02:00 BST and 25 Oct 02:00 BST -> 01:00 GMT; Lord Howe (a 30-minute
// shift) 5 Apr 02:00 +11 -> 01:30 +10:30 and 4 Oct 02:00 +10:30 -> 02:30 +11.
describe('fixed-time schedules across daylight-saving transitions', () => {
  it.each([
    {
      zone: 'America/New_York',
      cron: '30 2 * * *',
      note: 'spring: 02:30 does not exist on 8 Mar and runs when the clocks jump, 03:00 EDT',
      from: '2026-03-07T00:00:00Z',
      expected: ['2026-03-07T07:30:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z'],
    },
    {
      zone: 'America/New_York',
      cron: '0 30 2 * * *',
      note: 'the same with a seconds field',
      from: '2026-03-07T00:00:00Z',
      expected: ['2026-03-07T07:30:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z'],
    },
    {
      zone: 'America/New_York',
      cron: '30 1 * * *',
      note: 'autumn: 01:30 happens twice on 1 Nov and runs once, at 01:30 EDT',
      from: '2026-10-31T00:00:00Z',
      expected: ['2026-10-31T05:30:00.000Z', '2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z'],
    },
    {
      zone: 'America/New_York',
      cron: '0 1-2 * * *',
      note: 'autumn: a range of hours is fixed-time, so 01:00 runs once and 02:00 EST follows',
      from: '2026-11-01T00:00:00Z',
      expected: ['2026-11-01T05:00:00.000Z', '2026-11-01T07:00:00.000Z', '2026-11-02T06:00:00.000Z'],
    },
    {
      zone: 'Europe/London',
      cron: '30 1 * * *',
      note: 'spring: 01:30 does not exist on 29 Mar and runs at 02:00 BST',
      from: '2026-03-28T00:00:00Z',
      expected: ['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z'],
    },
    {
      zone: 'Europe/London',
      cron: '30 1 * * *',
      note: 'autumn: 01:30 happens twice on 25 Oct and runs once, at 01:30 BST',
      from: '2026-10-24T00:00:00Z',
      expected: ['2026-10-24T00:30:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z'],
    },
    {
      zone: 'Australia/Lord_Howe',
      cron: '15 2 * * *',
      note: 'spring: 02:15 does not exist on 4 Oct and runs at 02:30 +11, the end of the 30-minute gap',
      from: '2026-10-02T00:00:00Z',
      expected: ['2026-10-02T15:45:00.000Z', '2026-10-03T15:30:00.000Z', '2026-10-04T15:15:00.000Z'],
    },
    {
      zone: 'Australia/Lord_Howe',
      cron: '15 2 * * *',
      note: 'autumn: 02:15 is not repeated (01:30-02:00 is) and runs once a day',
      from: '2026-04-03T00:00:00Z',
      expected: ['2026-04-03T15:15:00.000Z', '2026-04-04T15:45:00.000Z', '2026-04-05T15:45:00.000Z'],
    },
    {
      zone: 'Australia/Lord_Howe',
      cron: '45 1 * * *',
      note: 'autumn: 01:45 happens twice on 5 Apr and runs once, at 01:45 +11',
      from: '2026-04-03T00:00:00Z',
      expected: ['2026-04-03T14:45:00.000Z', '2026-04-04T14:45:00.000Z', '2026-04-05T15:15:00.000Z'],
    },
    {
      zone: 'Australia/Lord_Howe',
      cron: '0,30 2 * * *',
      note: 'spring: 02:00 falls in the gap and 02:30 is its end: one run, not two',
      from: '2026-10-03T00:00:00Z',
      expected: ['2026-10-03T15:30:00.000Z', '2026-10-04T15:00:00.000Z', '2026-10-04T15:30:00.000Z'],
    },
  ])('$zone $cron — $note', ({ zone, cron, from, expected }) => {
    expect(slots(cron, zone, from, expected.length)).toEqual(expected);
  });
});

describe('interval schedules follow real elapsed time across transitions', () => {
  it.each([
    {
      zone: 'America/New_York',
      cron: '*/30 * * * *',
      note: 'spring: 02:00 and 02:30 never happen; the runs stay 30 minutes apart',
      from: '2026-03-08T05:45:00Z',
      expected: [
        '2026-03-08T06:00:00.000Z',
        '2026-03-08T06:30:00.000Z',
        '2026-03-08T07:00:00.000Z',
        '2026-03-08T07:30:00.000Z',
      ],
    },
    {
      zone: 'America/New_York',
      cron: '*/30 * * * *',
      note: 'autumn: 01:00 and 01:30 happen twice and run twice',
      from: '2026-11-01T04:15:00Z',
      expected: [
        '2026-11-01T04:30:00.000Z',
        '2026-11-01T05:00:00.000Z',
        '2026-11-01T05:30:00.000Z',
        '2026-11-01T06:00:00.000Z',
        '2026-11-01T06:30:00.000Z',
        '2026-11-01T07:00:00.000Z',
      ],
    },
    {
      zone: 'Europe/London',
      cron: '0 * * * *',
      note: 'spring: 01:00 never happens; hourly stays hourly',
      from: '2026-03-28T23:30:00Z',
      expected: ['2026-03-29T00:00:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-29T02:00:00.000Z'],
    },
    {
      zone: 'Europe/London',
      cron: '0 * * * *',
      note: 'autumn: 01:00 happens twice and runs twice',
      from: '2026-10-24T22:30:00Z',
      expected: [
        '2026-10-24T23:00:00.000Z',
        '2026-10-25T00:00:00.000Z',
        '2026-10-25T01:00:00.000Z',
        '2026-10-25T02:00:00.000Z',
      ],
    },
    {
      zone: 'Australia/Lord_Howe',
      cron: '*/15 * * * *',
      note: 'spring: 02:00 and 02:15 never happen; 01:45 +10:30 is followed 15 minutes later by 02:30 +11',
      from: '2026-10-03T14:50:00Z',
      expected: [
        '2026-10-03T15:00:00.000Z',
        '2026-10-03T15:15:00.000Z',
        '2026-10-03T15:30:00.000Z',
        '2026-10-03T15:45:00.000Z',
        '2026-10-03T16:00:00.000Z',
      ],
    },
    {
      zone: 'Australia/Lord_Howe',
      cron: '*/15 * * * *',
      note: 'autumn: 01:30 and 01:45 happen twice, 30 minutes apart, and run twice',
      from: '2026-04-04T14:10:00Z',
      expected: [
        '2026-04-04T14:15:00.000Z',
        '2026-04-04T14:30:00.000Z',
        '2026-04-04T14:45:00.000Z',
        '2026-04-04T15:00:00.000Z',
        '2026-04-04T15:15:00.000Z',
        '2026-04-04T15:30:00.000Z',
      ],
    },
  ])('$zone $cron — $note', ({ zone, cron, from, expected }) => {
    expect(slots(cron, zone, from, expected.length)).toEqual(expected);
  });

  it('finds the second pass through a repeated hour when asked from inside the first', () => {
    // 01:50 EDT on 1 Nov: the next */30 slot is 01:00 EST, a reading below the current one.
    const next = nextSlotAfter(
      { cron: '*/30 * * * *', timeZone: 'America/New_York' },
      new Date('2026-11-01T05:50:00Z'),
    );
    expect(next?.toISOString()).toBe('2026-11-01T06:00:00.000Z');
  });

  it('does not repeat a fixed time when asked from inside the second pass', () => {
    // 01:10 EST on 1 Nov: 01:30 already ran at its first occurrence, so the next is 2 Nov.
    const next = nextSlotAfter({ cron: '30 1 * * *', timeZone: 'America/New_York' }, new Date('2026-11-01T06:10:00Z'));
    expect(next?.toISOString()).toBe('2026-11-02T06:30:00.000Z');
  });
});

describe('slot enumeration', () => {
  const zones = ['UTC', 'America/New_York', 'Europe/London', 'Australia/Lord_Howe', 'Asia/Kolkata'];
  const from2025 = Date.UTC(2025, 0, 1);
  const span = 2 * 365 * 24 * 3_600_000;
  const transitions = [
    '2026-03-08T07:00:00Z',
    '2026-11-01T06:00:00Z',
    '2026-03-29T01:00:00Z',
    '2026-10-25T01:00:00Z',
    '2026-04-04T15:00:00Z',
    '2026-10-03T15:30:00Z',
  ].map((iso) => Date.parse(iso));
  // Half the instants land within 3 hours of a transition, where the rules differ from plain UTC.
  const instant = fc.oneof(
    fc.integer({ min: 0, max: span }).map((offsetMs) => new Date(from2025 + offsetMs)),
    fc
      .tuple(fc.constantFrom(...transitions), fc.integer({ min: -3 * 3_600_000, max: 3 * 3_600_000 }))
      .map(([at, offsetMs]) => new Date(at + offsetMs)),
  );

  it('agrees with croner wherever croner and Docket share a rule (single values and steps)', () => {
    // Croner documents the same behaviour for single-value fixed times and for `*`/step
    // patterns; it differs only for lists and ranges, which the tables above pin down.
    const patterns = [
      '*/15 * * * *',
      '0 * * * *',
      '30 2 * * *',
      '15 2 * * *',
      '45 1 * * *',
      '0 30 1 * * *',
      '30 */20 * * * *',
    ];
    fc.assert(
      fc.property(fc.constantFrom(...patterns), fc.constantFrom(...zones), instant, (cron, timeZone, from) => {
        const theirs = new Cron(cron, { timezone: timeZone, paused: true }).nextRun(from);
        expect(nextSlotAfter({ cron, timeZone }, from)?.toISOString()).toBe(theirs?.toISOString());
      }),
      { seed: 20260301, numRuns: 600 },
    );
  });

  it("reads every field form in UTC exactly as croner's own time-zone mode does (Docket reads with a fixed offset of 0)", () => {
    // cron-pattern.ts asks croner for UTC readings with `utcOffset: 0`, ten times cheaper than
    // `timezone: 'UTC'` (an Intl conversion per step); both must name the same instants for every
    // form Docket accepts, day-of-month and day-of-week specials included.
    const patterns = [
      '* * * * *',
      '*/7 */5 * * *',
      '15,45 8-18 * * mon-fri',
      '30 2 L * *',
      '0 0 1W * *',
      '0 0 LW * *',
      '0 12 * * 5#3',
      '0 0 * * 5L',
      '0 0 29 2 *',
      '0 22 * * 1-5/2',
      '0 0 1 jan,jul *',
      '*/10 * * * * *',
    ];
    const anyInstant = fc.integer({ min: Date.UTC(1971, 0, 1), max: Date.UTC(2099, 0, 1) }).map((ms) => new Date(ms));
    fc.assert(
      fc.property(fc.constantFrom(...patterns), anyInstant, (cron, from) => {
        const theirs = new Cron(cron, { timezone: 'UTC', paused: true, mode: '5-or-6-parts' }).nextRun(from);
        expect(nextSlotAfter({ cron, timeZone: 'UTC' }, from)?.toISOString()).toBe(theirs?.toISOString());
      }),
      { seed: 20261206, numRuns: 2000 },
    );
  });

  it('returns increasing slots, each strictly after the instant asked about, and previousSlotBefore inverts it', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('*/15 * * * *', '30 2 * * *', '0,30 1,2 * * *', '0 1-2 * * *', '0 0 * * 1'),
        fc.constantFrom(...zones),
        instant,
        (cron, timeZone, from) => {
          const source = { cron, timeZone };
          const [a, b] = slotsBetween(source, from, new Date('2100-01-01T00:00:00Z'), 2);
          expect(a && a.getTime() > from.getTime()).toBe(true);
          expect(b && a && b.getTime() > a.getTime()).toBe(true);
          expect(previousSlotBefore(source, b as Date, from)?.toISOString()).toBe(a?.toISOString());
          expect(previousSlotBefore(source, a as Date, from)).toBeNull();
        },
      ),
      { seed: 20260302, numRuns: 150 },
    );
  });

  it('answers a repeated question (one pattern, zone and instant, as in a schedule spike) as it answered the first, with a Date of its own', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('*/15 * * * *', '30 2 * * *', '0,30 1,2 * * *', '0 0 29 2 *', '0 9 * * 1-5'),
        fc.constantFrom(...zones),
        instant,
        (cron, timeZone, from) => {
          const first = nextSlotAfter({ cron, timeZone }, from);
          const firstMs = first?.getTime() ?? null;
          // A caller that changes the Date it got must not change the next caller's answer.
          first?.setTime(0);
          const again = nextSlotAfter({ cron, timeZone }, new Date(from.getTime()));
          expect(again?.getTime() ?? null).toBe(firstMs);
          expect(again === first && first !== null).toBe(false);
          // The same instant in another zone or pattern is its own question.
          const elsewhere = nextSlotAfter({ cron, timeZone: timeZone === 'UTC' ? 'Asia/Kolkata' : 'UTC' }, from);
          const offsetMs = timeZone === 'UTC' ? 5.5 * 3_600_000 : null;
          if (offsetMs !== null && elsewhere !== null && firstMs !== null && !cron.startsWith('*/15'))
            expect(elsewhere.getTime()).not.toBe(firstMs);
        },
      ),
      { seed: 20261207, numRuns: 300 },
    );
  });

  it('returns null when the pattern has no later match', () => {
    expect(
      nextSlotAfter({ cron: '0 0 29 2 *', timeZone: 'UTC' }, new Date('2028-03-01T00:00:00Z'))?.toISOString(),
    ).toBe('2032-02-29T00:00:00.000Z');
    expect(
      previousSlotBefore({ cron: '0 0 29 2 *', timeZone: 'UTC' }, new Date('2028-02-01Z'), new Date('2025-01-01Z')),
    ).toBeNull();
  });
});
