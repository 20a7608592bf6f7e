/**
 * The dashboard's store parameter rules and result assembly, once for both stores: filtered
 * list pages, bounded counts, activity windows and bulk batches. Pure: each store checks its
 * input here before any SQL, so both refuse the same input with the same ValidationError, and
 * assembles its rows into the same records.
 */
import { LATENESS_BUCKET_BOUNDS_MS, LATENESS_BUCKET_COUNT } from '../job/activity.js';
import { ValidationError } from '../job/errors.js';
import { describe } from '../job/field-checks.js';
import type { JobState } from '../job/job.js';
import {
  BULK_ACTION_STATES,
  type BulkAction,
  bulkAction,
  bulkActionStates,
  checkJobFilter,
  type JobFilter,
  type ListOrder,
  listOrder,
} from '../job/job-filter.js';
import { afterJobId, listStates, pageSize } from '../job/list-params.js';
import type {
  ActivityBucket,
  DeadLetterListParams,
  JobActivityParams,
  JobBulkApplyParams,
  JobCountParams,
  JobListParams,
  QueueCountField,
  QueueCounts,
} from './store.js';

/** Default of {@link QueueCountsParams.exactUpTo}. */
export const DEFAULT_EXACT_QUEUE_COUNT = 10_000;
/** Default of {@link JobCountParams.exactUpTo}. */
export const DEFAULT_EXACT_MATCH_COUNT = 1_000_000;
/** Largest bulk batch one {@link Store.jobBulkApply} call takes. */
export const MAX_BULK_BATCH = 10_000;
/** Most buckets one activity query answers. */
export const MAX_ACTIVITY_BUCKETS = 1440;

/** A filtered list page as a store runs it: where to read (jobs, dead letters) and how to page. */
export interface CheckedListPage {
  filter: JobFilter;
  /** States read from the jobs table (empty: none). */
  liveStates: JobState[];
  /** Whether dead_jobs is read. */
  dead: boolean;
  limit: number;
  /** 0 when paging from the start. */
  afterId: number;
  order: ListOrder;
}

/** Checks a jobList call: the filter, page size, cursor and order, by the rules every face shares. */
export function checkListParams(params: JobListParams): CheckedListPage {
  const filter = checkJobFilter(params);
  const states = params.states === undefined ? undefined : listStates(params.states);
  const all = states ?? ['pending', 'running', 'done', 'cancelled', 'dead'];
  return {
    filter,
    liveStates: [...new Set(all.filter((state) => state !== 'dead'))],
    dead: all.includes('dead'),
    limit: pageSize(params.limit),
    afterId: afterJobId(params.afterId),
    order: listOrder(params.order),
  };
}

/** Checks a deadLetterList call (a jobList reading only dead letters). */
export function checkDeadLetterListParams(params: DeadLetterListParams): CheckedListPage {
  const given: Record<string, unknown> = { ...params };
  if (given.states !== undefined) throw new ValidationError('states', 'is not a dead-letter list parameter');
  return checkListParams({ ...params, states: ['dead'] });
}

/** A bulk action's batch or count, checked: the filter, the states the action reads, the batch. */
export interface CheckedBulk {
  action: BulkAction;
  filter: JobFilter;
  liveStates: JobState[];
  dead: boolean;
}

function checkedBulk(action: unknown, filter: JobFilter): CheckedBulk {
  const checkedAction = bulkAction(action);
  const checkedFilter = checkJobFilter(filter, 'filter.');
  const states = bulkActionStates(checkedAction, checkedFilter);
  return {
    action: checkedAction,
    filter: checkedFilter,
    liveStates: states.filter((state) => state !== 'dead'),
    dead: states.includes('dead'),
  };
}

/** Checks a jobCountMatching call. */
export function checkCountParams(params: JobCountParams): CheckedBulk & { exactUpTo: number } {
  const exactUpTo = params.exactUpTo ?? DEFAULT_EXACT_MATCH_COUNT;
  positiveCount('exactUpTo', exactUpTo);
  return { ...checkedBulk(params.action, params.filter), exactUpTo };
}

/** Checks a jobBulkApply call: batch size, cursor, and runAt (required by reschedule only). */
export function checkBulkApplyParams(
  params: JobBulkApplyParams,
): CheckedBulk & { afterId: number; limit: number; runAt: Date | null } {
  const bulk = checkedBulk(params.action, params.filter);
  const { limit } = params;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_BULK_BATCH) {
    throw new ValidationError('limit', `must be an integer from 1 to ${MAX_BULK_BATCH}, got ${describe(limit)}`);
  }
  if (bulk.action === 'reschedule') {
    if (!(params.runAt instanceof Date) || Number.isNaN(params.runAt.getTime())) {
      throw new ValidationError('runAt', `reschedule needs the new run time, got ${describe(params.runAt)}`);
    }
  } else if (params.runAt !== undefined) {
    throw new ValidationError('runAt', `is only for reschedule, not ${bulk.action}`);
  }
  return { ...bulk, afterId: afterJobId(params.afterId), limit, runAt: params.runAt ?? null };
}

/** Checks a queueCounts `exactUpTo`. */
export function checkExactUpTo(value: number | undefined): number {
  const exact = value ?? DEFAULT_EXACT_QUEUE_COUNT;
  positiveCount('exactUpTo', exact);
  return exact;
}

function positiveCount(field: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 100_000_000) {
    throw new ValidationError(field, `must be an integer from 1 to 100000000, got ${describe(value)}`);
  }
}

/** An activity window, checked: bucket length and count, aligned to the epoch. */
export interface CheckedActivity {
  /** Start of the first bucket (from, rounded down to a bucket boundary). */
  fromMs: number;
  toMs: number;
  bucketMs: number;
  buckets: number;
}

/** Checks a jobActivity call. */
export function checkActivityParams(params: JobActivityParams): CheckedActivity {
  const { from, to, bucketMs } = params;
  for (const [field, value] of [
    ['from', from],
    ['to', to],
  ] as const) {
    if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
      throw new ValidationError(field, `must be a valid Date, got ${describe(value)}`);
    }
  }
  if (!Number.isInteger(bucketMs) || bucketMs < 1000 || bucketMs > 86_400_000) {
    throw new ValidationError('bucketMs', `must be an integer from 1000 to 86400000, got ${describe(bucketMs)}`);
  }
  if (to.getTime() <= from.getTime()) throw new ValidationError('to', 'must be after from');
  const fromMs = Math.floor(from.getTime() / bucketMs) * bucketMs;
  const buckets = Math.ceil((to.getTime() - fromMs) / bucketMs);
  if (buckets > MAX_ACTIVITY_BUCKETS) {
    throw new ValidationError('to', `the window holds ${buckets} buckets, more than ${MAX_ACTIVITY_BUCKETS}`);
  }
  return { fromMs, toMs: to.getTime(), bucketMs, buckets };
}

/**
 * The SQL expression of the lateness histogram bucket of `latenessMs` (an SQL expression in ms),
 * the same CASE in both stores: bucket i holds (bound[i-1], bound[i]], the last one the rest.
 */
export function latenessBucketSql(latenessMs: string): string {
  const branches = LATENESS_BUCKET_BOUNDS_MS.map((bound, index) => `WHEN ${latenessMs} <= ${bound} THEN ${index}`);
  return `(CASE ${branches.join(' ')} ELSE ${LATENESS_BUCKET_BOUNDS_MS.length} END)`;
}

/** One aggregated activity row as either store returns it (counts may arrive as text). */
export interface ActivityRow {
  bucket: number | string;
  /** `completed` (with a lateness bucket, or null when the start is unknown), `failed`, or `cancelled` (not charted). */
  what: 'completed' | 'failed' | 'cancelled';
  lateness_bucket: number | string | null;
  n: number | string;
}

/** Every bucket of the window, zeros where no row fell, from the stores' aggregated rows. */
export function activityBuckets(window: CheckedActivity, rows: readonly ActivityRow[]): ActivityBucket[] {
  const buckets: ActivityBucket[] = Array.from({ length: window.buckets }, (_, i) => ({
    at: new Date(window.fromMs + i * window.bucketMs),
    completed: 0,
    failed: 0,
    latenessHistogram: new Array<number>(LATENESS_BUCKET_COUNT).fill(0),
  }));
  for (const row of rows) {
    const bucket = buckets[Number(row.bucket)];
    if (!bucket) continue;
    const n = Number(row.n);
    // Cancelled rows come from the same index range as completions; the charts leave them out.
    if (row.what === 'cancelled') continue;
    if (row.what === 'failed') {
      bucket.failed += n;
      continue;
    }
    bucket.completed += n;
    if (row.lateness_bucket !== null) {
      const index = Number(row.lateness_bucket);
      bucket.latenessHistogram[index] = (bucket.latenessHistogram[index] ?? 0) + n;
    }
  }
  return buckets;
}

/**
 * A queue's counts from its bounded parts. Each part is `{ n, estimated }`; the live split is
 * scheduled = pending - due, available = due + lapsed, running = running - lapsed.
 */
export interface QueueCountParts {
  queue: string;
  paused: boolean;
  pending: Part;
  due: Part;
  running: Part;
  lapsed: Part;
  done: Part;
  cancelled: Part;
  dead: Part;
}

/** One bounded count: exact, or an estimate. */
export interface Part {
  n: number;
  estimated: boolean;
}

/** The {@link QueueCounts} record of a queue's bounded parts (`unhandled` 0: Docket fills it in). */
export function queueCountsOf(parts: QueueCountParts): QueueCounts {
  const estimated: QueueCountField[] = [];
  const field = (name: QueueCountField, value: number, ...from: Part[]): number => {
    if (from.some((part) => part.estimated)) estimated.push(name);
    return Math.max(0, Math.round(value));
  };
  const counts: QueueCounts = {
    queue: parts.queue,
    scheduled: field('scheduled', parts.pending.n - parts.due.n, parts.pending, parts.due),
    available: field('available', parts.due.n + parts.lapsed.n, parts.due, parts.lapsed),
    running: field('running', parts.running.n - parts.lapsed.n, parts.running, parts.lapsed),
    done: field('done', parts.done.n, parts.done),
    cancelled: field('cancelled', parts.cancelled.n, parts.cancelled),
    dead: field('dead', parts.dead.n, parts.dead),
    unhandled: 0,
    estimated,
  };
  if (parts.paused) counts.paused = true;
  return counts;
}

/** The states a bulk action reads, for callers that plan batches (re-exported for the faces). */
export { BULK_ACTION_STATES };
