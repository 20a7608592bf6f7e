/**
 * A payload filter reads every row the other conditions leave: no index can serve an arbitrary
 * JSON path. On a million-row queue a value that no row holds meant a 700 ms answer, so the
 * dashboard's lists search a bounded span of ids per request instead: id windows of
 * {@link SEARCH_WINDOW_IDS}, each one index range read and filtered, until the page is full, the
 * windows run out ({@link SEARCH_MAX_WINDOWS}) or the time budget ({@link SEARCH_BUDGET_MS}) is
 * spent. A page cut short by the bound still carries a `next` cursor (the last id searched) and
 * `searchedThrough`, so the next request goes on where this one stopped: no row is skipped and
 * none is shown twice, and the answer time stays bounded whatever the table's size.
 *
 * Lists without a payload filter are index-ordered ranges with a LIMIT already and pass straight
 * through.
 */
import type { Job } from '../job/job.js';
import type { JobFilter, ListOrder } from '../job/job-filter.js';

/** Ids per window: one index range read of at most this many rows. */
export const SEARCH_WINDOW_IDS = 20_000n;
/** Windows per request at most (with the budget below, whichever comes first). */
export const SEARCH_MAX_WINDOWS = 8;
/** Time per request: no further window starts after this much. */
export const SEARCH_BUDGET_MS = 80;

export interface SearchPage {
  jobs: Job[];
  /** The cursor of the next page, null when nothing is left to search. */
  next: string | null;
  /** Set when the bound cut the search short: ids up to (or, descending, down to) this one were searched. */
  searchedThrough?: string;
}

/** The bounds (the constants above unless a test sets smaller ones). */
export interface SearchBounds {
  windowIds: bigint;
  maxWindows: number;
  budgetMs: number;
}

const DEFAULT_BOUNDS: SearchBounds = {
  windowIds: SEARCH_WINDOW_IDS,
  maxWindows: SEARCH_MAX_WINDOWS,
  budgetMs: SEARCH_BUDGET_MS,
};

export interface SearchRequest {
  filter: JobFilter;
  limit: number;
  afterId: string | undefined;
  order: ListOrder;
}

/**
 * One page of `list` (the library's listJobs or listDeadLetters) for `request`, bounded as the
 * module comment says. `elapsedMs` is injected so tests can drive the budget.
 */
export async function boundedSearch(
  list: (params: JobFilter & { limit: number; afterId?: string | undefined; order: ListOrder }) => Promise<Job[]>,
  request: SearchRequest,
  elapsedMs: () => number,
  bounds: SearchBounds = DEFAULT_BOUNDS,
): Promise<SearchPage> {
  const { filter, limit, order } = request;
  if (filter.payload === undefined) {
    const jobs = await list({ ...filter, limit, afterId: request.afterId, order });
    return { jobs, next: jobs.length === limit ? (jobs.at(-1)?.id ?? null) : null };
  }
  const { payload: _payload, ...candidates } = filter;
  const desc = order === 'desc';
  const userFrom = filter.idFrom === undefined ? undefined : BigInt(filter.idFrom);
  const userTo = filter.idTo === undefined ? undefined : BigInt(filter.idTo);
  const jobs: Job[] = [];
  let cursor = request.afterId;
  for (let window = 0; window < bounds.maxWindows; window++) {
    if (window > 0 && elapsedMs() >= bounds.budgetMs) return { jobs, next: cursor ?? null, searchedThrough: cursor };
    // The first candidate past the cursor (an index probe): windows start at rows that exist, so
    // gaps in the id space (a sharded store's ranges, purged spans) cost nothing.
    const [first] = await list({ ...candidates, limit: 1, afterId: cursor, order });
    if (first === undefined) return { jobs, next: null };
    const start = BigInt(first.id);
    let from = desc ? start - bounds.windowIds + 1n : start;
    if (from < 1n) from = 1n;
    let to = desc ? start : start + bounds.windowIds - 1n;
    if (userFrom !== undefined && from < userFrom) from = userFrom;
    if (userTo !== undefined && to > userTo) to = userTo;
    const found = await list({
      ...filter,
      idFrom: String(from),
      idTo: String(to),
      limit: limit - jobs.length,
      afterId: cursor,
      order,
    });
    jobs.push(...found);
    if (jobs.length === limit) return { jobs, next: jobs.at(-1)?.id ?? null };
    // The window is exhausted: the next one starts past its far end.
    cursor = String(desc ? from : to);
    if ((desc && userFrom !== undefined && from <= userFrom) || (!desc && userTo !== undefined && to >= userTo)) {
      return { jobs, next: null };
    }
    if (desc && from <= 1n) return { jobs, next: null };
  }
  return { jobs, next: cursor ?? null, searchedThrough: cursor };
}
