/** Small statistics for the benchmark: percentiles, medians, summaries. */

/** The p-th percentile (0..100) of sorted values, nearest-rank; NaN when empty. */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** Sorts a copy ascending, dropping NaN. */
export function sortedFinite(values: Iterable<number>): Float64Array {
  const kept: number[] = [];
  for (const value of values) if (Number.isFinite(value)) kept.push(value);
  return Float64Array.from(kept).sort();
}

/** The median of finite values; NaN when there are none. */
export function median(values: readonly number[]): number {
  return percentileSorted(sortedFinite(values), 50);
}

/** p50 / p99 / max / mean of a latency-like sample. */
export interface Distribution {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  min: number;
  mean: number;
}

/** Summarises a sample (NaN fields when empty). */
export function distribution(values: Iterable<number>): Distribution {
  const sorted = sortedFinite(values);
  let sum = 0;
  for (const value of sorted) sum += value;
  return {
    count: sorted.length,
    p50: percentileSorted(sorted, 50),
    p90: percentileSorted(sorted, 90),
    p99: percentileSorted(sorted, 99),
    max: sorted.length > 0 ? sorted[sorted.length - 1]! : Number.NaN,
    min: sorted.length > 0 ? sorted[0]! : Number.NaN,
    mean: sorted.length > 0 ? sum / sorted.length : Number.NaN,
  };
}

/** Up to `points` (value, fraction ≤ value) pairs tracing the empirical CDF, for charts. */
export function cdfPoints(values: Iterable<number>, points = 200): [number, number][] {
  const sorted = sortedFinite(values);
  if (sorted.length === 0) return [];
  const out: [number, number][] = [];
  const step = Math.max(1, Math.floor(sorted.length / points));
  for (let k = step - 1; k < sorted.length; k += step) out.push([sorted[k]!, (k + 1) / sorted.length]);
  const last = sorted.length - 1;
  if (out.at(-1)?.[1] !== 1) out.push([sorted[last]!, 1]);
  return out;
}

/** Counts values into `bins` equal-width bins over [from, to). */
export function histogram(values: Iterable<number>, from: number, to: number, bins: number): number[] {
  const counts = new Array<number>(bins).fill(0);
  const width = (to - from) / bins;
  for (const value of values) {
    if (!Number.isFinite(value)) continue;
    const bin = Math.min(bins - 1, Math.max(0, Math.floor((value - from) / width)));
    counts[bin]! += 1;
  }
  return counts;
}

/** Rounds for display: integers above 100, one decimal above 10, two below. */
export function round(value: number): number {
  if (!Number.isFinite(value)) return value;
  const magnitude = Math.abs(value);
  const digits = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : 2;
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/**
 * Pearson's correlation of paired values (pairs with a non-finite side dropped): +1 when one rises
 * exactly as the other does, 0 when they move independently; NaN with fewer than three pairs or a
 * side that never moves.
 */
export function correlation(xs: readonly number[], ys: readonly number[]): number {
  const pairs: [number, number][] = [];
  for (let i = 0; i < Math.min(xs.length, ys.length); i += 1) {
    const x = xs[i]!;
    const y = ys[i]!;
    if (Number.isFinite(x) && Number.isFinite(y)) pairs.push([x, y]);
  }
  if (pairs.length < 3) return Number.NaN;
  const meanX = pairs.reduce((sum, [x]) => sum + x, 0) / pairs.length;
  const meanY = pairs.reduce((sum, [, y]) => sum + y, 0) / pairs.length;
  let covariance = 0;
  let varianceX = 0;
  let varianceY = 0;
  for (const [x, y] of pairs) {
    covariance += (x - meanX) * (y - meanY);
    varianceX += (x - meanX) ** 2;
    varianceY += (y - meanY) ** 2;
  }
  return varianceX > 0 && varianceY > 0 ? covariance / Math.sqrt(varianceX * varianceY) : Number.NaN;
}
