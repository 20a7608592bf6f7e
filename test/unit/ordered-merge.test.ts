/**
 * mergeChunked (src/store/ordered-merge.ts): the best `limit` rows of several ordered sources, in
 * order, reading about `limit` rows plus a chunk per source. Seeded: DOCKET_SEED replays a run.
 */
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../src/retry/random.js';
import { type ChunkedSource, mergeChunked } from '../../src/store/ordered-merge.js';

const SEED = Number(process.env.DOCKET_SEED ?? Date.now() % 100_000);

interface Row {
  key: number;
  id: number;
}

const byKeyThenId = (a: Row, b: Row) => a.key - b.key || a.id - b.id;

/** A source over `rows` (sorted here) that counts the rows it hands out. */
function sourceOf(rows: Row[], counter: { read: number; calls: number }): ChunkedSource<Row> {
  const sorted = [...rows].sort(byKeyThenId);
  return (after, count) => {
    counter.calls += 1;
    const from = after === undefined ? 0 : sorted.findIndex((row) => byKeyThenId(row, after) > 0);
    const chunk = from < 0 ? [] : sorted.slice(from, from + count);
    counter.read += chunk.length;
    return chunk;
  };
}

describe('mergeChunked', () => {
  it(`answers exactly the first limit rows of all sources in order (seed ${SEED})`, () => {
    const random = seededRandom(SEED);
    const pick = (n: number) => Math.floor(random() * n);
    let id = 0;
    for (let trial = 0; trial < 300; trial += 1) {
      const sourceRows = Array.from({ length: pick(12) }, () =>
        Array.from({ length: pick(60) }, () => ({ key: pick(random() < 0.5 ? 10 : 1000), id: ++id })),
      );
      const limit = pick(150);
      const counter = { read: 0, calls: 0 };
      const merged = mergeChunked(
        sourceRows.map((rows) => sourceOf(rows, counter)),
        limit,
        byKeyThenId,
      );
      const expected = sourceRows.flat().sort(byKeyThenId).slice(0, limit);
      expect(merged, `seed ${SEED}, trial ${trial}`).toEqual(expected);
    }
  });

  it('reads one source once, and many sources about limit rows plus a chunk each', () => {
    const one = { read: 0, calls: 0 };
    const rows = Array.from({ length: 1000 }, (_, i) => ({ key: i, id: i }));
    expect(mergeChunked([sourceOf(rows, one)], 500, byKeyThenId)).toHaveLength(500);
    expect(one).toEqual({ read: 500, calls: 1 });

    // 100 sources of 1,000 rows interleaved: the first 500 are 5 of each. Reading 500 of each
    // would be 50,000 rows; the first chunks (8 each) cover it.
    const interleaved = { read: 0, calls: 0 };
    const sources = Array.from({ length: 100 }, (_, s) =>
      sourceOf(
        Array.from({ length: 1000 }, (_, i) => ({ key: i * 100 + s, id: i * 100 + s })),
        interleaved,
      ),
    );
    const merged = mergeChunked(sources, 500, byKeyThenId);
    expect(merged.map((row) => row.key)).toEqual(Array.from({ length: 500 }, (_, i) => i));
    expect(interleaved.read).toBe(800);
    expect(interleaved.calls).toBe(100);

    // One source holds all the first 500 (a backfill of one kind, then the others): it is read on
    // in doubling chunks (8, 16, … 256), the others once.
    const backfill = { read: 0, calls: 0 };
    const queued = Array.from({ length: 100 }, (_, s) =>
      sourceOf(
        Array.from({ length: 1000 }, (_, i) => ({ key: s * 1000 + i, id: s * 1000 + i })),
        backfill,
      ),
    );
    expect(mergeChunked(queued, 500, byKeyThenId).map((row) => row.key)).toEqual(
      Array.from({ length: 500 }, (_, i) => i),
    );
    expect(backfill.read).toBeLessThanOrEqual(500 + 2 * 256 + 99 * 8);
  });

  it('answers nothing for no sources or a limit of 0, without reading', () => {
    const counter = { read: 0, calls: 0 };
    expect(mergeChunked([], 10, byKeyThenId)).toEqual([]);
    expect(mergeChunked([sourceOf([{ key: 1, id: 1 }], counter)], 0, byKeyThenId)).toEqual([]);
    expect(counter.calls).toBe(0);
  });
});
