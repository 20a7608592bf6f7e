/**
 * The hot statements the PostgreSQL store keeps as functions (src/store/postgres/stored-statements.ts):
 * created once per definition when a store opens, typed exactly like the table, and planned the
 * way their decisions say, read from the plans the functions really run (auto_explain with nested
 * statements, reported to this client as notices), including a plan cached while the table was empty.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { normalizeSubmit } from '../../src/job/job-spec.js';
import { JOB_COLUMNS } from '../../src/store/job-columns.js';
import { PostgresClaimQueries } from '../../src/store/postgres/claim-queries.js';
import { PostgresJobQueries } from '../../src/store/postgres/job-queries.js';
import { JOB_COLUMN_TYPES } from '../../src/store/postgres/job-row.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { storedStatement } from '../../src/store/postgres/stored-statements.js';
import { fillWithDeadRunningEntries } from '../support/lapsed-lease-table.js';
import { createTestDatabase, POSTGRES_URL, type TestDatabase } from '../support/stores.js';

const opened: { db?: TestDatabase; stores: PostgresStore[]; clients: pg.Client[] } = { stores: [], clients: [] };

afterEach(async () => {
  await Promise.all(opened.clients.splice(0).map((client) => client.end()));
  await Promise.all(opened.stores.splice(0).map((store) => store.close()));
  await opened.db?.drop();
  opened.db = undefined;
});

async function freshStore(): Promise<{ store: PostgresStore; schema: string }> {
  const db = await createTestDatabase('postgres');
  opened.db = db;
  const schema = db.schema as string;
  const store = await PostgresStore.open(POSTGRES_URL, { schema, poolSize: 2 });
  opened.stores.push(store);
  return { store, schema };
}

async function client(): Promise<pg.Client> {
  const connection = new pg.Client({ connectionString: POSTGRES_URL });
  await connection.connect();
  opened.clients.push(connection);
  return connection;
}

async function functionNames(connection: pg.Client, schema: string): Promise<string[]> {
  return (await functionVersions(connection, schema)).map((row) => row.proname);
}

/** Each function with the transaction that last wrote its catalog row: a CREATE OR REPLACE changes it. */
async function functionVersions(connection: pg.Client, schema: string): Promise<{ proname: string; xmin: string }[]> {
  const result = await connection.query<{ proname: string; xmin: string }>(
    `SELECT p.proname, p.xmin::text AS xmin FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = $1 ORDER BY 1`,
    [schema],
  );
  return result.rows;
}

/** A connection whose every statement, nested ones included, reports its plan as a notice. */
async function explainingClient(): Promise<{ connection: pg.Client; plans: string[] }> {
  const connection = await client();
  const plans: string[] = [];
  connection.on('notice', (notice) => {
    if (notice.message?.includes('plan:')) plans.push(notice.message);
  });
  await connection.query(`LOAD 'auto_explain'`);
  await connection.query('SET auto_explain.log_min_duration = 0');
  await connection.query('SET auto_explain.log_nested_statements = on');
  await connection.query(`SET auto_explain.log_level = 'notice'`);
  await connection.query('SET client_min_messages = notice');
  return { connection, plans };
}

/** The plans of statements run inside a stored function (their query text is the function's body). */
function nestedPlans(plans: readonly string[], marker: string): string[] {
  return plans.filter((plan) => plan.includes(marker) && !/Query Text: SELECT \* FROM "[^"]+"\."/.test(plan));
}

describe('PostgresStore: stored hot statements', () => {
  it('creates each stored statement once per definition, whoever opens the schema', async () => {
    const { schema } = await freshStore();
    const connection = await client();
    const names = await functionNames(connection, schema);
    expect(names.map((name) => name.replace(/_[0-9a-f]{12}$/, ''))).toEqual([
      'claim_merge_due',
      'claim_pending',
      'claim_searching',
      'complete_delete_jobs',
      'complete_jobs',
      'fail_jobs',
      'heartbeat_jobs',
      'insert_jobs',
    ]);
    const before = await functionVersions(connection, schema);
    opened.stores.push(await PostgresStore.open(POSTGRES_URL, { schema, poolSize: 1 }));
    expect(await functionVersions(connection, schema)).toEqual(before);
  });

  it('names a changed definition anew, so a release never replaces the function its peers still call', () => {
    const spec = {
      prefix: 'complete_jobs',
      parameterTypes: ['bigint[]'],
      returns: 'ord bigint',
      sql: 'SELECT 1::bigint',
    };
    const a = storedStatement('"docket"', spec);
    expect(storedStatement('"docket"', spec).functionName).toBe(a.functionName);
    expect(storedStatement('"docket"', { ...spec, sql: 'SELECT 2::bigint' }).functionName).not.toBe(a.functionName);
    expect(storedStatement('"other"', spec).functionName).not.toBe(a.functionName);
  });

  it('declares the result columns with the types the jobs table has', async () => {
    const { schema } = await freshStore();
    const connection = await client();
    const result = await connection.query<{ attname: string; type: string }>(
      `SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a
       WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
      [`"${schema}".jobs`],
    );
    const normalize = (type: string) => type.replace('timestamp with time zone', 'timestamptz');
    expect(result.rows.map((row) => [row.attname, normalize(row.type)])).toEqual(
      JOB_COLUMNS.map((column) => [column, JOB_COLUMN_TYPES[column]]),
    );
  });

  it('plans with index scans only, even when the plan was cached while the table was empty', async () => {
    const { schema } = await freshStore();
    const claims = new PostgresClaimQueries(schema);
    const jobs = new PostgresJobQueries(schema);
    const { connection, plans } = await explainingClient();
    const claimParams = { owner: 'o', limit: 10, leaseMs: 30_000, includeLapsed: false } as const;

    // First calls on an empty, never analysed table: each function caches its generic plan now.
    expect((await claims.claimOrDefer(connection, claimParams)).jobs).toEqual([]);
    const [reserved] = (
      await connection.query<{ ids: string[] }>(
        `SELECT array_agg(nextval('"${schema}".jobs_id_seq')::text) AS ids FROM generate_series(1, 1)`,
      )
    ).rows;
    await jobs.insertReserved(connection, { jobs: [normalizeSubmit({ kind: 'k' })], ids: reserved!.ids }, 5000);
    expect((await claims.claimOrDefer(connection, claimParams)).jobs).toHaveLength(1);

    // The table grows to 60,000 pending rows with no ANALYZE (autovacuum may be off): the cached
    // plans must still find ten rows without reading the table.
    await connection.query(
      `INSERT INTO "${schema}".jobs (kind, queue, payload, state, run_at, max_attempts, retry_policy, created_at)
       SELECT 'k', 'default', '{}', 'pending', now() - interval '1 hour', 3, '{"kind":"fixed","delayMs":1000}', now()
       FROM generate_series(1, 60000)`,
    );
    plans.length = 0;
    expect((await claims.claimOrDefer(connection, claimParams)).jobs).toHaveLength(10);

    const claimPlan = nestedPlans(plans, 'FOR UPDATE SKIP LOCKED');
    expect(claimPlan).toHaveLength(1);
    expect(claimPlan[0]).not.toMatch(/Seq Scan on jobs|Bitmap|Hash/);
    // The triples' loose scan, each triple's range and the update's row lookup, as decisions 0006 and 0010 plan them.
    expect(claimPlan[0]).toMatch(/Index Only Scan using jobs_pending_kind_claim_idx/);
    expect(claimPlan[0]).toMatch(/Index Scan using jobs_pending_kind_claim_idx/);
    expect(claimPlan[0]).toMatch(/Index Scan using jobs_pkey on jobs j_3 [^\n]*\n\s+Index Cond: \(id = c_1\.id\)/);

    // A second kind pending, so fewer triples than the claim's limit: the claim merges them
    // (decision 0026), and each triple's cursor range-scans the claim index like the claim's own scans.
    await connection.query(
      `INSERT INTO "${schema}".jobs (kind, queue, payload, state, run_at, max_attempts, retry_policy, created_at)
       SELECT 'k2', 'default', '{}', 'pending', now() - interval '2 hours', 3, '{"kind":"fixed","delayMs":1000}', now()
       FROM generate_series(1, 5)`,
    );
    plans.length = 0;
    const merged = await claims.claimOrDefer(connection, claimParams);
    expect(merged.jobs.map((job) => job.kind)).toEqual([...Array(5).fill('k2'), ...Array(5).fill('k')]);
    const cursorPlans = nestedPlans(plans, '$1[opening]');
    expect(cursorPlans, 'one cursor per triple opened').toHaveLength(2);
    for (const plan of cursorPlans) {
      expect(plan).not.toMatch(/Seq Scan on jobs|Bitmap|Hash|Sort/);
      expect(plan).toMatch(/Index Scan using jobs_pending_kind_claim_idx/);
    }

    // The insert reads no table: its plan is the input's function scans, whatever the table holds
    // (a key is checked by the unique index's insertion, not by a scan).
    const [more] = (
      await connection.query<{ ids: string[] }>(
        `SELECT array_agg(nextval('"${schema}".jobs_id_seq')::text) AS ids FROM generate_series(1, 3)`,
      )
    ).rows;
    plans.length = 0;
    const specs = [0, 1, 2].map((i) =>
      normalizeSubmit(i === 1 ? { kind: 'k' } : { kind: 'k', idempotencyKey: `key-${i}` }),
    );
    expect(await jobs.insertReserved(connection, { jobs: specs, ids: more!.ids }, 5000)).toHaveLength(3);
    const insertPlan = nestedPlans(plans, 'INSERT INTO');
    expect(insertPlan).toHaveLength(1);
    expect(insertPlan[0]).not.toMatch(/Scan on jobs|Scan using/);
  });

  it('scans each triple on the claim index, whatever the statistics, on every claim path (decision 0027)', async () => {
    // A fresh install's backlog over many kinds with long names, never analysed: guessing every
    // condition's selectivity, the planner found the list index (state, queue, id) cheaper than the
    // wider claim index for each triple's scan, then sorted each triple's rows: the scan read every
    // pending row of the queue once per triple (1,000 kinds of 20 jobs: a claim of 524 took 1 s,
    // and a default worker drained 867 jobs/s). The claims plan without sorts they could avoid, and
    // without JIT compilation (which the disabled sorts' cost estimates would otherwise invite).
    const { schema } = await freshStore();
    const claims = new PostgresClaimQueries(schema);
    const { connection, plans } = await explainingClient();
    const insertKinds = (kinds: number, perKind: number, prefix: string) =>
      connection.query(
        `INSERT INTO "${schema}".jobs (kind, queue, payload, state, run_at, max_attempts, retry_policy, created_at)
         SELECT $3::text || (i % $1::int), 'default', '{}', 'pending', now() - interval '1 hour', 3,
           '{"kind":"fixed","delayMs":1000}', now()
         FROM generate_series(0, $1::int * $2::int - 1) i`,
        [kinds, perKind, prefix],
      );
    const prefix = 'service.reports.nightly-rebuild.tenant_';
    await insertKinds(1000, 20, prefix);
    const tripleScans = (plan: string) => plan.match(/(Index|Index Only) Scan using \w+ on jobs j_2\b/g) ?? [];
    const expectClaimIndexOnly = (plan: string, what: string) => {
      expect(plan, what).not.toMatch(/jobs_listed_state_queue_id_idx|Seq Scan on jobs|Bitmap/);
      expect(plan, `${what}: no JIT`).not.toMatch(/JIT:/);
    };

    // The bounded path: 1,000 triples, a claim of 524.
    plans.length = 0;
    const bounded = await claims.claimOrDefer(connection, {
      owner: 'o',
      limit: 524,
      leaseMs: 30_000,
      includeLapsed: false,
    });
    expect(bounded.jobs).toHaveLength(524);
    const [boundedPlan] = nestedPlans(plans, 'FOR UPDATE SKIP LOCKED');
    expectClaimIndexOnly(boundedPlan!, 'bounded claim');
    expect(tripleScans(boundedPlan!)).toEqual(['Index Scan using jobs_pending_kind_claim_idx on jobs j_2']);

    // The searching claim (lapsed leases too), and the in-transaction claim sent as SQL.
    plans.length = 0;
    expect((await claims.claimOrDefer(connection, { owner: 'o', limit: 524, leaseMs: 30_000 })).jobs).toHaveLength(524);
    await connection.query('BEGIN');
    await claims.planClaimInTransaction(connection);
    expect(await claims.claimInTransaction(connection, { owner: 'o', limit: 524, leaseMs: 30_000 })).toHaveLength(524);
    await connection.query('COMMIT');
    const [searching, inTransaction] = nestedPlans(plans, 'FOR UPDATE SKIP LOCKED').concat(
      plans.filter((plan) => plan.includes('FOR UPDATE SKIP LOCKED') && /Query Text: \s*WITH RECURSIVE/.test(plan)),
    );
    for (const [plan, what] of [
      [searching, 'searching claim'],
      [inTransaction, 'in-transaction claim'],
    ] as const) {
      expect(plan, what).toBeDefined();
      expectClaimIndexOnly(plan!, what);
      expect(tripleScans(plan!), what).toEqual(['Index Scan using jobs_pending_kind_claim_idx on jobs j_2']);
    }

    // The merge path: fewer triples than the claim's limit, one cursor per triple.
    await connection.query(`DELETE FROM "${schema}".jobs`);
    await insertKinds(40, 30, prefix);
    plans.length = 0;
    expect(
      (await claims.claimOrDefer(connection, { owner: 'o', limit: 524, leaseMs: 30_000, includeLapsed: false })).jobs,
    ).toHaveLength(524);
    const cursorPlans = nestedPlans(plans, '$1[opening]');
    expect(cursorPlans.length).toBeGreaterThan(1);
    for (const plan of cursorPlans) {
      expectClaimIndexOnly(plan, 'merge cursor');
      expect(plan).toMatch(/Index Scan using jobs_pending_kind_claim_idx/);
    }
  });

  it('completes and renews each lease by its job id, even when the plans were cached while the table was empty', async () => {
    const { schema } = await freshStore();
    const jobs = new PostgresJobQueries(schema);
    const { connection, plans } = await explainingClient();

    // First calls on an empty, never analysed table: each function caches its generic plan now.
    const nobody = [{ id: '1', token: 1, leaseOwner: 'o' }];
    expect(await jobs.completeMany(connection, { leases: nobody })).toEqual(['stale']);
    expect(await jobs.completeMany(connection, { leases: nobody, deleteRecord: true })).toEqual(['stale']);
    expect(await jobs.heartbeatMany(connection, { leases: nobody, leaseMs: 30_000 })).toEqual([null]);

    // 20,000 running rows and no ANALYZE: a plan that joined the batch with the running rows
    // (the running-lease index, or a bitmap or hash over it) would read all of them per batch.
    await connection.query(
      `INSERT INTO "${schema}".jobs (kind, queue, payload, state, run_at, lease_until, lease_owner, token, attempts,
         max_attempts, retry_policy, created_at, started_at)
       SELECT 'k', 'default', '{}', 'running', now(), now() + interval '1 hour', 'o', 1, 1, 3,
         '{"kind":"fixed","delayMs":1000}', now(), now()
       FROM generate_series(1, 20000)`,
    );
    const ids = (
      await connection.query<{ id: string }>(`SELECT id::text FROM "${schema}".jobs ORDER BY id LIMIT 20`)
    ).rows.map((row) => row.id);
    const leasesOf = (some: string[]) =>
      some.map((id, index) => ({ id, token: 1, leaseOwner: index === 3 ? 'someone else' : 'o' }));
    const acceptedBut3 = <T>(some: string[], accepted: (index: number) => T, refused: T) =>
      some.map((_, index) => (index === 3 ? refused : accepted(index)));
    plans.length = 0;
    const completed = ids.slice(0, 10);
    expect(await jobs.completeMany(connection, { leases: leasesOf(completed) })).toEqual(
      acceptedBut3(completed, () => 'done', 'stale'),
    );
    const deleted = ids.slice(10, 15);
    expect(await jobs.completeMany(connection, { leases: leasesOf(deleted), deleteRecord: true })).toEqual(
      acceptedBut3(deleted, () => 'done', 'stale'),
    );
    const renewed = ids.slice(15);
    const renewals = await jobs.heartbeatMany(connection, { leases: leasesOf(renewed), leaseMs: 30_000 });
    expect(renewals.map((leaseUntil) => leaseUntil instanceof Date)).toEqual(acceptedBut3(renewed, () => true, false));

    for (const marker of ["SET state = 'done'", 'DELETE FROM', 'SET lease_until']) {
      const plan = nestedPlans(plans, marker);
      expect(plan).toHaveLength(1);
      expect(plan[0]).not.toMatch(/Seq Scan on jobs|Bitmap|Hash|jobs_running_lease_idx/);
      expect(plan[0]).toMatch(
        /Index Scan using jobs_pkey on jobs j [^\n]*\n\s+Index Cond: \(id = ANY \(ARRAY\[l\.id\]\)\)/,
      );
    }
  });

  it('claims, completes, fails and renews by job id, even when the plans were made on a table of a few rows (decision 0023)', async () => {
    // A worker on a fresh install: its first claims, completions and renewals find a table of a
    // handful of rows on one page, already analysed, and each stored function keeps the plan it
    // makes then. With the plain `j.id = l.id`, the completion's plan scanned the whole primary key
    // with the batch inside it, the cheaper path on one page, and every later call read every row
    // the table had grown to.
    const { schema } = await freshStore();
    const jobs = new PostgresJobQueries(schema);
    const claims = new PostgresClaimQueries(schema);
    const claimBoth = async () => {
      for (const includeLapsed of [false, true]) {
        const claimed = await claims.claimOrDefer(connection, { owner: 'c', limit: 2, leaseMs: 30_000, includeLapsed });
        expect(claimed.jobs).toHaveLength(2);
      }
    };
    const { connection, plans } = await explainingClient();
    const insertRunning = (count: number) =>
      connection.query(
        `INSERT INTO "${schema}".jobs (kind, queue, payload, state, run_at, lease_until, lease_owner, token, attempts,
           max_attempts, retry_policy, created_at, started_at)
         SELECT 'k', 'default', '{}', 'running', now(), now() + interval '1 hour', 'o', 1, 1, 3,
           '{"kind":"fixed","delayMs":1000}', now(), now()
         FROM generate_series(1, $1::int)`,
        [count],
      );
    const runningIds = async (count: number) =>
      (
        await connection.query<{ id: string }>(
          `SELECT j.id::text AS id FROM "${schema}".jobs j WHERE j.state = 'running' AND j.lease_owner = 'o'
           ORDER BY j.id DESC LIMIT $1`,
          [count],
        )
      ).rows.map((row) => row.id);
    const leasesOf = (ids: string[]) => ids.map((id) => ({ id, token: 1, leaseOwner: 'o' }));

    await connection.query(
      `INSERT INTO "${schema}".jobs (kind, queue, payload, state, run_at, max_attempts, retry_policy, created_at)
       SELECT 'k', 'default', '{}', 'pending', now(), 3, '{"kind":"fixed","delayMs":1000}', now()
       FROM generate_series(1, 10)`,
    );
    await insertRunning(6);
    // Autovacuum analyses a new table after its first 50 or so changed rows: from then on the
    // planner sizes it by its statistics (one page here), no longer by the guess of ten pages it
    // makes for a table never analysed.
    await connection.query(`ANALYZE "${schema}".jobs`);
    await claimBoth();
    const first = await runningIds(4);
    expect(await jobs.heartbeatMany(connection, { leases: leasesOf(first), leaseMs: 30_000 })).toHaveLength(4);
    expect(await jobs.completeMany(connection, { leases: leasesOf(first.slice(0, 2)) })).toEqual(['done', 'done']);
    expect(await jobs.completeMany(connection, { leases: leasesOf(first.slice(2)), deleteRecord: true })).toEqual([
      'done',
      'done',
    ]);
    const failBoth = async (ids: string[]) => {
      const error = { kind: 'thrown' as const, message: 'boom', detail: undefined };
      const outcomes = await jobs.failMany(connection, {
        failures: [
          { ...leasesOf(ids)[0]!, error, decision: { kind: 'retry', delayMs: 1000 } },
          { ...leasesOf(ids)[1]!, error, decision: { kind: 'park' } },
        ],
      });
      expect(outcomes.map((outcome) => outcome.outcome)).toEqual(['retry', 'parked']);
    };
    await failBoth(await runningIds(2));

    // The table grows to 30,000 rows, with no ANALYZE (autovacuum may be off or not yet run).
    await insertRunning(30_000);
    const [second, third] = [(await runningIds(6)).slice(0, 3), (await runningIds(6)).slice(3)];
    plans.length = 0;
    expect(await jobs.completeMany(connection, { leases: leasesOf(second) })).toEqual(['done', 'done', 'done']);
    expect(await jobs.completeMany(connection, { leases: leasesOf(third), deleteRecord: true })).toEqual([
      'done',
      'done',
      'done',
    ]);
    const renewals = await jobs.heartbeatMany(connection, { leases: leasesOf(await runningIds(3)), leaseMs: 30_000 });
    expect(renewals.every((leaseUntil) => leaseUntil instanceof Date)).toBe(true);
    for (const marker of ["SET state = 'done'", 'DELETE FROM', 'SET lease_until']) {
      const plan = nestedPlans(plans, marker);
      expect(plan).toHaveLength(1);
      // One probe per lease (the primary key searched by the lease's id), never a scan of the whole
      // key with the batch inside it (the pkey scan then has a Filter and no Index Cond).
      expect(plan[0]).toMatch(
        /Index Scan using jobs_pkey on jobs j [^\n]*\n\s+Index Cond: \(id = (ANY \(ARRAY\[)?l\.id/,
      );
      expect(plan[0]).not.toMatch(/Seq Scan on jobs|Bitmap|Hash/);
    }
    plans.length = 0;
    await failBoth(await runningIds(2));
    const failPlans = nestedPlans(plans, 'err_message');
    expect(failPlans).toHaveLength(1);
    // Both the retry's update and the park's delete probe the primary key by the lease's id.
    expect(
      failPlans[0]!.match(
        /Index Scan using jobs_pkey on jobs j(_1)? [^\n]*\n\s+Index Cond: \(id = ANY \(ARRAY\[l(_1)?\.id/g,
      ),
    ).toHaveLength(2);
    expect(failPlans[0]).not.toMatch(/Seq Scan on jobs|Bitmap|Hash Join/);
    plans.length = 0;
    await claimBoth();

    // Neither claim ever reads the primary key except by a chosen row's id.
    const claimPlans = nestedPlans(plans, 'FOR UPDATE SKIP LOCKED');
    expect(claimPlans).toHaveLength(2);
    for (const plan of claimPlans) {
      expect(plan).toMatch(/Index Scan using jobs_pkey/);
      expect(plan).not.toMatch(/Index Scan using jobs_pkey on jobs \w+ [^\n]*\n(?!\s+Index Cond)/);
      // (A HashAggregate of the parked candidates' ids, at most the claim's limit, is no table scan.)
      expect(plan).not.toMatch(/Seq Scan on jobs|Bitmap|Hash Join/);
    }
  });

  it('searches lapsed leases in one stored statement with plain index scans, even when the plan was cached while the table was empty', async () => {
    const { store, schema } = await freshStore();
    const claims = new PostgresClaimQueries(schema);
    const { connection, plans } = await explainingClient();
    const T0 = new Date(100_000);
    const searching = { owner: 'w2', limit: 1, leaseMs: 1000, includeLapsed: true } as const;

    // First call on an empty, never analysed table: the function caches its generic plan now.
    expect(await claims.claimOrDefer(connection, { ...searching, now: T0 })).toEqual({
      jobs: [],
      needsTransaction: false,
    });

    // No ANALYZE, 5,000 drained (their running-index entries dead, their leases ended by T0 + 10 s),
    // one job crashed mid-run (its lease lapses at T0 + 1 s) and another on its last attempt.
    const crashed = await fillWithDeadRunningEntries(store, T0);
    const [exhausted] = (
      await connection.query<{ id: string }>(
        `INSERT INTO "${schema}".jobs (kind, queue, payload, state, run_at, lease_until, lease_owner, token, attempts,
           max_attempts, retry_policy, created_at, started_at)
         VALUES ('k', 'default', 'null', 'running', $1, $1, 'gone', 1, 3, 3, '{}', $1, $1) RETURNING id::text`,
        [T0],
      )
    ).rows;

    plans.length = 0;
    const later = new Date(T0.getTime() + 10_000);
    const claimed = await claims.claimOrDefer(connection, { ...searching, now: later });
    // The lapsed job is taken over ahead of the due ones (it ran at T0 - 5 s); the exhausted one is parked.
    expect(claimed.jobs.map((job) => [job.id, job.attempts])).toEqual([[crashed.id, 2]]);
    const parked = await connection.query(`SELECT id::text FROM "${schema}".dead_jobs`);
    expect(parked.rows).toEqual([{ id: exhausted!.id }]);

    const claimPlan = nestedPlans(plans, 'FOR UPDATE SKIP LOCKED');
    expect(claimPlan).toHaveLength(1);
    // (A HashAggregate de-duplicates the exhausted ids to delete: no table is read through a hash.)
    expect(claimPlan[0]).not.toMatch(/Seq Scan on jobs|Bitmap|Hash Join/);
    expect(claimPlan[0], 'the search reads the lease index').toMatch(/Index Scan using jobs_running_lease_idx/);
  });

  it('answers the same jobs through the stored claim as through the statement it wraps', async () => {
    const { store, schema } = await freshStore();
    await store.jobSubmit({
      jobs: Array.from({ length: 6 }, (_, i) => normalizeSubmit({ kind: 'k', priority: i % 3 })),
    });
    const claims = new PostgresClaimQueries(schema);
    const connection = await client();
    await connection.query('BEGIN');
    const params = { owner: 'o', limit: 4, leaseMs: 30_000, includeLapsed: false } as const;
    const stored = (await claims.claimOrDefer(connection, params)).jobs;
    await connection.query('ROLLBACK');
    const direct = await connection.query(claims.claimPendingOnlySql, [null, 'o', 4, 30_000, null, null, []]);
    expect(stored.map((job) => job.id)).toEqual(direct.rows.map((row: { id: string }) => row.id));
    expect(stored.map((job) => job.priority)).toEqual([0, 0, 1, 1]);
  });
});
