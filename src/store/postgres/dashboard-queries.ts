/**
 * The PostgreSQL store's dashboard SQL: filtered job lists (keyset-paged by id, never OFFSET),
 * bounded per-queue counts, the activity window, bulk-action counts and batches.
 *
 * Statements are assembled from the filter, but only ever from fixed SQL text: every value a
 * caller gave (queue, kind, ids, instants, the payload path and value) is a bind parameter, so
 * nothing a caller writes becomes SQL. Indexes: jobs_listed_state_queue_id_idx (state, queue, id),
 * partial on every state but running (migration 6, decision 0018), pages and counts a state;
 * running rows, a few per worker slot, are read through jobs_running_lease_idx; dead_jobs
 * (queue, id) pages the dead letters; the activity window reads jobs_finished_idx and
 * dead_jobs_parked_at_idx by range. A read of several states that include running is two reads,
 * one per index, merged by id.
 *
 * Counts are bounded: each reads at most `exactUpTo + 1` index entries; a count that reaches the
 * bound is replaced by the planner's estimate for the same predicate (EXPLAIN), flagged estimated.
 */
import type { Job, JobState } from '../../job/job.js';
import type { JobFilter } from '../../job/job-filter.js';
import {
  type ActivityRow,
  activityBuckets,
  type CheckedBulk,
  type CheckedListPage,
  checkActivityParams,
  checkBulkApplyParams,
  checkCountParams,
  checkExactUpTo,
  latenessBucketSql,
  type Part,
  queueCountsOf,
} from '../dashboard-params.js';
import { JOB_COLUMNS } from '../job-columns.js';
import type {
  ActivityBucket,
  BulkBatchResult,
  DueKindCount,
  JobActivityParams,
  JobBulkApplyParams,
  JobCountParams,
  MatchCount,
  QueueCounts,
} from '../store.js';
import { type JobRow, rowToJob } from './job-row.js';
import { quoteIdentifier } from './migrations.js';
import { type Queryable, wakeNotify } from './sql-fragments.js';

/** Collects bind parameters while a statement is assembled; `add` answers the placeholder. */
class Binds {
  readonly values: unknown[] = [];

  add(value: unknown, cast = ''): string {
    this.values.push(value);
    return `$${this.values.length}${cast}`;
  }
}

/** The filter's conditions on alias `a` (states excluded: each caller places them). */
function filterConditions(binds: Binds, filter: JobFilter, a: string): string[] {
  const conditions: string[] = [];
  if (filter.queue !== undefined) conditions.push(`${a}.queue = ${binds.add(filter.queue, '::text')}`);
  if (filter.kind !== undefined) conditions.push(`${a}.kind = ${binds.add(filter.kind, '::text')}`);
  if (filter.idFrom !== undefined) conditions.push(`${a}.id >= ${binds.add(filter.idFrom, '::bigint')}`);
  if (filter.idTo !== undefined) conditions.push(`${a}.id <= ${binds.add(filter.idTo, '::bigint')}`);
  if (filter.runAtFrom !== undefined) conditions.push(`${a}.run_at >= ${binds.add(filter.runAtFrom, '::timestamptz')}`);
  if (filter.runAtTo !== undefined) conditions.push(`${a}.run_at < ${binds.add(filter.runAtTo, '::timestamptz')}`);
  if (filter.payload !== undefined) {
    // `#>` with a text[] path and jsonb equality: numbers compare by value, types never coerce.
    const path = binds.add([...filter.payload.path], '::text[]');
    const value = binds.add(JSON.stringify(filter.payload.value), '::jsonb');
    conditions.push(`${a}.payload #> ${path} = ${value}`);
  }
  return conditions;
}

/**
 * `states` split by the index that holds them: the states that pile up (the list index), then
 * running (the lease index), each group read on its own and merged by id.
 */
function stateGroups(states: readonly JobState[]): JobState[][] {
  const listed = states.filter((state) => state !== 'running');
  const groups: JobState[][] = listed.length > 0 ? [listed] : [];
  if (listed.length < states.length) groups.push(['running']);
  return groups;
}

/** Whether a {@link stateGroups} group is the running rows' (null: the dead-letter table's read). */
function readsRunning(group: readonly JobState[] | null): boolean {
  return group?.[0] === 'running';
}

/**
 * The condition of one {@link stateGroups} group: running as the literal the lease index's
 * predicate names; the others by equality (for one state, so the list index's (state, queue, id)
 * leads) together with the list index's own predicate, so the planner may use it whatever the
 * bound states.
 */
function stateCondition(binds: Binds, group: readonly JobState[], a: string): string {
  if (readsRunning(group)) return `${a}.state = 'running'`;
  const equality =
    group.length === 1
      ? `${a}.state = ${binds.add(group[0], '::text')}`
      : `${a}.state = ANY(${binds.add([...group], '::text[]')})`;
  return `${equality} AND ${a}.state <> 'running'`;
}

/**
 * What a read of `group` orders by: the id, except for running rows, which are ordered by `id + 0`.
 * No index holds them in id order, and the primary key would: a plan that walked it for the few
 * running rows would pass every other row of the table on the way (the planner picks that walk on
 * a table it has no statistics for). With `+ 0` they are read through the lease index and sorted.
 */
function idOrder(a: string, group: readonly JobState[] | null): string {
  return readsRunning(group) ? `${a}.id + 0` : `${a}.id`;
}

function where(conditions: readonly string[]): string {
  return conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
}

/** The dashboard SQL for one schema, and the code that runs it on any {@link Queryable}. */
export class PostgresDashboardQueries {
  private readonly jobs: string;
  private readonly dead: string;
  private readonly queues: string;
  private readonly channelLiteral: string;

  constructor(schemaName: string, channel: string) {
    const s = quoteIdentifier(schemaName);
    this.jobs = `${s}.jobs`;
    this.dead = `${s}.dead_jobs`;
    this.queues = `${s}.queues`;
    this.channelLiteral = `'${channel.replace(/'/g, "''")}'`;
  }

  /**
   * A filtered page: up to `limit` rows of each table read (each an index-ordered range with a
   * LIMIT), merged by id in the page's order. Keyset: ids past `afterId` in that order.
   */
  async list(db: Queryable, page: CheckedListPage): Promise<Job[]> {
    const binds = new Binds();
    const desc = page.order === 'desc';
    const limit = binds.add(page.limit, '::int');
    const after = page.afterId === 0 ? null : binds.add(String(page.afterId), '::bigint');
    const direction = desc ? 'DESC' : 'ASC';
    const branch = (table: string, a: string, stateGroup: readonly JobState[] | null) => {
      const conditions = filterConditions(binds, page.filter, a);
      if (stateGroup !== null) conditions.unshift(stateCondition(binds, stateGroup, a));
      if (after !== null) conditions.push(`${a}.id ${desc ? '<' : '>'} ${after}`);
      return `(SELECT ${JOB_COLUMNS.map((c) => `${a}.${c}`).join(', ')} FROM ${table} ${a} ${where(conditions)}
        ORDER BY ${idOrder(a, stateGroup)} ${direction} LIMIT ${limit})`;
    };
    const branches: string[] = [];
    for (const group of stateGroups(page.liveStates)) branches.push(branch(this.jobs, 'j', group));
    if (page.dead) branches.push(branch(this.dead, 'd', null));
    if (branches.length === 0) return [];
    const sql = `SELECT * FROM (${branches.join(' UNION ALL ')}) page ORDER BY id ${direction} LIMIT ${limit}`;
    const result = await db.query<JobRow>(sql, binds.values);
    return result.rows.map(rowToJob);
  }

  /**
   * Per-queue counts, bounded. One statement finds every queue by loose index scans (distinct
   * (state, queue) of the list index, distinct queue of dead_jobs, paused queues) and the running
   * rows' queues (the lease index: a few rows), and counts each part of
   * each queue with a LIMITed range; the due part sums the claim index's (queue, kind, priority)
   * ranges `run_at <= now`. Parts that reached the bound are then estimated by the planner.
   */
  async queueCounts(db: Queryable, now: Date | undefined, exactUpToGiven: number | undefined): Promise<QueueCounts[]> {
    const exactUpTo = checkExactUpTo(exactUpToGiven);
    const cap = exactUpTo + 1;
    const NOW = 'coalesce($1::timestamptz, now())';
    const capped = (table: string, condition: string) =>
      `(SELECT count(*) FROM (SELECT 1 FROM ${table} x WHERE ${condition} LIMIT $2) c)`;
    const sql = `
      WITH RECURSIVE pairs(state, queue) AS (
        (SELECT state, queue FROM ${this.jobs} WHERE state <> 'running' ORDER BY state, queue LIMIT 1)
        UNION ALL
        SELECT n.state, n.queue FROM pairs p CROSS JOIN LATERAL (
          SELECT j.state, j.queue FROM ${this.jobs} j
          WHERE j.state <> 'running' AND (j.state, j.queue) > (p.state, p.queue)
          ORDER BY j.state, j.queue LIMIT 1) n
      ),
      dead_queues(queue) AS (
        (SELECT queue FROM ${this.dead} ORDER BY queue LIMIT 1)
        UNION ALL
        SELECT n.queue FROM dead_queues p CROSS JOIN LATERAL (
          SELECT d.queue FROM ${this.dead} d WHERE d.queue > p.queue ORDER BY d.queue LIMIT 1) n
      ),
      triples(queue, kind, priority) AS (
        (SELECT j.queue, j.kind, j.priority FROM ${this.jobs} j WHERE j.state = 'pending'
          ORDER BY j.queue, j.kind, j.priority LIMIT 1)
        UNION ALL
        SELECT n.queue, n.kind, n.priority FROM triples p CROSS JOIN LATERAL (
          SELECT j.queue, j.kind, j.priority FROM ${this.jobs} j
          WHERE j.state = 'pending' AND (j.queue, j.kind, j.priority) > (p.queue, p.kind, p.priority)
          ORDER BY j.queue, j.kind, j.priority LIMIT 1) n
      ),
      names AS (
        SELECT queue FROM pairs UNION SELECT queue FROM dead_queues
        UNION SELECT queue FROM ${this.jobs} WHERE state = 'running'
        UNION SELECT name FROM ${this.queues} WHERE paused
      )
      SELECT q.queue, coalesce((SELECT paused FROM ${this.queues} WHERE name = q.queue), false) AS paused,
        ${capped(this.jobs, "x.state = 'pending' AND x.queue = q.queue")} AS pending,
        -- One LIMIT over the queue's triples together: the walk stops after $2 due rows in all.
        (SELECT count(*) FROM (SELECT 1 FROM triples tr CROSS JOIN LATERAL (
            SELECT 1 FROM ${this.jobs} x
            WHERE x.state = 'pending' AND x.queue = tr.queue AND x.kind = tr.kind
              AND x.priority = tr.priority AND x.run_at <= ${NOW}) d
          WHERE tr.queue = q.queue LIMIT $2) c) AS due,
        ${capped(this.jobs, "x.state = 'running' AND x.queue = q.queue")} AS running,
        ${capped(this.jobs, `x.state = 'running' AND x.queue = q.queue AND x.lease_until <= ${NOW}`)} AS lapsed,
        ${capped(this.jobs, "x.state = 'done' AND x.queue = q.queue")} AS done,
        ${capped(this.jobs, "x.state = 'cancelled' AND x.queue = q.queue")} AS cancelled,
        ${capped(this.dead, 'x.queue = q.queue')} AS dead
      FROM names q ORDER BY q.queue`;
    const result = await db.query<Record<string, string | boolean> & { queue: string; paused: boolean }>(sql, [
      now ?? null,
      cap,
    ]);
    const counts: QueueCounts[] = [];
    for (const row of result.rows) {
      // Estimates bind only what their predicate names: the queue ($1) and, for the time-judged parts, now ($2).
      const part = async (name: string, table: string, condition: string): Promise<Part> => {
        const n = Number(row[name]);
        if (n < cap) return { n, estimated: false };
        const values = condition.includes('$2') ? [row.queue, now ?? null] : [row.queue];
        // The bound was reached, so the count is at least `cap` whatever the statistics say.
        const guess = await this.estimate(db, `SELECT 1 FROM ${table} x WHERE ${condition}`, values);
        return { n: Math.max(cap, guess), estimated: true };
      };
      const nowParam = 'coalesce($2::timestamptz, now())';
      counts.push(
        queueCountsOf({
          queue: row.queue,
          paused: row.paused,
          pending: await part('pending', this.jobs, "x.state = 'pending' AND x.queue = $1"),
          due: await part('due', this.jobs, `x.state = 'pending' AND x.queue = $1 AND x.run_at <= ${nowParam}`),
          running: await part('running', this.jobs, "x.state = 'running' AND x.queue = $1"),
          lapsed: await part(
            'lapsed',
            this.jobs,
            `x.state = 'running' AND x.queue = $1 AND x.lease_until <= ${nowParam}`,
          ),
          done: await part('done', this.jobs, "x.state = 'done' AND x.queue = $1"),
          cancelled: await part('cancelled', this.jobs, "x.state = 'cancelled' AND x.queue = $1"),
          dead: await part('dead', this.dead, 'x.queue = $1'),
        }),
      );
    }
    return counts;
  }

  /**
   * Due jobs by queue and kind, bounded: per (queue, kind, priority) triple of the claim index, a
   * LIMITed range `run_at <= now` (at most `cap` rows each), plus lapsed leases (the small running
   * index); paused queues left out, as dueCountsByKind. Ordered by queue, kind (bytewise).
   */
  async boundedDueCounts(db: Queryable, now: Date | undefined, cap: number): Promise<DueKindCount[]> {
    const NOW = 'coalesce($1::timestamptz, now())';
    const sql = `
      WITH RECURSIVE triples(queue, kind, priority) AS (
        (SELECT j.queue, j.kind, j.priority FROM ${this.jobs} j WHERE j.state = 'pending'
          ORDER BY j.queue, j.kind, j.priority LIMIT 1)
        UNION ALL
        SELECT n.queue, n.kind, n.priority FROM triples p CROSS JOIN LATERAL (
          SELECT j.queue, j.kind, j.priority FROM ${this.jobs} j
          WHERE j.state = 'pending' AND (j.queue, j.kind, j.priority) > (p.queue, p.kind, p.priority)
          ORDER BY j.queue, j.kind, j.priority LIMIT 1) n
      ),
      counts AS (
        SELECT t.queue, t.kind, (SELECT count(*) FROM (SELECT 1 FROM ${this.jobs} x
            WHERE x.state = 'pending' AND x.queue = t.queue AND x.kind = t.kind AND x.priority = t.priority
              AND x.run_at <= ${NOW} LIMIT $2) c) AS n
        FROM triples t
        UNION ALL
        SELECT j.queue, j.kind, count(*) FROM ${this.jobs} j
        WHERE j.state = 'running' AND j.lease_until <= ${NOW} GROUP BY j.queue, j.kind
      )
      SELECT c.queue, c.kind, sum(c.n) AS count FROM counts c
      WHERE NOT EXISTS (SELECT 1 FROM ${this.queues} pq WHERE pq.name = c.queue AND pq.paused)
      GROUP BY c.queue, c.kind HAVING sum(c.n) > 0
      ORDER BY c.queue COLLATE "C", c.kind COLLATE "C"`;
    const result = await db.query<{ queue: string; kind: string; count: string }>(sql, [now ?? null, cap]);
    return result.rows.map((row) => ({ queue: row.queue, kind: row.kind, count: Number(row.count) }));
  }

  /** The planner's row estimate for `sql` (EXPLAIN, nothing runs). */
  private async estimate(db: Queryable, sql: string, values: unknown[]): Promise<number> {
    const result = await db.query<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }>(
      `EXPLAIN (FORMAT JSON) ${sql}`,
      values,
    );
    return Math.round(result.rows[0]?.['QUERY PLAN'][0].Plan['Plan Rows'] ?? 0);
  }

  /**
   * The activity window: completions by finished_at (jobs_finished_idx range) with their start
   * lateness bucket, and parkings by parked_at (dead_jobs_parked_at_idx range), aggregated per
   * bucket in SQL, so only (bucket, histogram bucket, count) rows come back.
   */
  async activity(db: Queryable, params: JobActivityParams): Promise<ActivityBucket[]> {
    const window = checkActivityParams(params);
    const bucketOf = (column: string) =>
      `floor((extract(epoch FROM ${column}) * 1000 - $1::double precision) / $3::double precision)::int`;
    const lateness = `(extract(epoch FROM (j.started_at - j.run_at)) * 1000)`;
    const sql = `
      SELECT ${bucketOf('j.finished_at')} AS bucket,
             CASE WHEN j.state = 'done' THEN 'completed' ELSE 'cancelled' END AS what,
             CASE WHEN j.state = 'done' AND j.started_at IS NOT NULL THEN ${latenessBucketSql(lateness)} END AS lateness_bucket,
             count(*) AS n
      FROM ${this.jobs} j
      -- Exactly jobs_finished_idx's predicate and range, no state equality: with one, the planner
      -- may walk the (state, queue, id) index over every done row instead of the window's range.
      WHERE j.state IN ('done', 'cancelled')
        AND j.finished_at >= to_timestamp($1::double precision / 1000) AND j.finished_at < to_timestamp($2::double precision / 1000)
      GROUP BY 1, 2, 3
      UNION ALL
      SELECT ${bucketOf('d.parked_at')}, 'failed', NULL, count(*)
      FROM ${this.dead} d
      WHERE d.parked_at >= to_timestamp($1::double precision / 1000) AND d.parked_at < to_timestamp($2::double precision / 1000)
      GROUP BY 1`;
    const result = await db.query<ActivityRow>(sql, [window.fromMs, window.toMs, window.bucketMs]);
    return activityBuckets(window, result.rows);
  }

  /** How many jobs a bulk action would touch: a LIMITed count per table, estimated past the bound. */
  async countMatching(db: Queryable, params: JobCountParams): Promise<MatchCount> {
    const checked = checkCountParams(params);
    let count = 0;
    let estimated = false;
    for (const part of this.matchSelects(checked)) {
      const result = await db.query<{ n: string }>(
        `SELECT count(*) AS n FROM (${part.sql} LIMIT ${checked.exactUpTo + 1}) c`,
        part.values,
      );
      const n = Number(result.rows[0]?.n ?? 0);
      if (n > checked.exactUpTo) {
        count += Math.max(checked.exactUpTo + 1, await this.estimate(db, part.sql, part.values));
        estimated = true;
      } else count += n;
    }
    return { count, estimated };
  }

  /** `SELECT 1 …` of each table a bulk action reads, with its binds. */
  private matchSelects(bulk: CheckedBulk): { sql: string; values: unknown[] }[] {
    const selects: { sql: string; values: unknown[] }[] = [];
    for (const group of stateGroups(bulk.liveStates)) {
      const binds = new Binds();
      const conditions = [stateCondition(binds, group, 'j'), ...filterConditions(binds, bulk.filter, 'j')];
      selects.push({ sql: `SELECT 1 FROM ${this.jobs} j ${where(conditions)}`, values: binds.values });
    }
    if (bulk.dead) {
      const binds = new Binds();
      selects.push({
        sql: `SELECT 1 FROM ${this.dead} d ${where(filterConditions(binds, bulk.filter, 'd'))}`,
        values: binds.values,
      });
    }
    return selects;
  }

  /**
   * One batch of a bulk action, one statement (so one short transaction): pick the next `limit`
   * matching ids above `afterId` in id order, FOR UPDATE SKIP LOCKED (rows a worker or another
   * batch holds are skipped, never waited for), apply the action to them, and answer how many
   * were read and changed and the last id read. Retry and reschedule wake listeners.
   */
  async bulkApply(db: Queryable, params: JobBulkApplyParams): Promise<BulkBatchResult & { woke: boolean }> {
    const checked = checkBulkApplyParams(params);
    const binds = new Binds();
    // Bound only by the actions that read the clock: an unused parameter has no type PostgreSQL can infer.
    const nowSql = () => `coalesce(${binds.add(params.now ?? null, '::timestamptz')}, now())`;
    const limit = binds.add(checked.limit, '::int');
    const after = binds.add(String(checked.afterId), '::bigint');
    const table = checked.dead ? this.dead : this.jobs;
    const a = checked.dead ? 'd' : 'j';
    const pick = (stateGroup: readonly JobState[] | null) => {
      const conditions = filterConditions(binds, checked.filter, a);
      if (stateGroup) conditions.unshift(stateCondition(binds, stateGroup, a));
      conditions.push(`${a}.id > ${after}`);
      return `SELECT ${a}.id FROM ${table} ${a} ${where(conditions)}
        ORDER BY ${idOrder(a, stateGroup)} LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
    };
    const groups = checked.dead ? [null] : stateGroups(checked.liveStates);
    // States held by both indexes: each read picks its first `limit` rows, the batch the first
    // `limit` of them all. The rows a read locked beyond those have greater ids than the batch's
    // last, so the next batch reads them again; their locks end with this statement.
    const picked =
      groups.length === 0
        ? 'picked AS (SELECT NULL::bigint AS id WHERE false)'
        : groups.length === 1
          ? `picked AS (${pick(groups[0]!)})`
          : `${groups.map((group, i) => `picked_${i} AS (${pick(group)})`).join(',\n      ')},
      picked AS (
        ${groups.map((_, i) => `SELECT id FROM picked_${i}`).join(' UNION ALL ')} ORDER BY id LIMIT ${limit}
      )`;
    const wake = (source: string) => `wake AS (
        ${wakeNotify(this.channelLiteral, source)}
      )`;
    let sql: string;
    switch (checked.action) {
      case 'purge':
        sql = `WITH ${picked},
          changed AS (DELETE FROM ${this.dead} d USING picked p WHERE d.id = p.id RETURNING d.id),
          wake AS (SELECT 1 WHERE false)`;
        break;
      case 'cancel':
        sql = `WITH ${picked},
          changed AS (
            UPDATE ${this.jobs} j SET state = 'cancelled', finished_at = ${nowSql()}, lease_until = NULL
            FROM picked p WHERE j.id = p.id AND j.state IN ('pending', 'running') RETURNING j.id),
          wake AS (SELECT 1 WHERE false)`;
        break;
      case 'reschedule': {
        const runAt = binds.add(checked.runAt, '::timestamptz');
        sql = `WITH ${picked},
          changed AS (
            UPDATE ${this.jobs} j SET run_at = ${runAt}
            FROM picked p WHERE j.id = p.id AND j.state = 'pending' RETURNING j.id, j.run_at, j.queue, j.kind),
          ${wake('changed')}`;
        break;
      }
      case 'retry': {
        const NOW = nowSql();
        sql = `WITH ${picked},
          moved AS (DELETE FROM ${this.dead} d USING picked p WHERE d.id = p.id RETURNING d.*),
          ranked AS (
            -- Within one batch two dead letters may share an idempotency key or a (schedule, slot):
            -- only the first keeps it, as deadLetterRetry would keep it for whichever came first.
            SELECT m.*,
              row_number() OVER (PARTITION BY m.queue, m.kind, m.idempotency_key ORDER BY m.id) AS key_rank,
              row_number() OVER (PARTITION BY m.schedule_id, m.schedule_slot ORDER BY m.id) AS slot_rank
            FROM moved m
          ),
          changed AS (
            INSERT INTO ${this.jobs} (${JOB_COLUMNS.join(', ')})
            SELECT m.id, m.kind, m.queue, m.payload, m.priority, 'pending', ${NOW}, NULL, m.lease_owner, m.token,
                   0, m.max_attempts, m.retry_policy, m.errors,
                   CASE WHEN m.idempotency_key IS NULL OR m.key_rank > 1 OR EXISTS (
                          SELECT 1 FROM ${this.jobs} o WHERE o.queue = m.queue AND o.kind = m.kind
                            AND o.idempotency_key = m.idempotency_key AND o.state IN ('pending', 'running'))
                        THEN NULL ELSE m.idempotency_key END,
                   m.timeout_ms, m.schedule_id,
                   CASE WHEN m.schedule_id IS NULL OR m.slot_rank > 1 OR EXISTS (
                          SELECT 1 FROM ${this.jobs} o WHERE o.schedule_id = m.schedule_id AND o.schedule_slot = m.schedule_slot)
                        THEN NULL ELSE m.schedule_slot END,
                   m.created_at, NULL, m.started_at
            FROM ranked m
            RETURNING id, run_at, queue, kind
          ),
          ${wake('changed')}`;
        break;
      }
    }
    sql += `
      SELECT (SELECT count(*) FROM picked) AS scanned, (SELECT count(*) FROM changed) AS affected,
             (SELECT max(id) FROM picked)::text AS last_id, (SELECT count(*) FROM wake) AS woke`;
    const result = await db.query<{ scanned: string; affected: string; last_id: string | null; woke: string }>(
      sql,
      binds.values,
    );
    const row = result.rows[0]!;
    return {
      scanned: Number(row.scanned),
      affected: Number(row.affected),
      lastId: row.last_id,
      woke: Number(row.woke) > 0,
    };
  }
}
