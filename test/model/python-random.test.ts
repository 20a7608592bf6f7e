/**
 * The CPython random.Random port against values printed by CPython 3.11 itself
 * (`python3 -c 'import random; r = random.Random(seed); ...'`), so the design's seeded numbers
 * can be trusted to reproduce.
 */
import { describe, expect, it } from 'vitest';
import { PythonRandom } from './python-random.js';

describe('PythonRandom, a port of CPython random.Random(int)', () => {
  it.each([
    [0, [3626764237, 1654615998, 3255389356], 28, 0, 283641720628],
    [1, [577090037, 2444712010, 3639700191], 25, 1, 279443915985],
    [42, [2746317213, 478163327, 107420369], 23, 0, 245864938384],
    [36, [1411758002, 250696210, 4222871630], 0, 1, 1012759167248],
    [2 ** 32 + 5, [675479763, 2085189291, 1213270837], 28, 1, 16472596581],
    [-7, [1390851128, 4071050724, 647892279], 12, 1, 77516799952],
  ])(
    'seed %d: getrandbits(32) x3, getrandbits(5), getrandbits(1), getrandbits(40)',
    (seed, words, five, one, forty) => {
      const rng = new PythonRandom(seed);
      expect([rng.getrandbits(32), rng.getrandbits(32), rng.getrandbits(32)]).toEqual(words);
      expect(rng.getrandbits(5)).toBe(five);
      expect(rng.getrandbits(1)).toBe(one);
      expect(rng.getrandbits(40)).toBe(forty);
    },
  );

  it('seeds from a bigint wider than 64 bits as CPython does (several key words)', () => {
    const rng = new PythonRandom(2n ** 64n + 123_456_789n);
    expect([rng.getrandbits(32), rng.getrandbits(32), rng.getrandbits(32)]).toEqual([
      2411909230, 1719326516, 391426354,
    ]);
  });

  it('reproduces randrange(60) for Random(36), the design’s spike jitter', () => {
    const rng = new PythonRandom(36);
    expect(Array.from({ length: 10 }, () => rng.randrange(60))).toEqual([21, 3, 1, 51, 58, 58, 50, 18, 56, 5]);
  });

  it('reproduces randint, randrange and choice for Random(0) in the simulation’s order of calls', () => {
    const rng = new PythonRandom(0);
    expect(Array.from({ length: 5 }, () => rng.randint(1, 25))).toEqual([13, 25, 14, 2, 9]);
    expect(Array.from({ length: 5 }, () => rng.randrange(120))).toEqual([65, 62, 51, 117, 100]);
    const outcomes = ['crash', 'fail', 'stall', 'ok', 'ok', 'ok', 'ok'];
    expect(Array.from({ length: 5 }, () => rng.choice(outcomes))).toEqual(['ok', 'stall', 'ok', 'stall', 'ok']);
    expect(Array.from({ length: 8 }, () => rng.randint(0, 3))).toEqual([1, 1, 2, 1, 0, 2, 1, 2]);
    expect(rng.randrange(5, 17)).toBe(6);
    // randint(7, 7) still draws one bit (bit_length of 1), as CPython's _randbelow does.
    expect(rng.randint(7, 7)).toBe(7);
    expect(rng.getrandbits(32)).toBe(3860481052);
  });

  it('stays in step past the 624-word state refill', () => {
    const rng = new PythonRandom(123);
    for (let i = 0; i < 1000; i++) rng.genrandUint32();
    expect(rng.getrandbits(32)).toBe(670810677);
  });

  it('refuses an empty choice and a non-positive bound, as CPython raises', () => {
    const rng = new PythonRandom(1);
    expect(() => rng.choice([])).toThrow(RangeError);
    expect(() => rng.randrange(0)).toThrow(RangeError);
    expect(() => rng.randrange(5, 5)).toThrow(RangeError);
  });
});
