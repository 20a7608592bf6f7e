/**
 * A port of CPython's `random.Random` seeded with an int, so the design's seeded numbers (the
 * `10000 193` spike, the 200-seed simulation) reproduce exactly in TypeScript.
 *
 * What is ported, and from where (CPython 3.x, Modules/_randommodule.c and Lib/random.py):
 * - MT19937 (`genrand_uint32`), seeded by `init_by_array` with the absolute value of the seed split
 *   into 32-bit words, least significant first (`random_seed` for ints; 0 gives the key [0]).
 * - `getrandbits(k)`: k <= 32 takes the top k bits of one output; wider values take whole words,
 *   least significant first, the last word shifted down to what is left.
 * - `_randbelow(n)`: `getrandbits(n.bit_length())` rejection sampling (note: bit_length of n, not
 *   n - 1, so randbelow(1) still draws one bit), and `randrange`, `randint`, `choice` on top of it.
 * Only these are ported; `random()` and the float-based methods are not used by the design.
 */

const N = 624;
const M = 397;
const MATRIX_A = 0x9908b0df;
const UPPER_MASK = 0x80000000;
const LOWER_MASK = 0x7fffffff;

/** CPython's `random.Random(seed)` for an integer seed: same seed, same draws, bit for bit. */
export class PythonRandom {
  private readonly mt = new Uint32Array(N);
  private index = N + 1;

  constructor(seed: number | bigint) {
    if (typeof seed === 'number' && !Number.isSafeInteger(seed)) {
      throw new RangeError(`PythonRandom: seed must be a safe integer or a bigint, got ${seed}`);
    }
    this.initByArray(seedKey(BigInt(seed)));
  }

  /** A uniform 32-bit unsigned integer: MT19937's tempered output. */
  genrandUint32(): number {
    const mt = this.mt;
    if (this.index >= N) {
      let kk = 0;
      for (; kk < N - M; kk++) {
        const y = (mt[kk]! & UPPER_MASK) | (mt[kk + 1]! & LOWER_MASK);
        mt[kk] = mt[kk + M]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      }
      for (; kk < N - 1; kk++) {
        const y = (mt[kk]! & UPPER_MASK) | (mt[kk + 1]! & LOWER_MASK);
        mt[kk] = mt[kk + (M - N)]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      }
      const y = (mt[N - 1]! & UPPER_MASK) | (mt[0]! & LOWER_MASK);
      mt[N - 1] = mt[M - 1]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      this.index = 0;
    }
    let y = mt[this.index++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** `random.getrandbits(k)` for 0 <= k <= 53 (wide enough for any JS-safe integer). */
  getrandbits(k: number): number {
    if (!Number.isInteger(k) || k < 0 || k > 53) throw new RangeError(`getrandbits: k must be 0..53, got ${k}`);
    if (k === 0) return 0;
    if (k <= 32) return this.genrandUint32() >>> (32 - k);
    const low = this.genrandUint32();
    const high = this.genrandUint32() >>> (64 - k);
    return high * 2 ** 32 + low;
  }

  /** `random._randbelow(n)`: uniform in [0, n) by rejection on `getrandbits(n.bit_length())`. */
  randbelow(n: number): number {
    if (!Number.isSafeInteger(n) || n <= 0) throw new RangeError(`randbelow: n must be a positive integer, got ${n}`);
    const k = bitLength(n);
    let r = this.getrandbits(k);
    while (r >= n) r = this.getrandbits(k);
    return r;
  }

  /** `random.randrange(stop)` or `random.randrange(start, stop)` (step 1). */
  randrange(startOrStop: number, stop?: number): number {
    if (stop === undefined) return this.randbelow(startOrStop);
    const width = stop - startOrStop;
    if (width <= 0) throw new RangeError(`empty range for randrange(${startOrStop}, ${stop})`);
    return startOrStop + this.randbelow(width);
  }

  /** `random.randint(a, b)`: uniform in [a, b], both ends included. */
  randint(a: number, b: number): number {
    return this.randrange(a, b + 1);
  }

  /** `random.choice(seq)`. */
  choice<T>(seq: readonly T[]): T {
    if (seq.length === 0) throw new RangeError('Cannot choose from an empty sequence');
    return seq[this.randbelow(seq.length)]!;
  }

  private initGenrand(s: number): void {
    const mt = this.mt;
    mt[0] = s >>> 0;
    for (let i = 1; i < N; i++) {
      const prev = mt[i - 1]!;
      mt[i] = (Math.imul(1812433253, prev ^ (prev >>> 30)) + i) >>> 0;
    }
    this.index = N;
  }

  private initByArray(key: readonly number[]): void {
    const mt = this.mt;
    this.initGenrand(19650218);
    let i = 1;
    let j = 0;
    for (let k = Math.max(N, key.length); k > 0; k--) {
      const prev = mt[i - 1]!;
      mt[i] = ((mt[i]! ^ Math.imul(prev ^ (prev >>> 30), 1664525)) + key[j]! + j) >>> 0;
      i++;
      j++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
      if (j >= key.length) j = 0;
    }
    for (let k = N - 1; k > 0; k--) {
      const prev = mt[i - 1]!;
      mt[i] = ((mt[i]! ^ Math.imul(prev ^ (prev >>> 30), 1566083941)) - i) >>> 0;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
    }
    mt[0] = 0x80000000;
  }
}

/** The init_by_array key CPython derives from an int seed: |seed| in 32-bit words, low word first. */
function seedKey(seed: bigint): number[] {
  let rest = seed < 0n ? -seed : seed;
  const key: number[] = [];
  while (rest > 0n) {
    key.push(Number(rest & 0xffffffffn));
    rest >>= 32n;
  }
  return key.length === 0 ? [0] : key;
}

/** Python's `int.bit_length()` for a positive safe integer. */
function bitLength(n: number): number {
  return n <= 0xffffffff ? 32 - Math.clz32(n) : 32 + bitLength(Math.floor(n / 2 ** 32));
}
