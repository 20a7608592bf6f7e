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
 * its rows one statement pair each (in one transaction), reusing the single retry's SQL.
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
 * The state condition. `byIdOnly` writes it as `+state` (SQLite's way to keep a term from
 * choosing an index): without a queue, the (state, queue, id) index cannot deliver id order, and
 * SQLite would read a whole state's entries and sort them (seconds at a million rows) where the
 * primary key walks in id order and stops after one page.
 */
function stateCondition(params: Params, states: readonly string[], a: string, byIdOnly = false): string {
  const column = byIdOnly ? `+${a}.state` : `${a}.state`;
  if (states.length === 1) {
    params.f_state = states[0];
    return `${column} = :f_state`;
  }
  params.f_states = JSON.stringify(states);
  return `${column} IN (SELECT value FROM json_each(:f_states))`;
}

function where(conditions: readonly string[]): string {
  return conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
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

  /** A filtered page: each table's index-ordered range with a LIMIT, merged by id in the page's order. */
  list(page: CheckedListPage): JobRow[] {
    const params: Params = { limit: page.limit };
    const desc = page.order === 'desc';
    const direction = desc ? 'DESC' : 'ASC';
    if (page.afterId !== 0) params.after = page.afterId;
    const rows: JobRow[] = [];
    const read = (table: string, a: string, states: string | null) => {
      const conditions = filterConditions(params, page.filter, a);
      if (states !== null) conditions.unshift(states);
      if (page.afterId !== 0) conditions.push(`${a}.id ${desc ? '<' : '>'} :after`);
      const sql = `SELECT ${a}.* FROM ${table} ${a} ${where(conditions)} ORDER BY ${a}.id ${direction} LIMIT :limit`;
      rows.push(...(this.statement(sql).all(params) as JobRow[]));
    };
    const byIdOnly = page.filter.queue === undefined;
    if (page.liveStates.length > 0) read('jobs', 'j', stateCondition(params, page.liveStates, 'j', byIdOnly));
    if (page.dead) read('dead_jobs', 'd', null);
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
    // One seek per (state, queue): `state = ? AND queue > ?` is a range SQLite always serves from
    // the (state, queue, id) index (a row-value comparison over both columns is not).
    const walk = (table: string, condition: string, params: Params) => {
      const next = this.statement(
        `SELECT queue FROM ${table} WHERE ${condition} AND queue > :queue ORDER BY queue LIMIT 1`,
      ).pluck();
      let queue = next.get({ ...params, queue: '' }) as string | undefined;
      while (queue !== undefined) {
        names.add(queue);
        queue = next.get({ ...params, queue }) as string | undefined;
      }
    };
    for (const state of ['pending', 'running', 'done', 'cancelled']) walk('jobs', 'state = :state', { state });
    walk('dead_jobs', '1 = 1', {});
    const paused = new Set(
      (this.statement('SELECT name FROM queues WHERE paused = 1').all() as { name: string }[]).map((r) => r.name),
    );
    for (const name of paused) names.add(name);

    const capped = (table: string, condition: string, params: Params): number =>
      Number(
        this.statement(`SELECT count(*) FROM (SELECT 1 FROM ${table} x WHERE ${condition} LIMIT :cap)`)
          .pluck()
          .get({ ...params, cap }),
      );
    const stateRange = (state: string) => `x.state = '${state}' AND x.queue = :queue`;
    return [...names]
      .sort((a, b) => (a === b ? 0 : Buffer.compare(Buffer.from(a), Buffer.from(b))))
      .map((queue) => {
        const params = { queue, now: nowMs };
        let due = 0;
        for (const triple of triples) {
          if (triple.queue !== queue || due >= cap) continue;
          due += capped(
            'jobs',
            "x.state = 'pending' AND x.queue = :queue AND x.kind = :kind AND x.priority = :priority AND x.run_at <= :now",
            { queue, kind: triple.kind, priority: triple.priority, now: nowMs },
          );
        }
        const row: CappedRow = {
          pending: capped('jobs', stateRange('pending'), { queue }),
          due: Math.min(due, cap),
          running: capped('jobs', stateRange('running'), { queue }),
          lapsed: capped('jobs', `${stateRange('running')} AND x.lease_until <= :now`, params),
          done: capped('jobs', stateRange('done'), { queue }),
          cancelled: capped('jobs', stateRange('cancelled'), { queue }),
          dead: capped('dead_jobs', 'x.queue = :queue', { queue }),
        };
        const part = (n: number, estimate: () => number): Part =>
          n < cap ? { n, estimated: false } : { n: estimate(), estimated: true };
        const pending = part(row.pending, () => this.extrapolate('jobs', stateRange('pending'), { queue }, cap));
        return queueCountsOf({
          queue,
          paused: paused.has(queue),
          pending,
          // The due share of the first `cap` pending rows by id, applied to the pending estimate.
          due: part(row.due, () => {
            const sample = this.statement(
              `SELECT count(*) FROM (SELECT x.run_at FROM jobs x WHERE ${stateRange('pending')} ORDER BY x.id LIMIT :cap) s WHERE s.run_at <= :now`,
            )
              .pluck()
              .get({ ...params, cap }) as number;
            return (pending.n * sample) / cap;
          }),
          running: part(row.running, () => this.extrapolate('jobs', stateRange('running'), { queue }, cap)),
          lapsed: part(row.lapsed, () =>
            this.extrapolate('jobs', `${stateRange('running')} AND x.lease_until <= :now`, params, cap),
          ),
          done: part(row.done, () => this.extrapolate('jobs', stateRange('done'), { queue }, cap)),
          cancelled: part(row.cancelled, () => this.extrapolate('jobs', stateRange('cancelled'), { queue }, cap)),
          dead: part(row.dead, () => this.extrapolate('dead_jobs', 'x.queue = :queue', { queue }, cap)),
        });
      });
  }

  /**
   * An estimate of a range's rows past the count bound: the id span of the whole range scaled by
   * the density of its first `cap` entries (three index probes; exact when ids are contiguous).
   */
  private extrapolate(table: string, condition: string, params: Params, cap: number): number {
    const span = this.statement(
      `SELECT (SELECT min(x.id) FROM ${table} x WHERE ${condition}) AS lo, (SELECT max(x.id) FROM ${table} x WHERE ${condition}) AS hi`,
    ).get(params) as { lo: number | null; hi: number | null };
    const at = this.statement(`SELECT x.id FROM ${table} x WHERE ${condition} ORDER BY x.id LIMIT 1 OFFSET :offset`)
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
    for (const { table, condition, params } of this.matchRanges(bulk)) {
      const n = Number(
        this.statement(`SELECT count(*) FROM (SELECT 1 FROM ${table} x ${where(condition)} LIMIT :cap)`)
          .pluck()
          .get({ ...params, cap: exactUpTo + 1 }),
      );
      if (n > exactUpTo) {
        count += this.extrapolate(table, condition.length === 0 ? '1' : condition.join(' AND '), params, exactUpTo + 1);
        estimated = true;
      } else count += n;
    }
    return { count: Math.round(count), estimated };
  }

  private matchRanges(bulk: CheckedBulk): { table: string; condition: string[]; params: Params }[] {
    const ranges: { table: string; condition: string[]; params: Params }[] = [];
    if (bulk.liveStates.length > 0) {
      const params: Params = {};
      const condition = [stateCondition(params, bulk.liveStates, 'x'), ...filterConditions(params, bulk.filter, 'x')];
      ranges.push({ table: 'jobs', condition, params });
    }
    if (bulk.dead) {
      const params: Params = {};
      ranges.push({ table: 'dead_jobs', condition: filterConditions(params, bulk.filter, 'x'), params });
    }
    return ranges;
  }

  /**
   * The ids of one bulk batch: the next `limit` matches above `afterId`, in id order (run inside
   * the batch's write transaction, so nothing changes between this read and the action).
   */
  batchIds(bulk: CheckedBulk, afterId: number, limit: number): number[] {
    const range = this.matchRanges(bulk)[0];
    if (!range) return [];
    const sql = `SELECT x.id FROM ${range.table} x ${where([...range.condition, 'x.id > :after'])} ORDER BY x.id LIMIT :limit`;
    return this.statement(sql)
      .pluck()
      .all({ ...range.params, after: afterId, limit }) as number[];
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
