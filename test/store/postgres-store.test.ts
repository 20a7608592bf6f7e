/**
 * PostgreSQL-specific behaviour of PostgresStore: what the shared conformance suite cannot check
 * on SQLite (concurrent claimers on separate connections, SKIP LOCKED, query plans, advisory-lock
 * migrations, LISTEN/NOTIFY reconnects). Each test gets its own schema.
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JOB_STATES } from '../../src/job/job.js';
import { normalizeSubmit, type SubmitInput } from '../../src/job/job-spec.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PostgresStore, splitSchemaFromUrl } from '../../src/store/postgres/postgres-store.js';
import type { WakeUp } from '../../src/store/store.js';
import { MAX_NAMED_WAKE_UPS } from '../../src/store/wake-up.js';
import { recordPoolStatements } from '../support/pool-statements.js';
import { createTestDatabase, POSTGRES_URL, type TestDatabase } from '../support/stores.js';

const T0 = new Date(100_000);
const NO_CLOSE_CHILD = resolve(import.meta.dirname, 'fixtures/postgres-submit-no-close.ts');

function specs(count: number, input: Partial<SubmitInput> = {}) {
  return Array.from({ length: count }, () => normalizeSubmit({ kind: 'test.job', ...input }));
}

async function withClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Opens stores on a fresh schema and drops everything afterwards. */
function useDatabase() {
  const state: { db: TestDatabase; stores: PostgresStore[] } = { db: undefined as never, stores: [] };
  const open = async (options: { poolSize?: number; wakeHorizonMs?: number } = {}) => {
    const store = await PostgresStore.open(POSTGRES_URL, { schema: state.db.schema, ...options });
    state.stores.push(store);
    return store;
  };
  afterEach(async () => {
    await Promise.all(state.stores.splice(0).map((store) => store.close()));
    await state.db?.drop();
  });
  const fresh = async () => {
    state.db = await createTestDatabase('postgres');
    return state.db;
  };
  return { open, fresh, state };
}

describe('PostgresStore: opening and migrations', () => {
  const ctx = useDatabase();

  it('migrates a fresh schema exactly once when ten processes open it at the same time', async () => {
    const db = await ctx.fresh();
    const stores = await Promise.all(Array.from({ length: 10 }, () => ctx.open({ poolSize: 1 })));
    expect(stores).toHaveLength(10);
    const rows = await withClient(async (client) => {
      const result = await client.query<{ version: number }>(
        `SELECT version FROM "${db.schema}".migrations ORDER BY version`,
      );
      return result.rows.map((row) => row.version);
    });
    expect(rows).toEqual(POSTGRES_MIGRATIONS.map((migration) => migration.version));
    const [first] = await stores[3]!.jobSubmit({ jobs: specs(1) });
    expect(await stores[7]!.jobGet({ id: first!.id })).toMatchObject({ id: first!.id, state: 'pending' });
  });

  it('takes the schema from ?schema= and strips it before connecting', async () => {
    const db = await ctx.fresh();
    expect(splitSchemaFromUrl(`${POSTGRES_URL}?schema=abc&sslmode=disable`)).toEqual({
      url: `${POSTGRES_URL}?sslmode=disable`,
      schema: 'abc',
    });
    const store = await PostgresStore.open(`${POSTGRES_URL}?schema=${db.schema}`);
    ctx.state.stores.push(store);
    expect(store.schema).toBe(db.schema);
    const tables = await withClient(async (client) => {
      const result = await client.query<{ table_name: string }>(
        'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name',
        [db.schema],
      );
      return result.rows.map((row) => row.table_name);
    });
    expect(tables).toEqual(['dead_jobs', 'jobs', 'migrations', 'queues', 'schedules', 'workers']);
    // Migration 5: the jobs table is vacuumed and analysed as a queue table, not at 20 % dead.
    const options = await withClient(async (client) => {
      const result = await client.query<{ reloptions: string[] }>(
        `SELECT c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = $1 AND c.relname = 'jobs'`,
        [db.schema],
      );
      return result.rows[0]?.reloptions;
    });
    expect(options).toEqual(
      expect.arrayContaining([
        'autovacuum_vacuum_scale_factor=0.01',
        'autovacuum_vacuum_threshold=5000',
        'autovacuum_analyze_scale_factor=0.02',
        'autovacuum_analyze_threshold=5000',
      ]),
    );
  });

  it('refuses a schema name that is not a plain identifier', async () => {
    await expect(PostgresStore.open(POSTGRES_URL, { schema: 'bad-name; DROP TABLE x' })).rejects.toThrow(/schema/);
  });

  it('lists exactly JOB_STATES in the state CHECK constraints of the two tables', async () => {
    const db = await ctx.fresh();
    await ctx.open();
    const checks = await withClient(async (client) => {
      const result = await client.query<{ table: string; def: string }>(
        `SELECT c.conrelid::regclass::text AS table, pg_get_constraintdef(c.oid) AS def
           FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
          WHERE n.nspname = $1 AND c.contype = 'c' AND pg_get_constraintdef(c.oid) LIKE '%state%'
            AND pg_get_constraintdef(c.oid) NOT LIKE '%lease_until%'`,
        [db.schema],
      );
      return result.rows;
    });
    const listed = checks.flatMap((row) => [...row.def.matchAll(/'([a-z_]+)'::text/g)].map((match) => match[1]));
    expect(new Set(listed)).toEqual(new Set(JOB_STATES));
  });
});

describe('PostgresStore: claimed rows', () => {
  const ctx = useDatabase();

  it('answers a claim with the same Dates a read parses, and orders run_at within one millisecond by its microseconds', async () => {
    const db = await ctx.fresh();
    const store = await ctx.open();
    // Database clock (microseconds in every timestamp), a schedule slot, and three run_at values
    // inside one millisecond whose microseconds order them against their ids.
    const [plain] = await store.jobSubmit({ jobs: specs(1) });
    await withClient((client) =>
      client.query(
        `UPDATE "${db.schema}".jobs SET schedule_slot = '2030-01-02 03:04:05.678901+00', run_at = now() - interval '1 hour' WHERE id = $1`,
        [plain!.id],
      ),
    );
    const sameMs = await store.jobSubmit({ jobs: specs(3, { queue: 'micro' }) });
    await withClient((client) =>
      client.query(
        `UPDATE "${db.schema}".jobs j SET run_at = '2020-05-06 07:08:09.123000+00'::timestamptz + (s.us * interval '1 microsecond')
         FROM unnest($1::bigint[], $2::int[]) AS s(id, us) WHERE j.id = s.id`,
        [sameMs.map((result) => result.id), [900, 500, 100]],
      ),
    );
    const claimed = await store.jobClaim({ owner: 'dates', limit: 10, leaseMs: 60_000, includeLapsed: false });
    expect(claimed.map((job) => job.id)).toEqual([...sameMs.map((result) => result.id)].reverse().concat(plain!.id));
    const lapsedPathClaim = await store.jobSubmit({ jobs: specs(1, { queue: 'lapsed-path' }) });
    const [viaTransaction] = await store.jobClaim({
      owner: 'dates',
      limit: 1,
      leaseMs: 60_000,
      queues: ['lapsed-path'],
    });
    expect(viaTransaction?.id).toBe(lapsedPathClaim[0]!.id);
    for (const job of [...claimed, viaTransaction!]) {
      const read = await store.jobGet({ id: job.id });
      for (const field of ['runAt', 'leaseUntil', 'scheduleSlot', 'createdAt', 'finishedAt', 'startedAt'] as const) {
        expect(job[field], `${field} of job ${job.id}`).toEqual(read![field]);
      }
      expect(job.startedAt).toBeInstanceOf(Date);
      expect(job.leaseUntil!.getTime()).toBe(job.startedAt!.getTime() + 60_000);
    }
    expect(claimed.at(-1)!.scheduleSlot).toEqual(new Date('2030-01-02T03:04:05.678Z'));
  });
});

describe('PostgresStore: claiming under concurrency', () => {
  const ctx = useDatabase();

  it('hands every job to exactly one of eight claimers on separate connections', async () => {
    await ctx.fresh();
    const stores = await Promise.all(Array.from({ length: 8 }, () => ctx.open({ poolSize: 1 })));
    const total = 2000;
    const submitted = await stores[0]!.jobSubmit({ now: T0, jobs: specs(total, { priority: 0 }) });
    const claimedBy = new Map<string, number>();
    let duplicates = 0;
    await Promise.all(
      stores.map(async (store, worker) => {
        for (;;) {
          const batch = await store.jobClaim({ now: T0, owner: `w${worker}`, limit: 25, leaseMs: 60_000 });
          if (batch.length === 0) return;
          for (const job of batch) {
            if (claimedBy.has(job.id)) duplicates++;
            claimedBy.set(job.id, worker);
            expect(job.token).toBe(1);
          }
          const outcomes = await store.jobCompleteMany({
            now: T0,
            leases: batch.map((job) => ({ id: job.id, token: job.token })),
          });
          expect(outcomes.every((outcome) => outcome === 'done')).toBe(true);
        }
      }),
    );
    expect(duplicates).toBe(0);
    expect(claimedBy.size).toBe(total);
    expect(new Set(claimedBy.values()).size).toBeGreaterThan(1);
    const stats = await stores[0]!.queueStats({ now: T0 });
    expect(stats).toEqual([
      { queue: 'default', scheduled: 0, available: 0, running: 0, done: total, cancelled: 0, dead: 0, unhandled: 0 },
    ]);
    expect(submitted.every((result) => claimedBy.has(result.id))).toBe(true);
  });

  it('never gives two claimers live leases on one job while leases lapse and are retaken', async () => {
    await ctx.fresh();
    const stores = await Promise.all(Array.from({ length: 4 }, () => ctx.open({ poolSize: 1 })));
    await stores[0]!.jobSubmit({ now: T0, jobs: specs(200, { maxAttempts: 100 }) });
    // Each round moves pinned time past every lease, so every job is retaken each round.
    const leases = new Map<string, { token: number; until: number }[]>();
    for (let round = 0; round < 3; round++) {
      const now = new Date(T0.getTime() + round * 10_000);
      const batches = await Promise.all(
        stores.map((store, worker) => store.jobClaim({ now, owner: `w${worker}`, limit: 200, leaseMs: 5_000 })),
      );
      const claimed = batches.flat();
      expect(claimed).toHaveLength(200);
      for (const job of claimed) {
        const history = leases.get(job.id) ?? [];
        const previous = history.at(-1);
        if (previous) expect(previous.until).toBeLessThanOrEqual(now.getTime());
        expect(job.token).toBe(round + 1);
        history.push({ token: job.token, until: job.leaseUntil.getTime() });
        leases.set(job.id, history);
      }
    }
  });

  it('skips a row another transaction has locked instead of waiting for it', async () => {
    await ctx.fresh();
    const store = await ctx.open();
    const [locked] = await store.jobSubmit({ now: T0, jobs: specs(1, { priority: -5 }) });
    await store.jobSubmit({ now: T0, jobs: specs(3) });
    const holder = new pg.Client({ connectionString: POSTGRES_URL });
    const claimer = new pg.Client({ connectionString: POSTGRES_URL });
    await Promise.all([holder.connect(), claimer.connect()]);
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM "${store.schema}".jobs WHERE id = $1 FOR UPDATE`, [locked!.id]);
      // Waiting on the lock would hit this timeout and fail the claim.
      await claimer.query("SET statement_timeout = '2s'");
      const claimed = await store.claimQueries.claim(claimer, { now: T0, owner: 'w', limit: 10, leaseMs: 1000 });
      expect(claimed.map((job) => job.id)).not.toContain(locked!.id);
      expect(claimed).toHaveLength(3);
      await holder.query('ROLLBACK');
      const rest = await store.jobClaim({ now: T0, owner: 'w', limit: 10, leaseMs: 1000 });
      expect(rest.map((job) => job.id)).toEqual([locked!.id]);
    } finally {
      await Promise.all([holder.end(), claimer.end()]);
    }
  });

  it('maps one idempotency key to one job when two connections submit it at once', async () => {
    await ctx.fresh();
    const [a, b] = await Promise.all([ctx.open({ poolSize: 2 }), ctx.open({ poolSize: 2 })]);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        (i % 2 ? a! : b!).jobSubmit({ jobs: specs(1, { idempotencyKey: 'same-key' }) }),
      ),
    );
    const flat = results.flat();
    expect(new Set(flat.map((result) => result.id)).size).toBe(1);
    expect(flat.filter((result) => result.created)).toHaveLength(1);
  });
});

describe('PostgresStore: submits with idempotency keys and reserved ids', () => {
  const ctx = useDatabase();

  async function submitReserved(store: PostgresStore, jobs: ReturnType<typeof specs>) {
    const ids = await store.jobReserveIds({ count: jobs.length });
    return { ids, results: await store.jobSubmit({ jobs, ids }) };
  }

  const keyed = (key: string, payload: Record<string, unknown> = {}) =>
    normalizeSubmit({ kind: 'test.job', idempotencyKey: key, payload });
  const plainInserts = (sent: string[]) => sent.filter((text) => text.includes('insert_jobs_')).length;

  it('writes a batch of new keys with the plain insert, and answers held keys, repeats and conflicts as before', async () => {
    await ctx.fresh();
    const store = await ctx.open();
    const sent = recordPoolStatements(store);

    const fresh = await submitReserved(store, [keyed('a', { n: 1 }), keyed('b'), specs(1)[0]!]);
    expect(fresh.results.map((result) => [result.id, result.created])).toEqual(fresh.ids.map((id) => [id, true]));
    expect(plainInserts(sent)).toBe(1);

    // A key a live job holds aborts the plain insert, and the batch is answered whole: the held
    // key by its job, the new key created.
    const held = await submitReserved(store, [keyed('a', { n: 1 }), keyed('c')]);
    expect(held.results.map((result) => [result.id, result.created])).toEqual([
      [fresh.ids[0], false],
      [held.ids[1], true],
    ]);
    // The same key with another payload refuses the batch, and nothing of it is written.
    await expect(submitReserved(store, [keyed('d'), keyed('a', { n: 2 })])).rejects.toMatchObject({
      code: 'idempotency_conflict',
      existingId: fresh.ids[0],
    });
    const written = await store.db.query<{ key: string }>(
      `SELECT idempotency_key AS key FROM "${store.schema}".jobs WHERE idempotency_key IS NOT NULL ORDER BY 1`,
    );
    expect(written.rows.map((row) => row.key)).toEqual(['a', 'b', 'c']);

    // A key repeated within one batch never tries the plain insert: the repeat is answered by the first.
    const before = plainInserts(sent);
    const repeated = await submitReserved(store, [keyed('e'), keyed('e')]);
    expect(repeated.results.map((result) => [result.id, result.created])).toEqual([
      [repeated.ids[0], true],
      [repeated.ids[0], false],
    ]);
    expect(plainInserts(sent)).toBe(before);
  });

  it('sends keyed submits straight to the statement that answers held keys after meeting one, until a submit creates every job', async () => {
    await ctx.fresh();
    const store = await ctx.open();
    const [first] = (await submitReserved(store, [keyed('held')])).results;
    const sent = recordPoolStatements(store);

    // Meets the held key: one plain insert, aborted.
    const again = await submitReserved(store, [keyed('held'), keyed('new-1')]);
    expect(again.results.map((result) => result.created)).toEqual([false, true]);
    expect(again.results[0]!.id).toBe(first!.id);
    expect(plainInserts(sent)).toBe(1);
    // The next keyed submit goes straight to the full statement, which creates every job...
    expect((await submitReserved(store, [keyed('new-2')])).results[0]!.created).toBe(true);
    expect(plainInserts(sent)).toBe(1);
    // ...so the one after it tries the plain insert again.
    expect((await submitReserved(store, [keyed('new-3')])).results[0]!.created).toBe(true);
    expect(plainInserts(sent)).toBe(2);
    // Submits without keys always take the plain insert.
    await submitReserved(store, specs(2));
    expect(plainInserts(sent)).toBe(3);
  });

  it('waits for a concurrent writer of the same key and answers its job once it commits', async () => {
    await ctx.fresh();
    const store = await ctx.open();
    const ids = await store.jobReserveIds({ count: 1 });
    await withClient(async (client) => {
      await client.query('BEGIN');
      const [theirs] = await store.jobSubmit({ jobs: [keyed('racing')], transaction: client });
      const ours = store.jobSubmit({ jobs: [keyed('racing')], ids });
      // Our insert waits on the uncommitted holder of the key.
      const raced = await Promise.race([
        ours.then(() => 'answered'),
        new Promise((r) => setTimeout(r, 300, 'waiting')),
      ]);
      expect(raced).toBe('waiting');
      await client.query('COMMIT');
      const [answer] = await ours;
      expect(answer).toMatchObject({ id: theirs!.id, created: false });
    });
  });
});

describe('PostgresStore: query plans', () => {
  const ctx = useDatabase();

  it('claims by index range scans with 200,000 future-dated jobs in the table', async () => {
    const db = await ctx.fresh();
    const store = await ctx.open();
    const s = `"${db.schema}"`;
    await withClient(async (client) => {
      await client.query(
        `INSERT INTO ${s}.jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at)
         SELECT 'future', 'default', 'null'::jsonb, (g % 3)::smallint, 'pending',
                $1::timestamptz + (g || ' seconds')::interval, 5, '{}'::jsonb, $1::timestamptz
         FROM generate_series(1, 200000) g`,
        [new Date(T0.getTime() + 3600_000)],
      );
      await client.query(`ANALYZE ${s}.jobs`);
    });
    const due = await store.jobSubmit({ now: T0, jobs: [...specs(2), ...specs(1, { priority: 2 })] });

    const explain = async (sql: string, params: unknown[]) =>
      withClient(async (client) => {
        const result = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, params);
        return result.rows.map((row) => row['QUERY PLAN']).join('\n');
      });
    const claimPlan = await explain(store.claimQueries.claimSql, [T0, 'w', 10, 1000, null, null, [], true]);
    if (process.env.DOCKET_PRINT_PLANS) console.log(claimPlan);
    expect(claimPlan, claimPlan).not.toMatch(/Seq Scan on jobs/);
    expect(claimPlan, claimPlan).toMatch(/jobs_pending_kind_claim_idx/);
    const queuePlan = await explain(store.claimQueries.claimSql, [T0, 'w', 10, 1000, ['default'], null, [], true]);
    expect(queuePlan, queuePlan).not.toMatch(/Seq Scan on jobs/);
    const nextPlan = await explain(store.jobQueries.nextRunAtSql, [T0, null, null, []]);
    if (process.env.DOCKET_PRINT_PLANS) console.log(nextPlan);
    expect(nextPlan, nextPlan).not.toMatch(/Seq Scan on jobs/);

    // Run the claim for real under EXPLAIN ANALYZE (rolled back): a walk over the 200,000 future
    // index entries touches well over a thousand pages; bounded range scans touch a few dozen.
    const pagesTouched = await withClient(async (client) => {
      await client.query('BEGIN');
      try {
        const result = await client.query<{ 'QUERY PLAN': [{ Plan: Record<string, number> }] }>(
          `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${store.claimQueries.claimSql}`,
          [T0, 'w', 10, 1000, null, null, [], true],
        );
        const plan = result.rows[0]!['QUERY PLAN'][0].Plan;
        return (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0);
      } finally {
        await client.query('ROLLBACK');
      }
    });
    if (process.env.DOCKET_PRINT_PLANS) console.log(`claim touched ${pagesTouched} pages`);
    expect(pagesTouched).toBeLessThan(300);

    const claimed = await store.jobClaim({ now: T0, owner: 'w', limit: 10, leaseMs: 1000 });
    expect(claimed.map((job) => job.id)).toEqual(due.map((result) => result.id));
    // Leased jobs become claimable when their lease ends; once done, the first future job is next.
    expect(await store.jobNextRunAt({ now: T0 })).toEqual(new Date(T0.getTime() + 1000));
    await store.jobCompleteMany({ now: T0, leases: claimed.map((job) => ({ id: job.id, token: job.token })) });
    expect(await store.jobNextRunAt({ now: T0 })).toEqual(new Date(T0.getTime() + 3601_000));
  });
});

describe('PostgresStore: wake-ups', () => {
  const ctx = useDatabase();

  it('notifies once per queue and kind of a submit, with its earliest run time, only for jobs due within the horizon', async () => {
    await ctx.fresh();
    const store = await ctx.open({ wakeHorizonMs: 5000 });
    const wakeUps: WakeUp[] = [];
    const unsubscribe = await store.subscribe((wakeUp) => wakeUps.push(wakeUp));
    const now = await store.now();
    const soon = new Date(now.getTime() + 1000);
    const marker = new Date(now.getTime() + 2000);
    // Far in the future: no notify. A batch due soon: one notify per (queue, kind) carrying its
    // earliest run_at; a kind whose jobs are all beyond the horizon gets none. Notifications
    // arrive in commit order, so once the marker's arrives the earlier ones are in.
    await store.jobSubmit({ jobs: specs(3, { delayMs: 3600_000 }) });
    await store.jobSubmit({
      jobs: [
        normalizeSubmit({ kind: 'a', runAt: new Date(soon.getTime() + 500) }),
        normalizeSubmit({ kind: 'b', runAt: soon }),
        normalizeSubmit({ kind: 'a', runAt: new Date(soon.getTime() + 100) }),
        normalizeSubmit({ kind: 'a', queue: 'emails', runAt: soon }),
        normalizeSubmit({ kind: 'later', runAt: new Date(now.getTime() + 3600_000) }),
      ],
    });
    await store.jobSubmit({ jobs: [normalizeSubmit({ kind: 'marker', runAt: marker })] });
    await expect.poll(() => wakeUps.some((wakeUp) => wakeUp.runAt?.getTime() === marker.getTime())).toBe(true);
    const byName = (x: WakeUp, y: WakeUp) => `${x.queue}/${x.kind}`.localeCompare(`${y.queue}/${y.kind}`);
    expect(wakeUps.slice(0, -1).sort(byName)).toEqual([
      { runAt: new Date(soon.getTime() + 100), queue: 'default', kind: 'a' },
      { runAt: soon, queue: 'default', kind: 'b' },
      { runAt: soon, queue: 'emails', kind: 'a' },
    ]);
    expect(wakeUps.at(-1)).toEqual({ runAt: marker, queue: 'default', kind: 'marker' });
    await unsubscribe();
  });

  it('names no queue or kind when a statement spans more than MAX_NAMED_WAKE_UPS of them, and names released jobs', async () => {
    await ctx.fresh();
    const store = await ctx.open();
    const wakeUps: WakeUp[] = [];
    const unsubscribe = await store.subscribe((wakeUp) => wakeUps.push(wakeUp));
    const now = await store.now();
    const kinds = Array.from({ length: MAX_NAMED_WAKE_UPS + 1 }, (_, i) => `kind.${i}`);
    await store.jobSubmit({
      jobs: kinds.map((kind, i) => normalizeSubmit({ kind, runAt: new Date(now.getTime() - 1000 + i) })),
    });
    await expect.poll(() => wakeUps.length).toBe(1);
    expect(wakeUps).toEqual([{ runAt: new Date(now.getTime() - 1000) }]);
    // A released lease wakes the workers of its own queue and kind.
    const [claimed] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: 30_000, kinds: ['kind.3'] });
    await store.jobRelease({ id: claimed!.id, token: claimed!.token, leaseOwner: claimed!.leaseOwner });
    await expect.poll(() => wakeUps.length).toBe(2);
    expect(wakeUps[1]).toMatchObject({ queue: 'default', kind: 'kind.3' });
    await unsubscribe();
  });

  it('reconnects after its backend is terminated, says "look again", and keeps delivering', async () => {
    const db = await ctx.fresh();
    const store = await ctx.open();
    const wakeUps: WakeUp[] = [];
    const unsubscribe = await store.subscribe((wakeUp) => wakeUps.push(wakeUp));
    const listenQuery = `LISTEN "docket.${db.schema}.wake"`;
    const terminated = await withClient(async (client) => {
      const result = await client.query<{ ok: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
          WHERE application_name = 'docket-listener' AND query = $1`,
        [listenQuery],
      );
      return result.rows;
    });
    expect(terminated).toEqual([{ ok: true }]);
    await expect.poll(() => wakeUps.some((wakeUp) => wakeUp.runAt === null), { timeout: 5000 }).toBe(true);
    const [job] = await store.jobSubmit({ jobs: specs(1) });
    await expect.poll(() => wakeUps.some((wakeUp) => wakeUp.runAt?.getTime() === job!.runAt.getTime())).toBe(true);
    await unsubscribe();
    // Unsubscribing the last listener closes its connection.
    await expect
      .poll(async () =>
        withClient(async (client) => {
          const result = await client.query('SELECT 1 FROM pg_stat_activity WHERE query = $1', [listenQuery]);
          return result.rowCount;
        }),
      )
      .toBe(0);
  });

  it('survives the server closing an idle pooled connection', async () => {
    await ctx.fresh();
    const store = await ctx.open({ poolSize: 1 });
    const result = await store.db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const pid = result.rows[0]!.pid;
    await withClient((client) => client.query('SELECT pg_terminate_backend($1)', [pid]));
    // Without the pool's 'error' handler the idle client's error would crash this process.
    await expect.poll(async () => (await store.now().catch(() => null)) instanceof Date).toBe(true);
    const after = await store.db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    expect(after.rows[0]!.pid).not.toBe(pid);
  });
});

describe('PostgresStore: idle connections', () => {
  const ctx = useDatabase();

  it('keeps one pooled connection open through a quiet spell longer than the pool idle timeout', async () => {
    await ctx.fresh();
    const store = await ctx.open({ poolSize: 3 });
    // Three statements at once open three connections.
    const opened = await Promise.all(
      [1, 2, 3].map(() => store.db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid, pg_sleep(0.2)')),
    );
    const pids = opened.map((result) => result.rows[0]!.pid);
    expect(new Set(pids).size).toBe(3);
    // pg-pool closes a connection idle for 10 s, all but the one the store keeps.
    const alive = () =>
      withClient(async (client) => {
        const result = await client.query<{ pid: number }>(
          'SELECT pid FROM pg_stat_activity WHERE pid = ANY($1::int[])',
          [pids],
        );
        return result.rows.map((row) => row.pid);
      });
    await new Promise((resolve) => setTimeout(resolve, 10_500));
    await expect.poll(async () => (await alive()).length, { timeout: 5_000 }).toBe(1);
    const [kept] = await alive();
    // The next statement after the quiet spell runs on it: no new server process, no new plan.
    const next = await store.db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    expect(next.rows[0]!.pid).toBe(kept);
  }, 30_000);

  it('lets a process that submits and never closes its Docket exit at once', async () => {
    const db = await ctx.fresh();
    const child = spawn(process.execPath, ['--import', 'tsx', NO_CLOSE_CHILD, POSTGRES_URL, db.schema as string], {
      cwd: resolve(import.meta.dirname, '../..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<{ code: number | null; at: number }>((resolveExit) =>
      child.on('exit', (code) => resolveExit({ code, at: Date.now() })),
    );
    const printed = await new Promise<{ line: string; at: number }>((resolveLine, reject) => {
      createInterface({ input: child.stdout }).once('line', (line) => resolveLine({ line, at: Date.now() }));
      child.once('exit', () => reject(new Error(`child exited before printing: ${stderr}`)));
    });
    const { id } = JSON.parse(printed.line) as { id: string };
    const exit = await Promise.race([
      exited,
      new Promise<null>((resolveLate) => setTimeout(() => resolveLate(null), 20_000)),
    ]);
    if (exit === null) child.kill('SIGKILL');
    expect(exit, `still running 20 s after its submit: ${stderr}`).not.toBeNull();
    expect(exit!.code, stderr).toBe(0);
    // The kept connection is idle and does not hold the process, nor does the pool's idle timer
    // (before: it exited only once pg-pool closed its last idle connection, 10 s later).
    expect(exit!.at - printed.at).toBeLessThan(5_000);
    // And the job it was told about is stored.
    const store = await ctx.open();
    expect((await store.jobGet({ id }))?.state).toBe('pending');
  }, 40_000);
});

describe('PostgresStore: throughput', () => {
  const ctx = useDatabase();
  let report = '';
  beforeAll(() => {
    report = '';
  });
  afterAll(() => {
    if (report) console.log(report);
  });

  it('drains 20,000 jobs by claim 100 / completeMany 100', async () => {
    await ctx.fresh();
    const store = await ctx.open();
    const total = 20_000;
    for (let i = 0; i < total; i += 5000) await store.jobSubmit({ now: T0, jobs: specs(5000) });
    const started = performance.now();
    let done = 0;
    for (;;) {
      const batch = await store.jobClaim({ now: T0, owner: 'w', limit: 100, leaseMs: 30_000 });
      if (batch.length === 0) break;
      const outcomes = await store.jobCompleteMany({
        now: T0,
        leases: batch.map((job) => ({ id: job.id, token: job.token })),
      });
      done += outcomes.filter((outcome) => outcome === 'done').length;
    }
    const seconds = (performance.now() - started) / 1000;
    report = `claim 100 + completeMany 100, one connection: ${total} jobs in ${seconds.toFixed(2)} s = ${Math.round(total / seconds)} jobs/s`;
    expect(done).toBe(total);
  });
});
