/**
 * SQL fragments shared by the PostgreSQL query files (job, claim, schedule): the pinned-or-database
 * clock, column lists, the errors entry, the loose index scan over pending (queue, kind,
 * priority) triples, the kind filter and the park INSERT. Each returns SQL text for an
 * already-quoted schema; none runs anything.
 */
import type pg from 'pg';
import { JOB_COLUMNS, type JobColumn } from '../job-columns.js';
import { MAX_NAMED_WAKE_UPS } from '../wake-up.js';
import { JOB_COLUMN_TYPES, JOB_TIMESTAMP_COLUMNS } from './job-row.js';

/** Anything that runs a parameterised query: a `pg.Pool`, a pooled client or a plain client. */
export interface Queryable {
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

/**
 * A {@link Queryable} that also reads rows as arrays (`rowMode: 'array'`), as pg's Pool, Client
 * and PoolClient do: the claim's path. A caller's transaction object need not offer it; no
 * caller transaction reaches a claim.
 */
export type ArrayQueryable = Queryable & {
  query(config: pg.QueryArrayConfig): Promise<pg.QueryArrayResult>;
};

/** The NOTIFY channel for a schema's wake-ups: one per schema so test schemas do not wake each other. */
export function wakeChannel(schemaName: string): string {
  return `docket.${schemaName}.wake`;
}

/** The database clock, unless the caller pinned an instant. Always parameter $1. */
export const NOW = 'coalesce($1::timestamptz, now())';

/** A pinned instant as the `$1` of {@link NOW}: null means the database clock. */
export function pinned(now: Date | undefined): Date | null {
  return now ?? null;
}

/** `j.<column>` for every job column, comma-separated. */
export function columnsOf(alias: string): string {
  return JOB_COLUMNS.map((column) => `${alias}.${column}`).join(', ');
}

/**
 * How a claim answers a job column, where that differs from the column itself. Timestamps come
 * as epoch milliseconds ({@link epochMsText}), because pg parses a timestamptz with a regular
 * expression per value. The rest spares the worker's hottest loop a string or a parse per row
 * (claimedValuesToJob, job-row.ts, puts back what is left out): `state` and `lease_owner` are
 * what the claim's UPDATE just set ('running', its owner parameter), so they are not sent; the
 * retry policy comes as JSON text, parsed once per run of equal texts (ClaimedRowValues);
 * an empty errors list (every first attempt) comes as NULL instead of a JSON array to parse.
 */
const CLAIMED_COLUMN_FORMS: { readonly [column in JobColumn]?: { sql: (value: string) => string; type: string } } = {
  state: { sql: () => 'NULL::text', type: 'text' },
  lease_owner: { sql: () => 'NULL::text', type: 'text' },
  retry_policy: { sql: (value) => `${value}::text`, type: 'text' },
  errors: { sql: (value) => `nullif(${value}, '[]'::jsonb)`, type: 'jsonb' },
  ...Object.fromEntries(
    JOB_TIMESTAMP_COLUMNS.map((column) => [column, { sql: (value: string) => epochMsText(value), type: 'text' }]),
  ),
};

/**
 * The columns a claim sends once per run of equal values: NULL in a row means "as the row before"
 * (in the claim's order), which the reader carries forward (ClaimedRowValues.carried). Every one
 * is non-null in a claimed row (NOT NULL in the table, or set by the claim: the lease end and the
 * start), so a NULL can mean nothing else. A claimed row was 21 fields, and pg builds a string for
 * each non-null one before its type parser runs: for a backlog of one kind and queue, submitted
 * in batches, nearly all of these repeat, and each sent once a run instead of once a row took
 * about 1.3 µs of the worker's CPU off every claimed job (docs/benchmarks.md, issue 17).
 * Not the id, which differs, nor the payload: a JSON `null` payload and a SQL NULL both reach
 * the reader as null, and rows must not share a mutable payload object.
 */
export const CLAIM_CARRIED_COLUMNS = [
  'kind',
  'queue',
  'priority',
  'run_at',
  'lease_until',
  'token',
  'attempts',
  'max_attempts',
  'retry_policy',
  'created_at',
  'started_at',
] as const satisfies readonly JobColumn[];

const CARRIED: ReadonlySet<JobColumn> = new Set(CLAIM_CARRIED_COLUMNS);

/** The window, over a claim's rows in the claim's order, that {@link claimedColumnsOf} compares rows in. */
const CLAIM_ORDER_WINDOW = 'claim_order';

/**
 * The end of a claim's final SELECT over `alias`: `WINDOW claim_order AS (ORDER BY …) ORDER BY …`,
 * both the claim's order (priority, run_at, id), written once here because the reader carries
 * values forward in the rows' order ({@link claimedColumnsOf}): a window in any other order would
 * hand one job another's values. The same order twice, so PostgreSQL sorts the rows once.
 */
export function claimOrderClauses(alias: string): string {
  const order = `${alias}.priority, ${alias}.run_at, ${alias}.id`;
  return `WINDOW ${CLAIM_ORDER_WINDOW} AS (ORDER BY ${order}) ORDER BY ${order}`;
}

/**
 * Every job column of a claimed row, in JOB_COLUMNS order, each under its own name and in the
 * form {@link CLAIMED_COLUMN_FORMS} gives it, for rows read back with claimedValuesToJob; the
 * {@link CLAIM_CARRIED_COLUMNS} as NULL where they equal the row before's in the claim's order
 * (the SELECT must end with {@link claimOrderClauses}). Sort by
 * the qualified columns (`alias.run_at`), not the output names, to keep the microseconds in the order.
 */
export function claimedColumnsOf(alias: string): string {
  return JOB_COLUMNS.map((column) => {
    const form = CLAIMED_COLUMN_FORMS[column];
    const qualified = `${alias}.${column}`;
    const value = form ? form.sql(qualified) : qualified;
    const sent = CARRIED.has(column)
      ? `CASE WHEN lag(${qualified}) OVER ${CLAIM_ORDER_WINDOW} = ${qualified} THEN NULL ELSE ${value} END`
      : value;
    return sent === qualified ? qualified : `${sent} AS ${column}`;
  }).join(', ');
}

/** The result columns of {@link claimedColumnsOf} with their types (`name type, …`), for a function's RETURNS TABLE. */
export function claimedColumnTypes(): string {
  return JOB_COLUMNS.map(
    (column) => `${column} ${CLAIMED_COLUMN_FORMS[column]?.type ?? JOB_COLUMN_TYPES[column]}`,
  ).join(', ');
}

/**
 * The errors entry an attempt leaves: `{attempt, at, message, kind, detail?, startedAt?, owner?}`
 * with `at` by the database clock. `row` is the alias of the job row the attempt ran as: its
 * started_at and lease_owner are the attempt's claim (null ones are dropped).
 */
export function errorEntry(attempt: string, message: string, kind: string, detail: string, row: string): string {
  return `jsonb_strip_nulls(jsonb_build_object('attempt', ${attempt}, 'at', ${NOW}, 'message', ${message}, 'kind', ${kind}, 'detail', ${detail}, 'startedAt', ${row}.started_at, 'owner', ${row}.lease_owner))`;
}

/** Epoch milliseconds of a timestamptz, as text: the tiny NOTIFY payload. */
export function epochMsText(expression: string): string {
  return `floor(extract(epoch FROM ${expression}) * 1000)::bigint::text`;
}

/**
 * A `wake` CTE's body: NOTIFYs for the rows of `source` (columns run_at, queue, kind) that pass
 * `due` (a condition on them), one per (queue, kind) with its earliest run time, payload
 * `[ms, "queue", "kind"]` (../wake-up.ts reads it), or one bare `ms` payload of the earliest when
 * they span more than {@link MAX_NAMED_WAKE_UPS} groups. All of a statement's NOTIFYs commit
 * together: the commit takes PostgreSQL's notify lock once however many it sends (decision 0005's
 * cost is per commit). Answers one row per NOTIFY, none when no row passed.
 */
export function wakeNotify(channelLiteral: string, source: string, due = 'true'): string {
  return `SELECT pg_notify(${channelLiteral},
                 CASE WHEN count(*) OVER () > ${MAX_NAMED_WAKE_UPS} THEN ${epochMsText('min(g.run_at) OVER ()')}
                      ELSE json_build_array(floor(extract(epoch FROM g.run_at) * 1000)::bigint, g.queue, g.kind)::text END)
        FROM (SELECT queue, kind, min(run_at) AS run_at FROM ${source} WHERE ${due} GROUP BY queue, kind) g`;
}

/**
 * Distinct (queue, kind, priority) triples among pending jobs, found by a loose index scan on
 * jobs_pending_kind_claim_idx: each step is one index probe for the next triple, so the cost is
 * the number of triples, not the number of rows (a million pending rows of one foreign kind cost
 * one probe). `queues` is the text[] parameter (NULL = all queues). Callers filter the triples
 * by kind and pause state before reading any of their rows.
 *
 * Each triple also carries its first pending job in index order, (first_run_at, first_id): the
 * lowest (run_at, id) of that triple visible to the statement's snapshot. A claim's range scan
 * starts there instead of at the head of the triple's index range, where the entries of every job
 * claimed since the last VACUUM lie dead: the probe that found the triple has already stepped over
 * them once, and at 250,000 pending behind 750,000 drained rows the second walk was half of a
 * claim's 11,000 buffers (docs/decisions/0010-claim-dead-head.md).
 */
export function pendingTriplesCte(jobs: string, queues: string): string {
  return `triples(queue, kind, priority, first_run_at, first_id) AS (
      (SELECT j.queue, j.kind, j.priority, j.run_at, j.id FROM ${jobs} j
        WHERE j.state = 'pending' AND (${queues}::text[] IS NULL OR j.queue = ANY(${queues}::text[]))
        ORDER BY j.queue, j.kind, j.priority, j.run_at, j.id LIMIT 1)
      UNION ALL
      SELECT n.queue, n.kind, n.priority, n.run_at, n.id FROM triples p CROSS JOIN LATERAL (
        SELECT j.queue, j.kind, j.priority, j.run_at, j.id FROM ${jobs} j
        WHERE j.state = 'pending' AND (j.queue, j.kind, j.priority) > (p.queue, p.kind, p.priority)
          AND (${queues}::text[] IS NULL OR j.queue = ANY(${queues}::text[]))
        ORDER BY j.queue, j.kind, j.priority, j.run_at, j.id LIMIT 1) n
    )`;
}

/**
 * True when `kind` (an SQL expression) passes a claim's kind filter: `kinds` is a text[]
 * parameter (NULL = every kind; an empty array matches nothing), `excludeKinds` a text[]
 * parameter that is never NULL (empty = exclude nothing).
 */
export function kindAllowed(kind: string, kinds: string, excludeKinds: string): string {
  return `(${kinds}::text[] IS NULL OR ${kind} = ANY(${kinds}::text[])) AND ${kind} <> ALL(${excludeKinds}::text[])`;
}

/** The INSERT that parks rows from `source` into dead_jobs with `errors` as their errors array. */
export function parkInsert(dead: string, source: string, errors: string): string {
  return `INSERT INTO ${dead} (${JOB_COLUMNS.join(', ')}, parked_at)
      SELECT m.id, m.kind, m.queue, m.payload, m.priority, 'dead', m.run_at, NULL, m.lease_owner, m.token,
             m.attempts, m.max_attempts, m.retry_policy, ${errors}, m.idempotency_key, m.timeout_ms,
             m.schedule_id, m.schedule_slot, m.created_at, ${NOW}, m.started_at, ${NOW}
      FROM ${source} m`;
}

/** `param` milliseconds as an interval (param is an SQL expression or placeholder). */
export function intervalMs(param: string): string {
  return `(${param}::double precision * interval '1 millisecond')`;
}

/**
 * One row's value of a submit batch's column, where the client sends a column every job shares
 * as an array of that one element (sharedOrEach in array-params.ts): the element when `param`
 * (an `arrayType` placeholder, unnested beside the others) holds one, else the row's own
 * `rowValue`. A batch of one job reads the same either way. Parsing one element instead of one
 * per row took a fifth off the database's time for a 1,000-job insert (decision 0020).
 */
export function batchColumn(param: string, arrayType: string, rowValue: string): string {
  return `CASE WHEN cardinality(${param}::${arrayType}) = 1 THEN (${param}::${arrayType})[1] ELSE ${rowValue} END`;
}

/** {@link batchColumn} for a column sent as one JSON array text (split by jsonb_array_elements). */
export function batchJsonColumn(param: string, rowValue: string): string {
  return `CASE WHEN jsonb_array_length(${param}::jsonb) = 1 THEN ${param}::jsonb -> 0 ELSE ${rowValue} END`;
}

/** True unless `queue` (an SQL expression) is paused: one probe of the tiny `queues` table. */
export function queueNotPaused(queuesTable: string, queue: string): string {
  return `NOT EXISTS (SELECT 1 FROM ${queuesTable} pq WHERE pq.name = ${queue} AND pq.paused)`;
}

/**
 * `j.id = ANY (ARRAY[<id>])`: the jobs row `j` of one batch element, written so that the only way
 * a plan can reach it is a primary-key probe per element. The plain `j.id = <id>` is a merge-join
 * clause, which makes a scan of the whole primary key in id order a candidate too, with the batch
 * rescanned inside it. A stored statement's plan is made once, at a connection's first call
 * (plan_cache_mode = force_generic_plan), and a worker that first completes on a nearly empty
 * table got exactly that plan: every later call scanned every row the table had grown to (2.4 ms
 * of database CPU per job at 30,000 rows; decision 0023). An array comparison is no merge-join
 * clause, so no ordered scan is useful and the probe is the only index path left.
 */
export function jobRowById(id: string): string {
  return `j.id = ANY (ARRAY[${id}])`;
}

/**
 * The owner half of the fence on the jobs row `j`: true when `owner` (an SQL text expression) is
 * NULL (a caller fencing by token alone) or names the claim that holds the row. With the token
 * check it makes a write unrepeatable: a promoted standby that lost the last commits can re-issue
 * a token number, never the random owner of a claim it did not see.
 */
export function ownerMatches(owner: string): string {
  return `(${owner} IS NULL OR j.lease_owner = ${owner})`;
}
