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
    // Once first, undone: the session's first call plans the merge function's cursor (two triples
    // of 'mine'), reading catalog pages that are not the claim's.
    await c.query('SAVEPOINT warm');
    await c.query(store.claimQueries.claimSql, params);
    await c.query('ROLLBACK TO SAVEPOINT warm');
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
      (node) => node['Node Type'] === 'Index Scan' && node['Index Name'] === 'jobs_pending_kind_claim_idx',
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

  it('claims the best n of many kinds and priorities while locking only the candidates that can make the cut', async () => {
    const store = await open();
    const s = `"${store.schema}"`;
    // 60 kinds interleaved in time (row g is kind g % 60, due g ms before T0's last 1,200 ms), and
    // one kind spread over 30 priorities: 90 triples, 1,800 due rows.
    await store.db.query(
      `INSERT INTO ${s}.jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at)
       SELECT 'kind.' || (g % 60), 'default', 'null'::jsonb, 10, 'pending', $1::timestamptz - ((1200 - g) || ' ms')::interval,
              5, '{}'::jsonb, $1::timestamptz
       FROM generate_series(0, 1199) g
       UNION ALL
       SELECT 'ranked', 'default', 'null'::jsonb, (g % 30)::smallint, 'pending', $1::timestamptz - ((600 - g) || ' ms')::interval,
              5, '{}'::jsonb, $1::timestamptz
       FROM generate_series(0, 599) g
       UNION ALL
       SELECT 'few.' || (g % 5), 'default', 'null'::jsonb, 20, 'pending', $1::timestamptz - ((200 - g) || ' ms')::interval,
              5, '{}'::jsonb, $1::timestamptz
       FROM generate_series(0, 199) g
       UNION ALL
       SELECT 'fill.' || (g / 40), 'default', 'null'::jsonb, 20, 'pending', $1::timestamptz - ((200 - g) || ' ms')::interval,
              5, '{}'::jsonb, $1::timestamptz
       FROM generate_series(0, 199) g`,
      [T0],
    );
    await store.db.query(`ANALYZE ${s}.jobs`);
    // The rows a claim holds until it commits (those it takes and any other candidate it locked):
    // what another claimer's SKIP LOCKED cannot see while the claim's transaction is open.
    const lockedBy = async (limit: number, kinds: string[]): Promise<number> => {
      const [claimer, other] = [await client(), await client()];
      await claimer.query('BEGIN');
      try {
        const claimed = await claimer.query(store.claimQueries.claimPendingOnlySql, [
          T0,
          'w',
          limit,
          1000,
          null,
          kinds,
          [],
        ]);
        expect(claimed.rows).toHaveLength(limit);
        const free = await other.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM (SELECT 1 FROM ${s}.jobs WHERE state = 'pending' AND kind = ANY($1) FOR UPDATE SKIP LOCKED) f`,
          [kinds],
        );
        const all = await other.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${s}.jobs WHERE state = 'pending' AND kind = ANY($1)`,
          [kinds],
        );
        return all.rows[0]!.n - free.rows[0]!.n;
      } finally {
        await claimer.query('ROLLBACK');
      }
    };
    const interleaved = Array.from({ length: 60 }, (_, k) => `kind.${k}`);
    // The first kind's 10 rows, then each other kind's range up to the 10th kind's first row holds
    // one row: 19 locks, not 60 kinds × 10.
    expect(await lockedBy(10, interleaved)).toBe(19);
    // Priorities: the triple ranked r can place at most 10 - r + 1 rows: 10 + 9 + … + 1, not 30 × 10.
    expect(await lockedBy(10, ['ranked'])).toBe(55);
    // Fewer triples than the claim's limit: merged (decision 0026), each row locked as it is taken.
    // 5 kinds interleaved (40 rows each): the 50 taken, and the next row of the 4 kinds not taken last.
    const few = Array.from({ length: 5 }, (_, k) => `few.${k}`);
    expect(await lockedBy(50, few)).toBe(54);
    // 5 kinds one after another: the first kind's 40 rows, the second's first 10; the rest never opened.
    const fill = Array.from({ length: 5 }, (_, k) => `fill.${k}`);
    expect(await lockedBy(50, fill)).toBe(50);
    for (const kinds of [few, fill]) {
      const best = await store.db.query<{ id: string }>(
        `SELECT j.id::text AS id FROM ${s}.jobs j WHERE j.state = 'pending' AND j.kind = ANY($1) ORDER BY j.priority, j.run_at, j.id LIMIT 50`,
        [kinds],
      );
      const merged = await store.jobClaim({
        owner: 'w',
        limit: 50,
        leaseMs: 1000,
        now: T0,
        kinds,
        includeLapsed: false,
      });
      expect(merged.map((job) => job.id)).toEqual(best.rows.map((row) => row.id));
    }
    // And the claim hands out the best 10 of them all by (priority, run_at, id), as before.
    const expected = await store.db.query<{ id: string }>(
      `SELECT j.id::text AS id FROM ${s}.jobs j WHERE j.state = 'pending' ORDER BY j.priority, j.run_at, j.id LIMIT 10`,
    );
    const claimed = await store.jobClaim({ owner: 'w', limit: 10, leaseMs: 1000, now: T0, includeLapsed: false });
    expect(claimed.map((job) => job.id)).toEqual(expected.rows.map((row) => row.id));
    expect(claimed.map((job) => `${job.kind}/${job.priority}`)).toEqual(Array(10).fill('ranked/0'));
    const next = await store.db.query<{ id: string }>(
      `SELECT j.id::text AS id FROM ${s}.jobs j WHERE j.state = 'pending' AND j.kind LIKE 'kind.%' ORDER BY j.run_at, j.id LIMIT 25`,
    );
    const ofKinds = await store.jobClaim({ owner: 'w', limit: 25, leaseMs: 1000, now: T0, kinds: interleaved });
    expect(ofKinds.map((job) => job.id)).toEqual(next.rows.map((row) => row.id));
  });

  it('fills a claim that races another for the same first rows from the rows behind them', async () => {
    const store = await open();
    const s = `"${store.schema}"`;
    await store.db.query(
      `INSERT INTO ${s}.jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at)
       SELECT 'kind', 'default', 'null'::jsonb, 0, 'pending', $1::timestamptz - ((100 - g) || ' ms')::interval,
              5, '{}'::jsonb, $1::timestamptz
       FROM generate_series(0, 99) g`,
      [T0],
    );
    await store.db.query(
      `INSERT INTO ${s}.jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at)
       SELECT 'many.' || (g % 20), 'other', 'null'::jsonb, 0, 'pending', $1::timestamptz - ((600 - g) || ' ms')::interval,
              5, '{}'::jsonb, $1::timestamptz
       FROM generate_series(0, 599) g`,
      [T0],
    );
    await store.db.query(`ANALYZE ${s}.jobs`);
    // Two claimers whose statements saw the same first rows: the first holds its claim open (its
    // transaction not yet committed), the second skips those rows and must still fill its own.
    for (const [queue, limit] of [
      ['default', 1],
      ['default', 10],
      ['other', 1],
      ['other', 10],
      ['other', 100],
    ] as const) {
      const [first, second] = [await client(), await client()];
      await first.query('BEGIN');
      try {
        const params = (owner: string) => [T0, owner, limit, 1000, [queue], null, []];
        // A claim that leases nothing answers one all-NULL row (claimOrDefer reads it as none).
        const claimedBy = async (c: pg.Client, owner: string) =>
          (await c.query<{ id: string | null }>(store.claimQueries.claimPendingOnlySql, params(owner))).rows
            .map((row) => row.id)
            .filter((id) => id !== null);
        const held = await claimedBy(first, 'first');
        const raced = await claimedBy(second, 'second');
        expect(held, `${queue}, ${limit}`).toHaveLength(limit);
        expect(raced, `${queue}, ${limit}: the racing claim`).toHaveLength(limit);
        expect(raced.filter((id) => held.includes(id))).toEqual([]);
      } finally {
        await first.query('ROLLBACK');
        await store.db.query(
          `UPDATE ${s}.jobs SET state = 'pending', lease_owner = NULL, lease_until = NULL WHERE queue = $1`,
          [queue],
        );
      }
    }
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
        await store.claimQueries.planClaimInTransaction(c);
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
