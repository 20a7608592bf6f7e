/**
 * PostgreSQL-specific behaviour of recurring schedules and paused queues: what the conformance
 * suite cannot force on SQLite (row locks held by another connection, many claimers on separate
 * pools racing on one schedule, query plans with a paused queue).
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { normalizeSubmit } from '../../src/job/job-spec.js';
import { normalizeScheduleSpec } from '../../src/schedule/schedule.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { recordPoolStatements } from '../support/pool-statements.js';
import { createTestDatabase, POSTGRES_URL, type TestDatabase } from '../support/stores.js';

const LEASE_MS = 30_000;

function at(hours: number, minutes: number, seconds = 0): Date {
  return new Date(Date.UTC(2026, 4, 1, hours, minutes, seconds));
}

describe('PostgresStore: recurring schedules under concurrency', () => {
  let db: TestDatabase | undefined;
  const stores: PostgresStore[] = [];

  async function open(poolSize = 4): Promise<PostgresStore> {
    db ??= await createTestDatabase('postgres');
    const store = await PostgresStore.open(POSTGRES_URL, { schema: db.schema, poolSize });
    stores.push(store);
    return store;
  }

  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
    await db?.drop();
    db = undefined;
  });

  it('gives one job per slot when eight claimers on separate pools race on one every-second schedule', async () => {
    const claimers = await Promise.all(Array.from({ length: 8 }, () => open(2)));
    const store = claimers[0]!;
    const spec = normalizeScheduleSpec({
      id: 'race',
      cron: '* * * * * *',
      job: { kind: 'race.tick', queue: 'race' },
      misfire: { policy: 'catch_up', maxCatchUpRuns: 3 },
    });
    await store.scheduleUpsert({ spec, now: at(12, 0, 0) });
    const claimedSlots: number[] = [];
    // Thirty seconds of pinned time, two claims per claimer per second, all at once; every few
    // seconds the time jumps so catch-up runs are planned too.
    for (let second = 1; second <= 30; second += second % 7 === 0 ? 3 : 1) {
      const now = at(12, 0, second);
      const batches = await Promise.all(
        claimers.flatMap((claimer, i) => [
          claimer.jobClaim({ owner: `c${i}a`, limit: 2, leaseMs: LEASE_MS, now }),
          claimer.jobClaim({ owner: `c${i}b`, limit: 2, leaseMs: LEASE_MS, now }),
          claimer.scheduleRepair({ now }),
        ]),
      );
      for (const batch of batches) {
        if (Array.isArray(batch)) claimedSlots.push(...batch.map((job) => (job.scheduleSlot as Date).getTime()));
      }
    }
    const rows = await store.db.query<{ slot: Date; n: string }>(
      `SELECT schedule_slot AS slot, count(*) AS n FROM "${store.schema}".jobs
       WHERE schedule_id = 'race' GROUP BY schedule_slot HAVING count(*) > 1`,
    );
    expect(rows.rows).toEqual([]);
    expect(new Set(claimedSlots).size).toBe(claimedSlots.length);
    expect(claimedSlots.length).toBeGreaterThan(20);
  });

  it('claims a schedule spike in transactions without first sending the one-statement claim, and one-off jobs after it', async () => {
    const store = await open();
    for (let i = 0; i < 12; i++) {
      const spec = normalizeScheduleSpec({ id: `tenant-${i}`, cron: '0 0 * * *', job: { kind: 'report' } });
      await store.scheduleUpsert({ spec, now: at(23, 0) });
    }
    const day = 86_400_000;
    // The next midnight, five seconds in: every schedule's first run is due.
    const now = new Date(at(0, 0, 5).getTime() + day);
    // Count the statements sent on the pool (the one-statement claim).
    const sent = recordPoolStatements(store);
    const claimed: string[] = [];
    for (let round = 0; round < 4; round++) {
      const jobs = await store.jobClaim({ owner: 'w', limit: 3, leaseMs: LEASE_MS, now, includeLapsed: false });
      claimed.push(...jobs.map((job) => job.scheduleId as string));
    }
    const oneStatementClaims = () => sent.filter((text) => text.includes('claim_pending_')).length;
    // The first claim meets recurring runs and declines them in one statement; the next three go
    // straight to the transaction.
    expect(oneStatementClaims()).toBe(1);
    expect(claimed.sort()).toEqual(Array.from({ length: 12 }, (_, i) => `tenant-${i}`).sort());
    // Every claimed run planned its schedule's next one (the midnight after).
    const next = await store.db.query<{ n: string }>(
      `SELECT count(*) AS n FROM "${store.schema}".jobs WHERE state = 'pending' AND run_at = $1`,
      [new Date(at(0, 0).getTime() + 2 * day)],
    );
    expect(Number(next.rows[0]!.n)).toBe(12);
    // One-off jobs after the spike: the claim that finds no recurring run goes back to one statement.
    await store.jobSubmit({
      jobs: Array.from({ length: 4 }, (_, i) => normalizeSubmit({ kind: 'mail', payload: { i } })),
      now,
    });
    const first = await store.jobClaim({ owner: 'w', limit: 2, leaseMs: LEASE_MS, now, includeLapsed: false });
    const before = oneStatementClaims();
    const second = await store.jobClaim({ owner: 'w', limit: 2, leaseMs: LEASE_MS, now, includeLapsed: false });
    expect([...first, ...second].map((job) => job.kind)).toEqual(['mail', 'mail', 'mail', 'mail']);
    expect(oneStatementClaims()).toBe(before + 1);
  });

  it('drops a never-started run that a claim held while its schedule was paused', async () => {
    const store = await open();
    const spec = normalizeScheduleSpec({ id: 'held', cron: '* * * * *', job: { kind: 'held.tick', queue: 'held' } });
    await store.scheduleUpsert({ spec, now: at(12, 0, 30) });
    const [run] = await store.jobList({ queue: 'held' });
    const holder = new pg.Client({ connectionString: POSTGRES_URL });
    await holder.connect();
    try {
      // A claim in flight holds the run's row lock at the instant the pause deletes runs.
      await holder.query('BEGIN');
      await holder.query(`SELECT id FROM "${store.schema}".jobs WHERE id = $1 FOR UPDATE`, [run!.id]);
      const paused = await store.schedulePause({ id: 'held', now: at(12, 0, 40) });
      expect(paused?.paused).toBe(true);
      expect((await store.jobList({ queue: 'held' })).map((job) => job.id)).toEqual([run!.id]);
      await holder.query('ROLLBACK');
    } finally {
      await holder.end();
    }
    // The run escaped the pause; the claim that finds it sees the paused schedule and drops it.
    expect(await store.jobClaim({ owner: 'w', limit: 5, leaseMs: LEASE_MS, now: at(12, 1) })).toEqual([]);
    expect(await store.jobList({ queue: 'held' })).toEqual([]);
  });

  it('keeps the claim an index range scan with a paused queue and recurring runs in the table', async () => {
    const store = await open();
    await store.jobSubmit({
      jobs: Array.from({ length: 200 }, (_, i) =>
        normalizeSubmit({ kind: 'k', queue: i % 2 ? 'open' : 'shut', runAt: at(12, 0) }),
      ),
    });
    // Future-dated rows make the table big enough that only an index plan is sensible.
    for (let i = 0; i < 20; i++) {
      await store.jobSubmit({
        jobs: Array.from({ length: 1000 }, () => normalizeSubmit({ kind: 'k', queue: 'open', runAt: at(23, 0) })),
      });
    }
    await store.queuePause({ name: 'shut' });
    await store.scheduleUpsert({
      spec: normalizeScheduleSpec({ id: 'plan', cron: '* * * * *', job: { kind: 'k', queue: 'open' } }),
      now: at(11, 0),
    });
    await store.db.query(`ANALYZE "${store.schema}".jobs`);
    for (const sql of [store.claimQueries.claimSql, store.claimQueries.claimInTransactionSql]) {
      const plan = await store.db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, [
        at(12, 5),
        'w',
        10,
        1000,
        null,
        null,
        [],
        true,
      ]);
      const text = plan.rows.map((row) => row['QUERY PLAN']).join('\n');
      expect(text, text).not.toMatch(/Seq Scan on jobs/);
      expect(text, text).toMatch(/jobs_pending_kind_claim_idx/);
    }
    const claimed = await store.jobClaim({ owner: 'w', limit: 200, leaseMs: LEASE_MS, now: at(12, 5) });
    expect(new Set(claimed.map((job) => job.queue))).toEqual(new Set(['open']));
    expect(claimed).toHaveLength(101);
  });
});
