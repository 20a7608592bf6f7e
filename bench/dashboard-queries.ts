/**
 * Dashboard-query timings: every API call the dashboard's pages make, against a store holding
 * `pending` pending and `finished` finished jobs (1,000,000 + 1,000,000 in the full run), over
 * real HTTP on loopback (a `docket serve` app, no workers), median of 5 after one warm-up call.
 * The target is < 150 ms for each call.
 *
 *   npx tsx bench/dashboard-queries.ts                        1M + 1M rows, PostgreSQL and SQLite
 *   npx tsx bench/dashboard-queries.ts --rows 1000 --stores sqlite   a quick look
 *   npm run bench -- --only dashboard [--smoke]               as a workload of the suite
 *
 * Seeding never goes through the API: one INSERT … SELECT generate_series (PostgreSQL) or a
 * recursive CTE (SQLite) per table, then VACUUM ANALYZE / ANALYZE, so 2M rows take seconds, not
 * hours. Rows: 4 queues, 5 kinds, payload {customerId: i % 100}; pending run_at spread over the
 * hour around now; finished rows spread over 7 days (so the activity window holds a realistic
 * hour of them) with a start 0–2 s after run_at; 10,000 dead letters; 20 schedules.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { loadServerConfig, startServer } from '../src/http/server.js';
import { createServerLogger } from '../src/http/server-logger.js';
import { openStore } from '../src/store/open-store.js';
import { median } from './stats.js';

/** One timed call. */
export interface DashboardTiming {
  store: 'postgres' | 'sqlite';
  page: string;
  call: string;
  medianMs: number;
  samplesMs: number[];
  status: number;
}

const PG_URL = process.env.DOCKET_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const RETRY = '{"baseDelayMs":1000,"factor":2,"maxDelayMs":3600000,"jitterRatio":0.2}';
const DEAD_ROWS = 10_000;
const SAMPLES = 5;
/** The target the issue sets for each call. */
export const TARGET_MS = 150;

/** Seeds and times one store; returns its timings. */
async function timeStore(
  kind: 'postgres' | 'sqlite',
  pending: number,
  finished: number,
  log: (line: string) => void,
): Promise<DashboardTiming[]> {
  const schema = `dash_bench_${process.pid}`;
  const dir = mkdtempSync(join(tmpdir(), 'docket-dash-bench-'));
  const url = kind === 'sqlite' ? `sqlite:${join(dir, 'dash.db')}` : PG_URL;
  try {
    // Opening migrates; the seed then writes the rows straight into the tables.
    const store = await openStore(url, kind === 'postgres' ? { schema } : {});
    await store.close();
    const started = performance.now();
    if (kind === 'postgres') await seedPostgres(schema, pending, finished);
    else seedSqlite(join(dir, 'dash.db'), pending, finished);
    log(
      `dashboard ${kind}: seeded ${pending.toLocaleString('en')} pending + ${finished.toLocaleString('en')} finished rows in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );

    const config = loadServerConfig({
      flags: { db: url, port: '0', concurrency: '0' },
      env: kind === 'postgres' ? { DOCKET_SCHEMA: schema } : {},
    });
    const server = await startServer({ config, logger: createServerLogger('silent') });
    try {
      const get = async (path: string, body?: unknown) => {
        const response = await fetch(`${server.url}${path}`, {
          method: body === undefined ? 'GET' : 'POST',
          ...(body === undefined
            ? {}
            : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
        });
        const text = await response.text();
        return { status: response.status, text };
      };
      const middle = String(Math.floor(pending / 2));
      const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
      const inAnHour = new Date(Date.now() + 3_600_000).toISOString();
      const calls: { page: string; call: string; path: string; body?: unknown }[] = [
        { page: 'overview', call: 'GET /v1/overview', path: '/v1/overview' },
        { page: 'overview', call: 'GET /v1/activity?minutes=60', path: '/v1/activity?minutes=60' },
        { page: 'jobs', call: 'GET /v1/jobs (first page, all states)', path: '/v1/jobs?limit=50' },
        { page: 'jobs', call: 'GET /v1/jobs?state=pending&queue=q1', path: '/v1/jobs?state=pending&queue=q1&limit=50' },
        { page: 'jobs', call: 'GET /v1/jobs?state=done&order=desc', path: '/v1/jobs?state=done&order=desc&limit=50' },
        {
          page: 'jobs',
          call: 'GET /v1/jobs?state=pending&after=<middle> (deep page)',
          path: `/v1/jobs?state=pending&limit=50&after=${middle}`,
        },
        {
          page: 'jobs',
          call: 'GET /v1/jobs?state=pending&queue=q2&kind=k2&payload=payload.customerId = 42 (1 in 100 match)',
          path: `/v1/jobs?state=pending&queue=q2&kind=k2&limit=50&payload=${encodeURIComponent('payload.customerId = 42')}`,
        },
        {
          // The worst case the docs name: a value no row holds, so every row the other filters leave is read.
          page: 'jobs',
          call: 'GET /v1/jobs?state=pending&queue=q2&kind=k3&payload=… (no match: a bounded search)',
          path: `/v1/jobs?state=pending&queue=q2&kind=k3&limit=50&payload=${encodeURIComponent('payload.customerId = 42')}`,
        },
        {
          page: 'jobs',
          call: 'GET /v1/jobs?state=pending&runAtFrom&runAtTo',
          path: `/v1/jobs?state=pending&limit=50&runAtFrom=${hourAgo}&runAtTo=${inAnHour}`,
        },
        { page: 'job', call: 'GET /v1/jobs/{id}/detail', path: `/v1/jobs/${middle}/detail` },
        { page: 'dead letters', call: 'GET /v1/dead-letters?queue=q1', path: '/v1/dead-letters?queue=q1&limit=50' },
        {
          page: 'dead letters',
          call: 'POST /v1/bulk/preview retry queue=q1',
          path: '/v1/bulk/preview',
          body: { action: 'retry', filter: { queue: 'q1' } },
        },
        {
          page: 'jobs',
          call: 'POST /v1/bulk/preview cancel state=pending queue=q1',
          path: '/v1/bulk/preview',
          body: { action: 'cancel', filter: { state: 'pending', queue: 'q1' } },
        },
        { page: 'schedules', call: 'GET /v1/schedules', path: '/v1/schedules' },
        { page: 'queues', call: 'GET /v1/queues', path: '/v1/queues' },
        { page: 'workers', call: 'GET /v1/workers', path: '/v1/workers' },
      ];
      const timings: DashboardTiming[] = [];
      for (const call of calls) {
        await get(call.path, call.body);
        const samplesMs: number[] = [];
        let status = 0;
        for (let i = 0; i < SAMPLES; i++) {
          const t0 = performance.now();
          status = (await get(call.path, call.body)).status;
          samplesMs.push(Math.round((performance.now() - t0) * 10) / 10);
        }
        timings.push({ store: kind, page: call.page, call: call.call, medianMs: median(samplesMs), samplesMs, status });
      }
      return timings;
    } finally {
      await server.close();
    }
  } finally {
    if (kind === 'postgres') {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).finally(() => client.end());
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function seedPostgres(schema: string, pending: number, finished: number): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    const s = schema;
    const columns = `id, kind, queue, payload, priority, state, run_at, lease_until, lease_owner, token, attempts,
      max_attempts, retry_policy, errors, created_at, finished_at, started_at`;
    await client.query(
      `INSERT INTO ${s}.jobs (${columns})
       SELECT i, 'k' || (i % 5), 'q' || (i % 4), jsonb_build_object('customerId', i % 100), 0, 'pending',
              now() - interval '30 minutes' + (i % 3600) * interval '1 second', NULL, NULL, 0, 0, 5, $1::jsonb, '[]',
              now() - interval '1 hour', NULL, NULL
       FROM generate_series(1, $2::bigint) i`,
      [RETRY, pending],
    );
    await client.query(
      `INSERT INTO ${s}.jobs (${columns})
       SELECT i, 'k' || (i % 5), 'q' || (i % 4), jsonb_build_object('customerId', i % 100), 0, 'done',
              t.run_at, NULL, 'bench-w', 1, 1, 5, $1::jsonb, '[]', t.run_at - interval '1 second',
              t.run_at + interval '3 seconds', t.run_at + (i % 2000) * interval '1 millisecond'
       FROM generate_series($2::bigint + 1, $2::bigint + $3::bigint) i
       CROSS JOIN LATERAL (SELECT now() - ((i * 7919) % 604800) * interval '1 second' AS run_at) t`,
      [RETRY, pending, finished],
    );
    await client.query(
      `INSERT INTO ${s}.dead_jobs (${columns}, parked_at)
       SELECT i, 'k' || (i % 5), 'q' || (i % 4), jsonb_build_object('customerId', i % 100), 0, 'dead',
              now() - interval '2 hours', NULL, 'bench-w', 5, 5, 5, $1::jsonb,
              jsonb_build_array(jsonb_build_object('attempt', 5, 'at', now(), 'message', 'boom', 'kind', 'thrown')),
              now() - interval '3 hours', now() - (i % 7200) * interval '1 second', now() - interval '2 hours',
              now() - (i % 7200) * interval '1 second'
       FROM generate_series($2::bigint + $3::bigint + 1, $2::bigint + $3::bigint + $4::bigint) i`,
      [RETRY, pending, finished, DEAD_ROWS],
    );
    await client.query(`SELECT setval('${s}.jobs_id_seq', $1::bigint)`, [pending + finished + DEAD_ROWS]);
    await client.query(`VACUUM ANALYZE ${s}.jobs`);
    await client.query(`VACUUM ANALYZE ${s}.dead_jobs`);
  } finally {
    await client.end();
  }
}

export function seedSqlite(file: string, pending: number, finished: number): void {
  const db = new Database(file);
  try {
    const now = Date.now();
    const columns = `id, kind, queue, payload, priority, state, run_at, lease_until, lease_owner, token, attempts,
      max_attempts, retry_policy, errors, created_at, finished_at, started_at`;
    db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count)
       INSERT INTO jobs (${columns})
       SELECT i, 'k' || (i % 5), 'q' || (i % 4), json_object('customerId', i % 100), 0, 'pending',
              :now - 1800000 + (i % 3600) * 1000, NULL, NULL, 0, 0, 5, :retry, '[]', :now - 3600000, NULL, NULL FROM n`,
    ).run({ count: pending, now, retry: RETRY });
    db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT :first UNION ALL SELECT i + 1 FROM n WHERE i < :last)
       INSERT INTO jobs (${columns})
       SELECT i, 'k' || (i % 5), 'q' || (i % 4), json_object('customerId', i % 100), 0, 'done',
              r, NULL, 'bench-w', 1, 1, 5, :retry, '[]', r - 1000, r + 3000, r + (i % 2000)
       FROM (SELECT i, :now - ((i * 7919) % 604800) * 1000 AS r FROM n)`,
    ).run({ first: pending + 1, last: pending + finished, now, retry: RETRY });
    db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT :first UNION ALL SELECT i + 1 FROM n WHERE i < :last)
       INSERT INTO dead_jobs (${columns}, parked_at)
       SELECT i, 'k' || (i % 5), 'q' || (i % 4), json_object('customerId', i % 100), 0, 'dead',
              :now - 7200000, NULL, 'bench-w', 5, 5, 5, :retry,
              json_array(json_object('attempt', 5, 'at', :now, 'message', 'boom', 'kind', 'thrown')),
              :now - 10800000, :now - (i % 7200) * 1000, :now - 7200000, :now - (i % 7200) * 1000 FROM n`,
    ).run({ first: pending + finished + 1, last: pending + finished + DEAD_ROWS, now, retry: RETRY });
    db.exec('ANALYZE');
  } finally {
    db.close();
  }
}

/** Runs every store asked for; prints the table; returns the timings. */
export async function runDashboardBench(options: {
  pending: number;
  finished: number;
  stores: readonly ('postgres' | 'sqlite')[];
  log?: (line: string) => void;
}): Promise<DashboardTiming[]> {
  const log = options.log ?? ((line: string) => console.log(line));
  const timings: DashboardTiming[] = [];
  for (const store of options.stores) {
    timings.push(...(await timeStore(store, options.pending, options.finished, log)));
  }
  log(dashboardTable(timings, options.pending, options.finished));
  return timings;
}

/** The timings as a Markdown table, one row per call, one column per store. */
export function dashboardTable(timings: readonly DashboardTiming[], pending: number, finished: number): string {
  const stores = [...new Set(timings.map((t) => t.store))];
  const calls = [...new Set(timings.map((t) => t.call))];
  const cell = (store: string, call: string) => {
    const timing = timings.find((t) => t.store === store && t.call === call);
    if (!timing) return '–';
    const mark = timing.status >= 400 ? ` (HTTP ${timing.status})` : timing.medianMs > TARGET_MS ? ' ⚠' : '';
    return `${timing.medianMs.toFixed(1)}${mark}`;
  };
  const lines = [
    `Dashboard API calls, median of ${SAMPLES} (ms), ${pending.toLocaleString('en')} pending + ${finished.toLocaleString('en')} finished rows + ${DEAD_ROWS.toLocaleString('en')} dead; ⚠ = over the ${TARGET_MS} ms target`,
    '',
    `| page | call | ${stores.join(' | ')} |`,
    `|---|---|${stores.map(() => '---:').join('|')}|`,
    ...calls.map((call) => {
      const page = timings.find((t) => t.call === call)?.page ?? '';
      return `| ${page} | \`${call}\` | ${stores.map((store) => cell(store, call)).join(' | ')} |`;
    }),
  ];
  return lines.join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      rows: { type: 'string', default: '1000000' },
      stores: { type: 'string', default: 'postgres,sqlite' },
    },
  });
  const rows = Number(values.rows);
  const stores = (values.stores ?? '').split(',') as ('postgres' | 'sqlite')[];
  await runDashboardBench({ pending: rows, finished: rows, stores });
}
