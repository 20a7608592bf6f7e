/**
 * The SQLite store's dashboard SQL, twin of src/store/postgres/dashboard-queries.ts: filtered job
 * lists (keyset by id, never OFFSET for paging), bounded per-queue counts, the activity window,
 * bulk-action counts and batches. Runs inside the store's transactions (reads deferred, bulk
 * batches BEGIN IMMEDIATE, so each batch holds the write lock for one batch only).
 *
 * Statements are assembled from the filter out of fixed SQL text; every caller value is a named
 * parameter. Differences from PostgreSQL: the payload test is `json_type` + `json_extract` on a
 * `$."key"` path (the type check keeps `true` from matching 1); SQLite has no planner row
 * estimate, so a count past its bound is extrapolated from the id density of the first `bound`
 * index entries of its range (exact for contiguous ids) and flagged estimated; a retry batch moves
 * its rows one statement pair each (in one transaction), reusing the single retry's SQL; and the
 * jobs table has no (state, queue, id) index but one (queue, id) index per state that piles up
 * (decision 0017), so every state is read on its own and pages are merged by id here.
 */
import type Database from 'better-sqlite3';
import type { JobFilter } from '../../job/job-filter.js';
import {
  type ActivityRow,
  activityBuckets,
  type CheckedBulk,
  type CheckedListPage,
  checkActivityParams,
  checkExactUpTo,
  latenessBucketSql,
  type Part,
  queueCountsOf,
} from '../dashboard-params.js';
import type { ActivityBucket, BulkBatchResult, JobActivityParams, MatchCount, QueueCounts } from '../store.js';
import type { JobRow } from './job-row.js';

type Params = Record<string, unknown>;

/** The filter's conditions on alias `a` (states excluded), adding their named parameters to `params`. */
function filterConditions(params: Params, filter: JobFilter, a: string): string[] {
  const conditions: string[] = [];
  if (filter.queue !== undefined) {
    params.f_queue = filter.queue;
    conditions.push(`${a}.queue = :f_queue`);
  }
  if (filter.kind !== undefined) {
    params.f_kind = filter.kind;
    conditions.push(`${a}.kind = :f_kind`);
  }
  if (filter.idFrom !== undefined) {
    params.f_id_from = Number(filter.idFrom);
    conditions.push(`${a}.id >= :f_id_from`);
  }
  if (filter.idTo !== undefined) {
    params.f_id_to = Number(filter.idTo);
    conditions.push(`${a}.id <= :f_id_to`);
  }
  if (filter.runAtFrom !== undefined) {
    params.f_run_from = filter.runAtFrom.getTime();
    conditions.push(`${a}.run_at >= :f_run_from`);
  }
  if (filter.runAtTo !== undefined) {
    params.f_run_to = filter.runAtTo.getTime();
    conditions.push(`${a}.run_at < :f_run_to`);
  }
  if (filter.payload !== undefined) {
    // Keys never hold `"` or `\` (the grammar refuses them), so quoting each is enough.
    params.f_path = `$${filter.payload.path.map((key) => `."${key}"`).join('')}`;
    const { value } = filter.payload;
    const type = `json_type(${a}.payload, :f_path)`;
    if (value === null) conditions.push(`${type} = 'null'`);
    else if (typeof value === 'boolean') conditions.push(`${type} = '${value ? 'true' : 'false'}'`);
    else {
      params.f_value = value;
      const types = typeof value === 'number' ? `('integer', 'real')` : `('text')`;
      conditions.push(`${type} IN ${types} AND json_extract(${a}.payload, :f_path) = :f_value`);
    }
  }
  return conditions;
}

/**
 * Where the rows of one state in the jobs table are read from (migration 5, decision 0017): a
 * partial (queue, id) index per state that piles up, and for the few running rows the lapsed-lease
 * search's index. Each read names its state as a literal (SQLite uses a partial index only for a
 * WHERE that repeats its predicate) and its index by INDEXED BY, so no plan depends on statistics.
 */
const STATE_INDEX: Readonly<Record<string, string>> = {
  pending: 'jobs_pending_queue_id',
  running: 'jobs_running_lease',
  done: 'jobs_done_queue_id',
  cancelled: 'jobs_cancelled_queue_id',
};

/** How a read of one state's rows walks them. */
type StateWalk =
  /** Any order (counts, the queue's min and max id): that state's index, seeking the queue when given. */
  | 'index'
  /** In id order, for a page or a bulk batch. */
  | 'id-order';

/** The index a jobs-table state is read through; a state outside the table is a programming error. */
function stateIndex(state: string): string {
  const index = STATE_INDEX[state];
  if (index === undefined) throw new Error(`docket: no jobs-table state ${JSON.stringify(state)}`);
  return index;
}

/** `a.state IN (…)` over jobs-table states, written as literals. */
function stateIn(states: readonly string[], a: string): string {
  for (const state of states) stateIndex(state);
  return `${a}.state IN (${states.map((state) => `'${state}'`).join(', ')})`;
}

/**
 * The FROM clause (alias `a`) and state condition that read the jobs of `state`. In id order with
 * no queue to seek, a pending, done or cancelled read walks the primary key and stops after one
 * page (the state's (queue, id) index cannot give id order across queues, and sorting a whole
 * state takes seconds at a million rows); running rows are few, so they are always read through
 * their index and sorted.
 */
function stateRead(state: string, a: string, walk: StateWalk, hasQueue: boolean): Range {
  const index = stateIndex(state);
  const condition = `${a}.state = '${state}'`;
  if (walk === 'id-order' && !hasQueue && state !== 'running') return { from: `jobs ${a} NOT INDEXED`, condition };
  return { from: `jobs ${a} INDEXED BY ${index}`, condition };
}

function where(conditions: readonly string[]): string {
  return conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
}

/** A read of one table's rows: its FROM clause (alias `x`) and WHERE condition. */
interface Range {
  from: string;
  condition: string;
}

/** A queue's bounded count parts before estimation (each a count of at most the cap). */
interface CappedRow {
  pending: number;
  due: number;
  running: number;
  lapsed: number;
  done: number;
  cancelled: number;
  dead: number;
}

/** The dashboard statements of one connection (assembled ones prepared once per SQL text). */
export class SqliteDashboardQueries {
  private readonly db: Database.Database;
  private readonly prepared = new Map<string, Database.Statement>();

  constructor(db: Database.Database) {
    this.db = db;
  }

  private statement(sql: string): Database.Statement {
    let statement = this.prepared.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      // Bounded: a filter shape is one of a few dozen combinations of present fields.
      if (this.prepared.size > 256) this.prepared.clear();
      this.prepared.set(sql, statement);
    }
    return statement;
  }

  /** A filtered page: each state's and the dead letters' id-ordered range with a LIMIT, merged by id in the page's order. */
  list(page: CheckedListPage): JobRow[] {
    const params: Params = { limit: page.limit };
    const desc = page.order === 'desc';
    const direction = desc ? 'DESC' : 'ASC';
    if (page.afterId !== 0) params.after = page.afterId;
    const rows: JobRow[] = [];
    const read = (from: string, a: string, state: string | null) => {
      const conditions = filterConditions(params, page.filter, a);
      if (state !== null) conditions.unshift(state);
      if (page.afterId !== 0) conditions.push(`${a}.id ${desc ? '<' : '>'} :after`);
      const sql = `SELECT ${a}.* FROM ${from} ${where(conditions)} ORDER BY ${a}.id ${direction} LIMIT :limit`;
      rows.push(...(this.statement(sql).all(params) as JobRow[]));
    };
    const hasQueue = page.filter.queue !== undefined;
    // Without a queue, the piling-up states share one walk of the primary key (a page of mixed
    // states ends as soon as it has `limit` rows of any of them); running rows are read apart.
    const walked: string[] = hasQueue ? [] : page.liveStates.filter((state) => state !== 'running');
    if (walked.length > 0) read('jobs j NOT INDEXED', 'j', stateIn(walked, 'j'));
    for (const state of page.liveStates) {
      if (walked.includes(state)) continue;
      const { from, condition } = stateRead(state, 'j', 'id-order', hasQueue);
      read(from, 'j', condition);
    }
    if (page.dead) read('dead_jobs d', 'd', null);
    rows.sort((x, y) => (desc ? y.id - x.id : x.id - y.id));
    return rows.slice(0, page.limit);
  }

  /**
   * Per-queue counts, bounded: queues by loose index walks, each part a LIMITed range count
   * (the due part per claim-index triple), a part at the bound extrapolated and flagged.
   */
  queueCounts(
    nowMs: number,
    exactUpToGiven: number | undefined,
    triples: readonly { queue: string; kind: string; priority: number }[],
  ): QueueCounts[] {
    const cap = checkExactUpTo(exactUpToGiven) + 1;
    const names = new Set<string>();
    // One seek per queue in each (queue, id) index: `queue > ?` is a range SQLite serves from the
    // index's first column (a row-value comparison over two columns is not).
    const walk = (from: string, condition: string) => {
      const next = this.statement(
        `SELECT x.queue FROM ${from} WHERE ${condition} AND x.queue > :queue ORDER BY x.queue LIMIT 1`,
      ).pluck();
      let queue = next.get({ queue: '' }) as string | undefined;
      while (queue !== undefined) {
        names.add(queue);
        queue = next.get({ queue }) as string | undefined;
      }
    };
    for (const state of ['pending', 'done', 'cancelled']) {
      const { from, condition } = stateRead(state, 'x', 'index', true);
      walk(from, condition);
    }
    // Running rows (a few per worker slot) have no queue index: their queues in one read of their own index.
    const running = stateRead('running', 'x', 'index', true);
    for (const queue of this.statement(`SELECT DISTINCT x.queue FROM ${running.from} WHERE ${running.condition}`)
      .pluck()
      .all() as string[])
      names.add(queue);
    walk('dead_jobs x', '1 = 1');
    const paused = new Set(
      (this.statement('SELECT name FROM queues WHERE paused = 1').all() as { name: string }[]).map((r) => r.name),
    );
    for (const name of paused) names.add(name);

    const capped = ({ from, condition }: Range, params: Params): number =>
      Number(
        this.statement(`SELECT count(*) FROM (SELECT 1 FROM ${from} WHERE ${condition} LIMIT :cap)`)
          .pluck()
          .get({ ...params, cap }),
      );
    const stateRange = (state: string, extra = ''): Range => {
      const { from, condition } = stateRead(state, 'x', 'index', true);
      return { from, condition: `${condition} AND x.queue = :queue${extra}` };
    };
    const lapsedRange = stateRange('running', ' AND x.lease_until <= :now');
    const deadRange: Range = { from: 'dead_jobs x', condition: 'x.queue = :queue' };
    return [...names]
      .sort((a, b) => (a === b ? 0 : Buffer.compare(Buffer.from(a), Buffer.from(b))))
      .map((queue) => {
        const params = { queue, now: nowMs };
        let due = 0;
        for (const triple of triples) {
          if (triple.queue !== queue || due >= cap) continue;
          due += capped(
            {
              from: 'jobs x INDEXED BY jobs_pending_kind_claim',
              condition:
                "x.state = 'pending' AND x.queue = :queue AND x.kind = :kind AND x.priority = :priority AND x.run_at <= :now",
            },
            { queue, kind: triple.kind, priority: triple.priority, now: nowMs },
          );
        }
        const row: CappedRow = {
          pending: capped(stateRange('pending'), { queue }),
          due: Math.min(due, cap),
          running: capped(stateRange('running'), { queue }),
          lapsed: capped(lapsedRange, params),
          done: capped(stateRange('done'), { queue }),
          cancelled: capped(stateRange('cancelled'), { queue }),
          dead: capped(deadRange, { queue }),
        };
        const part = (n: number, estimate: () => number): Part =>
          n < cap ? { n, estimated: false } : { n: estimate(), estimated: true };
        const pending = part(row.pending, () => this.extrapolate(stateRange('pending'), { queue }, cap));
        return queueCountsOf({
          queue,
          paused: paused.has(queue),
          pending,
          // The due share of the first `cap` pending rows by id, applied to the pending estimate.
          due: part(row.due, () => {
            const { from, condition } = stateRange('pending');
            const sample = this.statement(
              `SELECT count(*) FROM (SELECT x.run_at FROM ${from} WHERE ${condition} ORDER BY x.id LIMIT :cap) s WHERE s.run_at <= :now`,
            )
              .pluck()
              .get({ ...params, cap }) as number;
            return (pending.n * sample) / cap;
          }),
          running: part(row.running, () => this.extrapolate(stateRange('running'), { queue }, cap)),
          lapsed: part(row.lapsed, () => this.extrapolate(lapsedRange, params, cap)),
          done: part(row.done, () => this.extrapolate(stateRange('done'), { queue }, cap)),
          cancelled: part(row.cancelled, () => this.extrapolate(stateRange('cancelled'), { queue }, cap)),
          dead: part(row.dead, () => this.extrapolate(deadRange, { queue }, cap)),
        });
      });
  }

  /**
   * An estimate of a range's rows past the count bound: the id span of the whole range scaled by
   * the density of its first `cap` entries (three index probes; exact when ids are contiguous).
   */
  private extrapolate({ from, condition }: Range, params: Params, cap: number): number {
    const span = this.statement(
      `SELECT (SELECT min(x.id) FROM ${from} WHERE ${condition}) AS lo, (SELECT max(x.id) FROM ${from} WHERE ${condition}) AS hi`,
    ).get(params) as { lo: number | null; hi: number | null };
    const at = this.statement(`SELECT x.id FROM ${from} WHERE ${condition} ORDER BY x.id LIMIT 1 OFFSET :offset`)
      .pluck()
      .get({ ...params, offset: cap - 1 }) as number | undefined;
    if (span.lo === null || span.hi === null || at === undefined || at <= span.lo) return cap;
    return Math.max(cap, (cap * (span.hi - span.lo + 1)) / (at - span.lo + 1));
  }

  /**
   * The activity window, aggregated per bucket in SQL (ranges on jobs_finished and dead_jobs_parked_at).
   * CAST: better-sqlite3 binds JavaScript numbers as REAL, so the division would not be integral.
   */
  activity(params: JobActivityParams): ActivityBucket[] {
    const window = checkActivityParams(params);
    const sql = `
      SELECT CAST((j.finished_at - :from) / :bucket AS INTEGER) AS bucket,
             CASE WHEN j.state = 'done' THEN 'completed' ELSE 'cancelled' END AS what,
             CASE WHEN j.state = 'done' AND j.started_at IS NOT NULL THEN ${latenessBucketSql('(j.started_at - j.run_at)')} END AS lateness_bucket,
             count(*) AS n
      FROM jobs j
      WHERE j.state IN ('done', 'cancelled') AND j.finished_at >= :from AND j.finished_at < :to
      GROUP BY 1, 2, 3
      UNION ALL
      SELECT CAST((d.parked_at - :from) / :bucket AS INTEGER), 'failed', NULL, count(*)
      FROM dead_jobs d WHERE d.parked_at >= :from AND d.parked_at < :to
      GROUP BY 1`;
    const rows = this.statement(sql).all({ from: window.fromMs, to: window.toMs, bucket: window.bucketMs });
    return activityBuckets(window, rows as ActivityRow[]);
  }

  /** How many jobs a bulk action would touch: LIMITed counts, extrapolated past the bound. */
  countMatching(bulk: CheckedBulk, exactUpTo: number): MatchCount {
    let count = 0;
    let estimated = false;
    // Counted from each state's index; past the bound, estimated from id-ordered probes (the same
    // rows read in id order: without a queue, that is the primary key's walk, not a sort).
    let inIdOrder: { range: Range; params: Params }[] | undefined;
    this.matchRanges(bulk, 'index').forEach(({ range, params }, i) => {
      const n = Number(
        this.statement(`SELECT count(*) FROM (SELECT 1 FROM ${range.from} WHERE ${range.condition} LIMIT :cap)`)
          .pluck()
          .get({ ...params, cap: exactUpTo + 1 }),
      );
      if (n > exactUpTo) {
        inIdOrder ??= this.matchRanges(bulk, 'id-order');
        const ordered = inIdOrder[i]!;
        count += this.extrapolate(ordered.range, ordered.params, exactUpTo + 1);
        estimated = true;
      } else count += n;
    });
    return { count: Math.round(count), estimated };
  }

  /** One range per live state the bulk names (each read from its own index), and the dead letters. */
  private matchRanges(bulk: CheckedBulk, walk: StateWalk): { range: Range; params: Params }[] {
    const ranges: { range: Range; params: Params }[] = [];
    const hasQueue = bulk.filter.queue !== undefined;
    for (const state of bulk.liveStates) {
      const params: Params = {};
      const { from, condition } = stateRead(state, 'x', walk, hasQueue);
      const conditions = [condition, ...filterConditions(params, bulk.filter, 'x')];
      ranges.push({ range: { from, condition: conditions.join(' AND ') }, params });
    }
    if (bulk.dead) {
      const params: Params = {};
      const conditions = filterConditions(params, bulk.filter, 'x');
      ranges.push({
        range: { from: 'dead_jobs x', condition: conditions.length === 0 ? '1' : conditions.join(' AND ') },
        params,
      });
    }
    return ranges;
  }

  /**
   * The ids of one bulk batch: the next `limit` matches above `afterId`, in id order (run inside
   * the batch's write transaction, so nothing changes between this read and the action); over
   * several live states, each state's next `limit` ids are merged.
   */
  batchIds(bulk: CheckedBulk, afterId: number, limit: number): number[] {
    const ids: number[] = [];
    const ranges = this.matchRanges(bulk, 'id-order');
    // A bulk acts on one table: the live states' when it names any, else the dead letters'.
    for (const { range, params } of bulk.liveStates.length > 0 ? ranges.slice(0, bulk.liveStates.length) : ranges) {
      const sql = `SELECT x.id FROM ${range.from} WHERE ${range.condition} AND x.id > :after ORDER BY x.id LIMIT :limit`;
      ids.push(
        ...(this.statement(sql)
          .pluck()
          .all({ ...params, after: afterId, limit }) as number[]),
      );
    }
    return ids.sort((a, b) => a - b).slice(0, limit);
  }

  /** Cancels the live jobs among `ids`; returns how many. */
  cancelMany(ids: readonly number[], nowMs: number): number {
    return this.statement(
      `UPDATE jobs SET state = 'cancelled', finished_at = :now, lease_until = NULL
       WHERE id IN (SELECT value FROM json_each(:ids)) AND state IN ('pending', 'running')`,
    ).run({ ids: JSON.stringify(ids), now: nowMs }).changes;
  }

  /** Sets run_at of the pending jobs among `ids`; returns how many. */
  rescheduleMany(ids: readonly number[], runAtMs: number): number {
    return this.statement(
      `UPDATE jobs SET run_at = :run_at WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'pending'`,
    ).run({ ids: JSON.stringify(ids), run_at: runAtMs }).changes;
  }

  /** Deletes the dead letters among `ids`; returns how many. */
  purgeMany(ids: readonly number[]): number {
    return this.statement('DELETE FROM dead_jobs WHERE id IN (SELECT value FROM json_each(:ids))').run({
      ids: JSON.stringify(ids),
    }).changes;
  }
}

/** One batch's outcome before the store adds its wake-up. */
export type SqliteBatchResult = BulkBatchResult;
