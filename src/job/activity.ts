/**
 * Activity over time: completions, failures and start lateness per time bucket, as the overview
 * charts them. Pure. Stores count lateness into the fixed histogram of
 * {@link LATENESS_BUCKET_BOUNDS_MS} (one SQL CASE, no per-row data leaves the database), so
 * buckets from several stores or shards add up exactly; percentiles are read from the histogram.
 */

/**
 * Upper bounds (inclusive, ms) of the lateness histogram's buckets; a last, unbounded bucket
 * follows. Roughly ×2.5 steps from 5 ms to an hour: a percentile read from it is within one step.
 */
export const LATENESS_BUCKET_BOUNDS_MS = [
  0, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000,
] as const;

/** Number of histogram buckets: one per bound, plus the unbounded last one. */
export const LATENESS_BUCKET_COUNT = LATENESS_BUCKET_BOUNDS_MS.length + 1;

/** Index of the histogram bucket that holds a lateness of `ms` (negative lateness counts as 0). */
export function latenessBucketOf(ms: number): number {
  for (const [index, bound] of LATENESS_BUCKET_BOUNDS_MS.entries()) {
    if (ms <= bound) return index;
  }
  return LATENESS_BUCKET_BOUNDS_MS.length;
}

/** Percentiles of a lateness histogram (ms), or null when it is empty. */
export interface LatenessPercentiles {
  p50: number;
  p95: number;
  p99: number;
}

/**
 * The q-quantile (0 < q ≤ 1) of a lateness histogram, interpolated linearly inside its bucket
 * (bucket i spans (bound[i-1], bound[i]]); the unbounded bucket answers its lower bound. Null
 * for an empty histogram.
 */
export function histogramQuantile(histogram: readonly number[], q: number): number | null {
  const total = histogram.reduce((sum, n) => sum + n, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (const [index, count] of histogram.entries()) {
    if (count === 0) continue;
    if (seen + count >= rank) {
      const lower = index === 0 ? 0 : (LATENESS_BUCKET_BOUNDS_MS[index - 1] ?? 0);
      const upper = LATENESS_BUCKET_BOUNDS_MS[index];
      if (upper === undefined) return lower;
      return Math.round(lower + ((upper - lower) * (rank - seen)) / count);
    }
    seen += count;
  }
  return LATENESS_BUCKET_BOUNDS_MS.at(-1) ?? 0;
}

/** p50, p95 and p99 of a histogram; null when it is empty. */
export function latenessPercentiles(histogram: readonly number[]): LatenessPercentiles | null {
  const p50 = histogramQuantile(histogram, 0.5);
  if (p50 === null) return null;
  return { p50, p95: histogramQuantile(histogram, 0.95) ?? p50, p99: histogramQuantile(histogram, 0.99) ?? p50 };
}

/** Adds histogram `b` into `a` (same length); returns `a`. */
export function addHistograms(a: number[], b: readonly number[]): number[] {
  for (let i = 0; i < a.length; i += 1) a[i] = (a[i] ?? 0) + (b[i] ?? 0);
  return a;
}
