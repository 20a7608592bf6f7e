/**
 * Seeded randomness. Everything random in Docket (retry jitter, spike spreading, simulations)
 * takes a `() => number` so a test can pass a seeded one and replay a run exactly.
 */

/** A uniform [0, 1) generator. */
export type Random = () => number;

/** mulberry32: a small, fast, well-distributed 32-bit PRNG; the same seed gives the same sequence. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A uniform integer in [0, n). */
export function randomInt(random: Random, n: number): number {
  return Math.floor(random() * n);
}
