/**
 * PostgreSQL-specific routing behaviour the shared conformance suite cannot check on SQLite:
 * idempotency conflicts inside a caller's transaction and between concurrent connections, the
 * kind-filtered claim's plan with a large foreign-kind backlog, and migrating a version-2 schema
 * that already holds jobs. Each test gets its own schema.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { IdempotencyConflictError } from '../../src/job/errors.js';
import { normalizeSubmit, type SubmitInput } from '../../src/job/job-spec.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { fillWithDeadRunningEntries } from '../support/lapsed-lease-table.js';
import { createTestDatabase, POSTGRES_URL, type TestDatabase } from '../support/stores.js';

const T0 = new Date(100_000);

/** One node of a JSON EXPLAIN plan: the fields the plan tests read, and its children. */
interface PlanNode {
  'Node Type'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  'Actual Loops'?: number;
  Plans?: PlanNode[];
}

function flattenPlan(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(flattenPlan)];
}

function spec(input: SubmitInput) {
  return normalizeSubmit(input, () => 0);
}

describe('PostgresStore: routing', () => {
  let db: TestDatabase | undefined;
  const opened: PostgresStore[] = [];
  const clients: pg.Client[] = [];

  async function open(): Promise<PostgresStore> {
    db ??= await createTestDatabase('postgres');
    const store = await PostgresStore.open(POSTGRES_URL, { schema: db.schema!, poolSize: 4 });
    opened.push(store);
    return store;
  }

  async function client(): Promise<pg.Client> {
    const c = new pg.Client({ connectionString: POSTGRES_URL });
    await c.connect();
    clients.push(c);
    return c;
  }

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.end()));
    await Promise.all(opened.splice(0).map((store) => store.close()));
    await db?.drop();
    db = undefined;
  });

  it('rolls a conflicting batch back to its savepoint inside the caller’s transaction, which stays usable', async () => {
    const store = await open();
    const [held] = await store.jobSubmit({ now: T0, jobs: [spec({ kind: 'k', idempotencyKey: 'key', payload: 1 })] });
    const tx = await client();
    await tx.query('BEGIN');
    await expect(
      store.jobSubmit({
        now: T0,
        transaction: tx,
        jobs: [spec({ kind: 'k', payload: 'in-batch' }), spec({ kind: 'k', idempotencyKey: 'key', payload: 2 })],
      }),
    ).rejects.toMatchObject({
      name: 'IdempotencyConflictError',
      field: 'jobs[1].idempotencyKey',
      existingId: held!.id,
    });
    // A single conflicting submit needs no savepoint: it inserted nothing and raised no SQL error.
    await expect(
      store.jobSubmit({ now: T0, transaction: tx, jobs: [spec({ kind: 'k', idempotencyKey: 'key', payload: 3 })] }),
    ).rejects.toBeInstanceOf(IdempotencyConflictError);
    const [kept] = await store.jobSubmit({ now: T0, transaction: tx, jobs: [spec({ kind: 'k', payload: 'kept' })] });
    await tx.query('COMMIT');
    const jobs = await store.jobList({});
    expect(jobs.map((job) => [job.id, job.payload])).toEqual([
      [held!.id, 1],
      [kept!.id, 'kept'],
    ]);
  });

  it('keeps one job per key when connections race with different payloads: the rest match or conflict', async () => {
    const [a, b] = [await open(), await open()];
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        (i % 2 ? a : b).jobSubmit({ jobs: [spec({ kind: 'k', idempotencyKey: 'raced', payload: { v: i % 3 } })] }).then(
          ([result]) => ({ payload: i % 3, result: result!, error: null }),
          (error: unknown) => ({ payload: i % 3, result: null, error }),
        ),
      ),
    );
    const created = outcomes.filter((outcome) => outcome.result?.created);
    expect(created).toHaveLength(1);
    const winner = created[0]!;
    for (const outcome of outcomes) {
      if (outcome.payload === winner.payload) expect(outcome.result?.id).toBe(winner.result!.id);
      else expect(outcome.error).toMatchObject({ name: 'IdempotencyConflictError', existingId: winner.result!.id });
    }
    expect(await a.jobList({})).toHaveLength(1);
  });

  it('claims a kind past 200,000 due rows of another kind by reading only its own index range', async () => {
    const store = await open();
    const s = `"${store.schema}"`;
    await store.db.query(
      `INSERT INTO ${s}.jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at)
       SELECT 'foreign', 'default', 'null'::jsonb, (g % 3)::smallint, 'pending', $1::timestamptz - (g || ' ms')::interval,
              5, '{}'::jsonb, $1::timestamptz
       FROM generate_series(1, 200000) g`,
      [T0],
    );
    await store.db.query(`ANALYZE ${s}.jobs`);
    const mine = await store.jobSubmit({
      now: T0,
      jobs: [spec({ kind: 'mine' }), spec({ kind: 'mine', priority: 5 })],
    });
    const params = [T0, 'w', 10, 1000, null, ['mine'], [], true];
    const c = await client();
    await c.query('BEGIN');
    const result = await c.query<{ 'QUERY PLAN': [{ Plan: Record<string, number> }] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${store.claimQueries.claimSql}`,
      params,
    );
    await c.query('ROLLBACK');
    const plan = result.rows[0]!['QUERY PLAN'][0].Plan;
    const pages = (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0);
    const text = JSON.stringify(result.rows[0]!['QUERY PLAN']);
    expect(text).toContain('jobs_pending_kind_claim_idx');
    expect(text).not.toContain('"Seq Scan"');
    // 200,000 foreign rows span over 1,000 index pages; the walk probes 3 foreign triples instead.
    expect(pages, `claim touched ${pages} pages`).toBeLessThan(150);
    // Next-run-at walks the same index, never the table.
    const explained = await c.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${store.jobQueries.nextRunAtSql}`, [
      T0,
      null,
      ['mine'],
      [],
    ]);
    const nextPlan = explained.rows.map((row) => row['QUERY PLAN']).join('\n');
    expect(nextPlan, nextPlan).not.toMatch(/Seq Scan on jobs/);
    expect(nextPlan, nextPlan).toMatch(/jobs_pending_kind_claim_idx/);
    const claimed = await store.jobClaim({ owner: 'w', limit: 10, leaseMs: 1000, now: T0, kinds: ['mine'] });
    expect(claimed.map((job) => job.id)).toEqual(mine.map((r) => r.id));
    expect(await store.jobDueCountsByKind({ now: T0 })).toEqual([
      { queue: 'default', kind: 'foreign', count: 200_000 },
    ]);
  });

  it('starts the due range scan past the dead entries that claimed jobs leave at the head of the pending index', async () => {
    const store = await open();
    const s = `"${store.schema}"`;
    await store.db.query(`ALTER TABLE ${s}.jobs SET (autovacuum_enabled = false)`);
    await store.db.query(
      `INSERT INTO ${s}.jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at)
       SELECT 'k', 'default', 'null'::jsonb, 0, 'pending', $1::timestamptz - ((30000 - g) || ' ms')::interval,
              5, '{}'::jsonb, $1::timestamptz
       FROM generate_series(1, 30000) g`,
      [T0],
    );
    await store.db.query(`VACUUM ANALYZE ${s}.jobs`);
    // Claim and complete the 20,000 earliest: their entries stay dead at the head until VACUUM.
    for (let drained = 0; drained < 20_000; drained += 1000) {
      const jobs = await store.jobClaim({ owner: 'w', limit: 1000, leaseMs: 60_000, now: T0, kinds: ['k'] });
      expect(jobs).toHaveLength(1000);
      const outcomes = await store.jobCompleteMany({
        now: T0,
        leases: jobs.map((job) => ({ id: job.id, token: job.token, leaseOwner: job.leaseOwner })),
      });
      expect(outcomes.every((outcome) => outcome === 'done')).toBe(true);
    }
    const c = await client();
    await c.query('BEGIN');
    const result = await c.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${store.claimQueries.claimSql}`,
      [T0, 'w', 10, 1000, null, ['k'], [], true],
    );
    await c.query('ROLLBACK');
    const nodes = flattenPlan(result.rows[0]!['QUERY PLAN'][0].Plan);
    const rangeScan = nodes.find(
      (node) => node['Index Name'] === 'jobs_pending_kind_claim_idx' && /run_at <=/.test(node['Index Cond'] ?? ''),
    );
    const probe = nodes.find(
      (node) => node['Node Type'] === 'Index Only Scan' && node['Index Name'] === 'jobs_pending_kind_claim_idx',
    );
    const pages = (node: PlanNode | undefined) =>
      (node?.['Shared Hit Blocks'] ?? 0) + (node?.['Shared Read Blocks'] ?? 0);
    // The probe that finds the triple steps over the 20,000 dead entries (about 100 index pages);
    // the range scan starts at the triple's first live entry and reads a page or two.
    expect(pages(probe), 'the triple probe walks the dead head').toBeGreaterThan(50);
    expect(rangeScan?.['Index Cond'], JSON.stringify(rangeScan)).toContain('first_run_at');
    expect(pages(rangeScan), `range scan read ${pages(rangeScan)} pages`).toBeLessThan(10);
    const claimed = await store.jobClaim({ owner: 'w', limit: 10, leaseMs: 1000, now: T0, kinds: ['k'] });
    expect(claimed.map((job) => Number(job.id))).toEqual(claimed.map((_, i) => Number(claimed[0]!.id) + i));
    expect(claimed[0]!.runAt.getTime()).toBe(T0.getTime() - (30_000 - 20_001));
  });

  it('searches lapsed leases with plain index scans only when asked, and claims without reading the running index otherwise', async () => {
    const store = await open();
    // No ANALYZE, 5,000 drained (their running-index entries dead, their leases ended by T0 + 10 s)
    // and one job crashed mid-run, its lease lapsing at T0 + 1 s.
    const crashed = await fillWithDeadRunningEntries(store, T0);
    const later = new Date(T0.getTime() + 10_000);
    const plan = async (includeLapsed: boolean): Promise<PlanNode[]> => {
      const c = await client();
      await c.query('BEGIN');
      try {
        if (includeLapsed) await store.claimQueries.planLapsedSearch(c);
        const result = await c.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
          `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${store.claimQueries.claimSql}`,
          [later, 'w', 10, 1000, null, null, [], includeLapsed],
        );
        return flattenPlan(result.rows[0]!['QUERY PLAN'][0].Plan);
      } finally {
        await c.query('ROLLBACK');
      }
    };
    const onRunning = (node: PlanNode) => node['Index Name'] === 'jobs_running_lease_idx';
    // Without the search, neither the running index nor the table's other indexes are scanned for leases.
    const pendingOnly = await plan(false);
    expect(
      pendingOnly.filter((node) => onRunning(node) && (node['Actual Loops'] ?? 0) > 0),
      'a claim without the lapsed search reads no lease index',
    ).toEqual([]);
    // With it, no bitmap scan: only a plain index scan marks the dead entries it passes, so the next
    // search steps over them without visiting the heap (a bitmap heap scan revisits them every time).
    const sweep = await plan(true);
    expect(sweep.filter((node) => /Bitmap/.test(node['Node Type'] ?? '')).map((node) => node['Node Type'])).toEqual([]);
    expect(sweep.some(onRunning), 'the search reads the lease index').toBe(true);
    // And the store's own claim takes the lapsed job over, ahead of the due ones (it ran at T0 - 5 s).
    const claimed = await store.jobClaim({ owner: 'w2', limit: 1, leaseMs: 1000, now: later });
    expect(claimed.map((job) => job.id)).toEqual([crashed.id]);
    expect(claimed[0]!.attempts).toBe(2);
    const skipped = await store.jobClaim({ owner: 'w3', limit: 1, leaseMs: 1000, now: later, includeLapsed: false });
    expect(skipped.map((job) => job.id)).not.toContain(crashed.id);
  });

  it('migrates a version-2 schema holding live keyed jobs to per-(queue, kind) keys and the kind index', async () => {
    db = await createTestDatabase('postgres');
    const c = await client();
    const s = `"${db.schema}"`;
    await c.query(`CREATE SCHEMA ${s}`);
    for (const migration of POSTGRES_MIGRATIONS.filter((m) => m.version <= 2)) await c.query(migration.sql(s));
    await c.query(`CREATE TABLE ${s}.migrations (version integer PRIMARY KEY, name text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())`);
    await c.query(`INSERT INTO ${s}.migrations (version, name) VALUES (1, 'one'), (2, 'two')`);
    await c.query(
      `INSERT INTO ${s}.jobs (kind, queue, payload, state, run_at, max_attempts, retry_policy, created_at, idempotency_key)
       VALUES ('email.send', 'default', '{}', 'pending', $1, 5, '{}', $1, 'order-42')`,
      [T0],
    );
    const store = await open();
    const indexes = await c.query<{ indexname: string }>(
      'SELECT indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname',
      [db.schema],
    );
    const names = indexes.rows.map((row) => row.indexname);
    expect(names).toContain('jobs_pending_kind_claim_idx');
    expect(names).toContain('jobs_idempotency_scope_idx');
    expect(names).not.toContain('jobs_pending_claim_idx');
    expect(names).not.toContain('jobs_idempotency_key_idx');
    const [invoice] = await store.jobSubmit({
      now: T0,
      jobs: [spec({ kind: 'invoice.build', idempotencyKey: 'order-42', payload: {} })],
    });
    expect(invoice).toMatchObject({ created: true });
    const [email] = await store.jobSubmit({
      now: T0,
      jobs: [spec({ kind: 'email.send', idempotencyKey: 'order-42', payload: {} })],
    });
    expect(email).toMatchObject({ created: false, id: '1' });
  });
});
