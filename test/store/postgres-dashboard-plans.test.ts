/**
 * The PostgreSQL dashboard's statements on a filled table (decision 0018): the states that pile up
 * are read from jobs_listed_state_queue_id_idx, which leaves running rows out, and running rows
 * from jobs_running_lease_idx; no list, count or bulk batch reads the jobs table whole. Every
 * statement the dashboard sends is recorded from real calls and planned with EXPLAIN before and
 * after ANALYZE (a table never analysed is what a fresh install has).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresDashboardQueries } from '../../src/store/postgres/dashboard-queries.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { Queryable } from '../../src/store/postgres/sql-fragments.js';
import { planBulkReads, planListReads } from '../support/dashboard-plan-reads.js';
import { createTestDatabase, POSTGRES_URL, type TestDatabase } from '../support/stores.js';

interface PlanNode {
  'Node Type'?: string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

/** Every node of a plan, each with the node it sits under. */
function flattenPlan(node: PlanNode, parent?: PlanNode): { node: PlanNode; parent: PlanNode | undefined }[] {
  return [{ node, parent }, ...(node.Plans ?? []).flatMap((child) => flattenPlan(child, node))];
}

describe('PostgreSQL dashboard plans', () => {
  let db: TestDatabase;
  let client: pg.Client;
  let schema: string;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    schema = db.schema!;
    await (await PostgresStore.open(POSTGRES_URL, { schema, poolSize: 1 })).close();
    client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    // 200,000 done and 100,000 pending jobs over three queues, a thousand cancelled, fifty running.
    const fill = (n: number, state: string, finished: string, lease: string, owner: string) =>
      client.query(`INSERT INTO "${schema}".jobs (kind, queue, payload, priority, state, run_at, max_attempts,
          retry_policy, created_at, finished_at, lease_until, lease_owner)
        SELECT 'k' || (x % 5), 'q' || (x % 3), jsonb_build_object('c', x % 100), 0, '${state}',
          to_timestamp(1000 + x), 5, '{}', to_timestamp(0), ${finished}, ${lease}, ${owner}
        FROM generate_series(1, ${n}) x`);
    await fill(200_000, 'done', 'to_timestamp(2000 + x)', 'NULL', 'NULL');
    await fill(100_000, 'pending', 'NULL', 'NULL', 'NULL');
    await fill(1_000, 'cancelled', 'to_timestamp(2000 + x)', 'NULL', 'NULL');
    await fill(50, 'running', 'NULL', "now() + interval '1 hour'", "'w'");
  }, 120_000);

  afterAll(async () => {
    await client?.end();
    await db?.drop();
  });

  it('keeps the list index over every state but running (migration 6)', async () => {
    const indexes = await client.query<{ indexname: string; indexdef: string }>(
      'SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2 ORDER BY indexname',
      [schema, 'jobs'],
    );
    const names = indexes.rows.map((row) => row.indexname);
    expect(names).not.toContain('jobs_state_queue_id_idx');
    const listed = indexes.rows.find((row) => row.indexname === 'jobs_listed_state_queue_id_idx');
    expect(listed?.indexdef).toMatch(/\(state, queue, id\) WHERE \(state <> 'running'::text\)$/);
  });

  it('reads every state from its own index in lists, counts and bulk batches, before and after ANALYZE', async () => {
    // Every statement the dashboard sends, recorded from real calls, then planned.
    const statements = new Map<string, unknown[]>();
    const recording: Queryable = {
      query: ((text: string, values?: unknown[]) => {
        // An estimate is an EXPLAIN of its own: its statement is what gets planned.
        statements.set(text.replace(/^EXPLAIN \(FORMAT JSON\) /, ''), values ?? []);
        return client.query(text, values);
      }) as Queryable['query'],
    };
    const dashboard = new PostgresDashboardQueries(schema, 'docket_plans');
    for (const { label, first, later } of planListReads()) {
      expect((await dashboard.list(recording, first)).length, label).toBeGreaterThan(0);
      await dashboard.list(recording, later);
    }
    for (const read of planBulkReads()) {
      const count = await dashboard.countMatching(recording, {
        action: read.action,
        filter: read.filter,
        exactUpTo: 10,
      });
      expect(count.count).toBeGreaterThan(10);
      // Run in a transaction rolled back: the rows stay as they are for the other statements.
      await client.query('BEGIN');
      try {
        expect((await dashboard.bulkApply(recording, read)).scanned).toBe(100);
      } finally {
        await client.query('ROLLBACK');
      }
    }
    const counts = await dashboard.queueCounts(recording, undefined, 10);
    expect(counts.map((row) => [row.queue, row.running > 0])).toEqual([
      ['q0', true],
      ['q1', true],
      ['q2', true],
    ]);

    const planAll = async () => {
      const problems: string[] = [];
      for (const [text, values] of statements) {
        const result = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
          `EXPLAIN (FORMAT JSON) ${text}`,
          values,
        );
        const planned = flattenPlan(result.rows[0]!['QUERY PLAN'][0].Plan);
        const nodes = planned.map(({ node }) => node);
        for (const { node, parent } of planned) {
          // A bounded count of a state that is a third of the table may be a LIMITed sequential
          // scan once the planner has statistics (it was one with migration 4's index too); any
          // other sequential scan of jobs (under a sort, a join, an aggregate) reads it whole.
          if (
            node['Node Type'] === 'Seq Scan' &&
            node['Relation Name'] === 'jobs' &&
            parent?.['Node Type'] !== 'Limit'
          ) {
            problems.push(`a sequential scan of jobs in: ${text.replace(/\s+/g, ' ').slice(0, 300)}`);
          }
        }
        // Running rows through the lease index, not by a walk of the primary key past every other
        // row. (Neither partial index can serve the other's states: their predicates exclude them.)
        if (/state = 'running'/.test(text) && !nodes.some((node) => node['Index Name'] === 'jobs_running_lease_idx')) {
          problems.push(`running rows read without the lease index in: ${text.slice(0, 200)}`);
        }
      }
      return problems;
    };
    expect(statements.size).toBeGreaterThan(40);
    expect(await planAll()).toEqual([]);
    await client.query(`ANALYZE "${schema}".jobs`);
    expect(await planAll()).toEqual([]);
  });
});
