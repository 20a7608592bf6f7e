/**
 * A k-way merge of ordered sources read in chunks: how the SQLite claim takes the best `limit`
 * due rows of several (queue, kind) triples of one priority without reading `limit` rows of each
 * (decision 0026; PostgreSQL's claim does the same in its merge function, one cursor per triple).
 * Pure: a source is a function that reads the next rows after the last one it returned.
 */

/** One ordered source: `read(after, count)` answers up to `count` rows after `after` (undefined: from the start), in order. */
export type ChunkedSource<T> = (after: T | undefined, count: number) => T[];

/** The smallest first read of each source when there are several: enough that most sources are read once. */
const MIN_FIRST_CHUNK = 8;

interface Reader<T> {
  read: ChunkedSource<T>;
  rows: T[];
  next: number;
  /** The last read filled its count, so more rows may follow. */
  more: boolean;
  chunk: number;
}

/**
 * The first `limit` rows of all `sources` together, in `compare` order (each source already in
 * that order). One source is read once, `limit` rows. Several are each read a chunk of about
 * limit / sources (at least {@link MIN_FIRST_CHUNK}) first, then, as a source's rows are used up,
 * a chunk twice its last, so the rows read are about `limit` plus a chunk per source, where
 * reading each source's `limit` rows would be `limit` per source.
 */
export function mergeChunked<T>(
  sources: readonly ChunkedSource<T>[],
  limit: number,
  compare: (a: T, b: T) => number,
): T[] {
  if (limit <= 0 || sources.length === 0) return [];
  if (sources.length === 1) return sources[0]!(undefined, limit);
  const firstChunk = Math.min(limit, Math.max(MIN_FIRST_CHUNK, Math.ceil(limit / sources.length) + 1));
  const heap: Reader<T>[] = [];
  const head = (reader: Reader<T>) => reader.rows[reader.next]!;
  const before = (a: Reader<T>, b: Reader<T>) => compare(head(a), head(b)) < 0;
  const siftDown = (from: number) => {
    let slot = from;
    for (;;) {
      let child = 2 * slot + 1;
      if (child >= heap.length) return;
      if (child + 1 < heap.length && before(heap[child + 1]!, heap[child]!)) child += 1;
      if (!before(heap[child]!, heap[slot]!)) return;
      [heap[slot], heap[child]] = [heap[child]!, heap[slot]!];
      slot = child;
    }
  };
  for (const read of sources) {
    const rows = read(undefined, firstChunk);
    if (rows.length > 0) heap.push({ read, rows, next: 0, more: rows.length === firstChunk, chunk: firstChunk });
  }
  for (let slot = Math.floor(heap.length / 2) - 1; slot >= 0; slot -= 1) siftDown(slot);
  const merged: T[] = [];
  while (merged.length < limit && heap.length > 0) {
    const top = heap[0]!;
    merged.push(head(top));
    top.next += 1;
    if (top.next === top.rows.length) {
      const last = top.rows[top.rows.length - 1]!;
      top.chunk = Math.min(limit, top.chunk * 2);
      top.rows = top.more && merged.length < limit ? top.read(last, top.chunk) : [];
      top.next = 0;
      top.more = top.rows.length === top.chunk;
      if (top.rows.length === 0) {
        const tail = heap.pop()!;
        if (heap.length === 0) break;
        heap[0] = tail;
      }
    }
    siftDown(0);
  }
  return merged;
}
