/**
 * The measurement behind docs/decisions/0006-kind-aware-claims.md: how long a kind-filtered claim
 * takes with a large backlog of another kind present vs absent, and whether the default (no kinds)
 * claim got slower than before kind-aware claims, on both stores.
 *
 *   npx tsx bench/claim-foreign-kinds.ts                      both stores, 1,000,000 foreign rows
 *   npx tsx bench/claim-foreign-kinds.ts --store postgres --foreign 200000 --claims 200
 *   npx tsx bench/claim-foreign-kinds.ts --baseline /tmp/docket-before   also the tree before, side by side
 *
 * Comparison 1 (filtered): two fresh databases, both with 50,000 due jobs of kind `mine`; one also
 * holds `--foreign` pending, already due jobs of kind `foreign` over 3 priorities (the worst case:
 * future-dated rows are skipped by the run_at range anyway). Claims with `kinds: ['mine']`.
 * Comparison 2 (default): 100,000 due jobs of one kind, claimed with no kind filter, by this tree
 * and, with `--baseline DIR` (an export of an older tree, e.g. `git archive HEAD`), by that tree's
 * store on its own schema (its own migrations and claim SQL).
 *
 * A claim leases 10 jobs. The figure is the round trip of `store.jobClaim`, median and p95 over
 * `--claims` claims after 20 warm-up claims, with the variants of a comparison claimed in turn
 * (A, B, A, B, …) so that load from other processes hits both alike. For PostgreSQL the claim
 * statement's own execution time is also given (median of 50 EXPLAIN ANALYZE runs, each rolled
 * back), since the round trip includes the commit's WAL flush; and one EXPLAIN (ANALYZE, BUFFERS)
 * plan per variant is printed. Each database (a PostgreSQL schema in DOCKET_BENCH_PG_URL, default
 * the test database; a SQLite temp file) is dropped afterwards.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { normalizeSubmit } from '../src/job/job-spec.js';
import type { JobClaimParams, Store } from '../src/store/store.js';

const PG_URL = process.env.DOCKET_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const OWN_JOBS = 50_000;
const DEFAULT_ROWS = 100_000;
const WARM_UP_CLAIMS = 20;
const CLAIM_LIMIT = 10;
const EXPLAIN_RUNS = 50;
/** Every job is due by then; the claim's pinned now, so a run's figures do not drift with the clock. */
const NOW = new Date('2030-01-01T00:00:00Z');

const { values: args } = parseArgs({
  options: {
    store: { type: 'string', default: 'both' },
    foreign: { type: 'string', default: '1000000' },
    claims: { type: 'string', default: '300' },
    only: { type: 'string', default: 'filtered,default' },
    baseline: { type: 'string' },
  },
});
const FOREIGN_ROWS = Number(args.foreign);
const CLAIMS = Number(args.claims);
const only = new Set(args.only.split(','));
const stores = args.store === 'both' ? ['postgres', 'sqlite'] : [args.store];

/** A source tree whose stores to load: this one, or the baseline export. */
type Tree = 'current' | 'baseline';

async function storeModules(tree: Tree) {
  const root = tree === 'current' ? resolve(import.meta.dirname, '..') : resolve(args.baseline!);
  const postgres = (await import(
    join(root, 'src/store/postgres/postgres-store.ts')
  )) as typeof import('../src/store/postgres/postgres-store.js');
  const sqlite = (await import(
    join(root, 'src/store/sqlite/sqlite-store.ts')
  )) as typeof import('../src/store/sqlite/sqlite-store.js');
  return { PostgresStore: postgres.PostgresStore, SqliteStore: sqlite.SqliteStore };
}

interface Bench {
  store: Store;
  /** Inserts `count` pending rows of `kind`, due before NOW, over 3 priorities, in bulk SQL. */
  bulkInsert(kind: string, count: number): Promise<void>;
  /** The claim's plan: EXPLAIN (ANALYZE, BUFFERS) on PostgreSQL, EXPLAIN QUERY PLAN per step on SQLite. */
  explain(params: JobClaimParams): Promise<string>;
  drop(): Promise<void>;
}

async function postgresBench(name: string, tree: Tree): Promise<Bench> {
  const { PostgresStore } = await storeModules(tree);
  const schema = `bench_kinds_${process.pid}_${name}`;
  const store = await PostgresStore.open(PG_URL, { schema, poolSize: 2 });
  const s = `"${schema}"`;
  return {
    store,
    async bulkInsert(kind, count) {
      await store.db.query(
        `INSERT INTO ${s}.jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at)
         SELECT $2, 'default', 'null'::jsonb, (g % 3)::smallint, 'pending', $1::timestamptz - (g || ' ms')::interval,
                5, '{}'::jsonb, $1::timestamptz
         FROM generate_series(1, $3::int) g`,
        [NOW, kind, count],
      );
      await store.db.query(`VACUUM ANALYZE ${s}.jobs`);
    },
    async explain(params) {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try {
        const sql = store.claimQueries.claimSql;
        // Older trees' claim has fewer parameters (no kind filter): pass as many as it uses.
        const used = Math.max(...[...sql.matchAll(/\$(\d+)/g)].map((match) => Number(match[1])));
        const values = [
          NOW,
          params.owner,
          params.limit,
          params.leaseMs,
          null,
          params.kinds ? [...params.kinds] : null,
          params.excludeKinds ? [...params.excludeKinds] : [],
          true,
        ].slice(0, used);
        const rolledBack = async <R extends pg.QueryResultRow>(text: string) => {
          await client.query('BEGIN');
          try {
            return await client.query<R>(text, values);
          } finally {
            await client.query('ROLLBACK');
          }
        };
        const executionMs: number[] = [];
        for (let i = 0; i < EXPLAIN_RUNS; i++) {
          const result = await rolledBack<{ 'QUERY PLAN': [{ 'Execution Time': number }] }>(
            `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`,
          );
          executionMs.push(result.rows[0]!['QUERY PLAN'][0]['Execution Time']);
        }
        executionMs.sort((a, b) => a - b);
        const plan = await rolledBack<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${sql}`);
        return (
          `statement execution (server side): median ${percentile(executionMs, 0.5).toFixed(3)} ms over ${EXPLAIN_RUNS} rolled-back runs\n` +
          plan.rows.map((row) => row['QUERY PLAN']).join('\n')
        );
      } finally {
        await client.end();
      }
    },
    async drop() {
      await store.close();
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
      await client.end();
    },
  };
}

async function sqliteBench(tree: Tree): Promise<Bench> {
  const { SqliteStore } = await storeModules(tree);
  const dir = mkdtempSync(join(tmpdir(), 'docket-bench-kinds-'));
  const path = join(dir, 'docket.db');
  const store = await SqliteStore.open(path);
  const raw = new Database(path);
  raw.pragma('busy_timeout = 5000');
  return {
    store,
    async bulkInsert(kind, count) {
      raw
        .prepare(
          `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < :count)
           INSERT INTO jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at)
           SELECT :kind, 'default', 'null', x % 3, 'pending', :now - x, 5, '{}', :now FROM n`,
        )
        .run({ count, kind, now: NOW.getTime() });
      // Into the main file, so the claims read the database as a long-running one would, not
      // through a WAL that holds the whole bulk insert.
      raw.pragma('wal_checkpoint(TRUNCATE)');
    },
    async explain() {
      // The statements below are this tree's; a baseline tree's SQL differs, so no plan for it.
      if (tree === 'baseline') return '(SQLite plans are shown for this tree only)';
      const steps: [string, string, Record<string, unknown>][] = [
        [
          'next queue',
          `SELECT queue FROM jobs WHERE state = 'pending' AND queue > :after ORDER BY queue LIMIT 1`,
          { after: '' },
        ],
        [
          'next priority of (queue, kind)',
          `SELECT priority FROM jobs WHERE state = 'pending' AND queue = :queue AND kind = :kind AND priority > :after
           ORDER BY priority LIMIT 1`,
          { queue: 'default', kind: 'mine', after: -40000 },
        ],
        [
          'due range of (queue, kind, priority)',
          `SELECT id, priority, run_at FROM jobs
           WHERE state = 'pending' AND queue = :queue AND kind = :kind AND priority = :priority AND run_at <= :now
           ORDER BY run_at, id LIMIT :limit`,
          { queue: 'default', kind: 'mine', priority: 0, now: NOW.getTime(), limit: CLAIM_LIMIT },
        ],
      ];
      return steps
        .map(([what, sql, params]) => {
          const plan = raw
            .prepare(`EXPLAIN QUERY PLAN ${sql}`)
            .all(params)
            .map((row) => (row as { detail: string }).detail);
          return `${what}: ${plan.join(' | ')}`;
        })
        .join('\n');
    },
    async drop() {
      raw.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))]!;
}

interface Variant {
  label: string;
  open: () => Promise<Bench>;
  setup: (bench: Bench) => Promise<void>;
  params: Omit<JobClaimParams, 'owner'>;
}

/**
 * Opens and seeds every variant, then claims CLAIMS + warm-up times from each in turn, checking
 * every claim got its 10 jobs and only allowed kinds; prints medians, p95s and plans.
 */
async function compare(title: string, variants: Variant[]): Promise<void> {
  const benches: Bench[] = [];
  try {
    for (const variant of variants) {
      const started = performance.now();
      const bench = await variant.open();
      benches.push(bench);
      await variant.setup(bench);
      console.log(`seeded ${variant.label} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    }
    const times: number[][] = variants.map(() => []);
    for (let i = 0; i < WARM_UP_CLAIMS + CLAIMS; i++) {
      for (const [v, variant] of variants.entries()) {
        const started = performance.now();
        const claimed = await benches[v]!.store.jobClaim({ ...variant.params, owner: `bench-${i}` });
        const elapsed = performance.now() - started;
        if (claimed.length !== CLAIM_LIMIT) throw new Error(`${variant.label}: claim ${i} got ${claimed.length} jobs`);
        const kinds = variant.params.kinds;
        if (kinds && claimed.some((job) => !kinds.includes(job.kind))) {
          throw new Error(`${variant.label}: claim ${i} handed out a foreign kind`);
        }
        if (i >= WARM_UP_CLAIMS) times[v]!.push(elapsed);
      }
    }
    console.log(`\n## ${title}`);
    for (const [v, variant] of variants.entries()) {
      const sorted = times[v]!.sort((a, b) => a - b);
      console.log(
        `${variant.label}: claim round trip median ${percentile(sorted, 0.5).toFixed(3)} ms, ` +
          `p95 ${percentile(sorted, 0.95).toFixed(3)} ms over ${CLAIMS} claims`,
      );
    }
    for (const [v, variant] of variants.entries()) {
      console.log(
        `\n### plan: ${variant.label}\n${await benches[v]!.explain({ ...variant.params, owner: 'explain' })}`,
      );
    }
  } finally {
    for (const bench of benches) await bench.drop();
  }
}

const ownJobs = async (bench: Bench) => {
  // Own jobs through the store itself, in batches, as a submitter would write them.
  for (let written = 0; written < OWN_JOBS; written += 5000) {
    await bench.store.jobSubmit({
      now: new Date(NOW.getTime() - 60_000),
      jobs: Array.from({ length: 5000 }, () => normalizeSubmit({ kind: 'mine', queue: 'default' })),
    });
  }
};

for (const storeKind of stores) {
  const open = (name: string, tree: Tree) => () =>
    storeKind === 'postgres' ? postgresBench(name, tree) : sqliteBench(tree);
  if (only.has('filtered')) {
    const filtered = { limit: CLAIM_LIMIT, leaseMs: 60_000, now: NOW, kinds: ['mine'] };
    await compare(`${storeKind}: kinds ['mine'], ${FOREIGN_ROWS} due rows of another kind absent vs present`, [
      { label: `${storeKind} foreign absent`, open: open('absent', 'current'), setup: ownJobs, params: filtered },
      {
        label: `${storeKind} foreign present`,
        open: open('present', 'current'),
        setup: async (bench) => {
          await ownJobs(bench);
          await bench.bulkInsert('foreign', FOREIGN_ROWS);
        },
        params: filtered,
      },
    ]);
  }
  if (only.has('default')) {
    const plain = { limit: CLAIM_LIMIT, leaseMs: 60_000, now: NOW };
    const seed = (bench: Bench) => bench.bulkInsert('mine', DEFAULT_ROWS);
    const variants: Variant[] = [
      {
        label: `${storeKind} default claim, this tree`,
        open: open('default_now', 'current'),
        setup: seed,
        params: plain,
      },
    ];
    if (args.baseline) {
      variants.push({
        label: `${storeKind} default claim, baseline tree`,
        open: open('default_before', 'baseline'),
        setup: seed,
        params: plain,
      });
    }
    await compare(`${storeKind}: default claim (no kind filter), ${DEFAULT_ROWS} due rows`, variants);
  }
}
