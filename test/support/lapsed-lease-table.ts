/**
 * A jobs table on which the lapsed-lease search is easy to plan badly, shared by the plan tests of
 * the claim (test/store/postgres-routing.test.ts, test/store/postgres-stored-statements.test.ts).
 */
import { expect } from 'vitest';
import type { ClaimedJob } from '../../src/job/job.js';
import type { PostgresStore } from '../../src/store/postgres/postgres-store.js';

/**
 * Fills `store`'s jobs table (autovacuum off for it) with 10,000 pending jobs due before `t0` and
 * no ANALYZE, as for a backlog inserted while autovacuum has not come by: the planner then takes
 * `lease_until <= now` for a third of the table and, left to itself, plans a bitmap scan, which
 * never marks a dead index entry. Then 5,000 are claimed without the lapsed search and finished at
 * `t0`: their running-index entries are dead and their 1 s leases have ended by `t0` + 10 s, so
 * `lease_until <= now` takes them all in. Last, one job is claimed by owner `gone` and never
 * finished (a crash mid-run): its lease lapses at `t0` + 1 s. Answers that job.
 */
export async function fillWithDeadRunningEntries(store: PostgresStore, t0: Date): Promise<ClaimedJob> {
  const s = `"${store.schema}"`;
  await store.db.query(`ALTER TABLE ${s}.jobs SET (autovacuum_enabled = false)`);
  await store.db.query(
    `INSERT INTO ${s}.jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at)
     SELECT 'k', 'default', 'null'::jsonb, 0, 'pending', $1::timestamptz - ((10000 - g) || ' ms')::interval,
            5, '{}'::jsonb, $1::timestamptz
     FROM generate_series(1, 10000) g`,
    [t0],
  );
  for (let drained = 0; drained < 5_000; drained += 500) {
    const jobs = await store.jobClaim({ owner: 'w', limit: 500, leaseMs: 1000, now: t0, includeLapsed: false });
    expect(jobs).toHaveLength(500);
    await store.jobCompleteMany({
      now: t0,
      leases: jobs.map((job) => ({ id: job.id, token: job.token, leaseOwner: job.leaseOwner })),
    });
  }
  const [crashed] = await store.jobClaim({ owner: 'gone', limit: 1, leaseMs: 1000, now: t0, includeLapsed: false });
  expect(crashed).toBeDefined();
  return crashed!;
}
