/**
 * The measurement behind docs/decisions/0009-adaptive-prefetch.md: what one claim costs on a large
 * backlog once many jobs have finished and vacuum has not run yet, by claim size.
 *
 *   npx tsx bench/claim-cliff.ts                       100,000 jobs, 75,000 drained first
 *   npx tsx bench/claim-cliff.ts --jobs 1000000 --drained 750000
 *   npx tsx bench/claim-cliff.ts --drain-lease-ms 1    leases of the drained jobs already ended
 *
 * A job leaves the pending index's predicate when it is claimed (state pending → running), so its
 * entry at the head of `jobs_pending` (queue, kind, priority, run_at, id) is dead from then on, and
 * stays there, marked dead by the first scan that meets it, until VACUUM removes it. Every claim
 * starts at the head and steps over those entries: a claim of 10 pays for all of them per 10
 * jobs, a claim of 510 per 510. This script submits `--jobs` due jobs into a fresh schema with
 * autovacuum off for the table, drains `--drained` of them the way workers do (claims of 500, each
 * followed by the fenced completion's UPDATE), then prints EXPLAIN (ANALYZE, BUFFERS) of the claim
 * at 10 and 510 jobs (each rolled back), before and after a VACUUM: with the lapsed-lease search
 * (twice: the first walk marks the dead entries it passes, the second shows what the worker's
 * every-250-ms search then costs) and without it (the worker's other claims). The schema is dropped at the end.
 * `--plans` prints each plan in full (with planning time), for the decision record.
 */
import { parseArgs } from 'node:util';
import pg from 'pg';
import { Docket } from '../src/docket.js';
import { PostgresClaimQueries } from '../src/store/postgres/claim-queries.js';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '100000' },
    drained: { type: 'string', default: '75000' },
    plans: { type: 'boolean', default: false },
    'drain-lease-ms': { type: 'string', default: '30000' },
  },
});
const jobs = Number(values.jobs);
const drainedTarget = Number(values.drained);
const drainLeaseMs = Number(values['drain-lease-ms']);
if (!Number.isInteger(jobs) || !Number.isInteger(drainedTarget) || drainedTarget >= jobs || drainedTarget < 0) {
  throw new Error('--jobs and --drained must be integers with 0 <= drained < jobs');
}
const url = process.env.DOCKET_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `cliff_${process.pid}`;
const KIND = 'bench.noop';
// The drain's leases end at once (--drain-lease-ms, default 30 s), as they have for every job
// finished more than a lease ago in a long drain: the lapsed-lease search then walks their dead
// running-index entries, which the default 30 s hides in a drain shorter than that.
const claimParams = (limit: number, leaseMs = 30_000, includeLapsed = true) => [
  null,
  'bench',
  limit,
  leaseMs,
  null,
  [KIND],
  [],
  includeLapsed,
];

const admin = new pg.Client({ connectionString: url });
await admin.connect();
try {
  const docket = await Docket.open({ url, schema });
  for (let i = 0; i < jobs; i += 5000) {
    const size = Math.min(5000, jobs - i);
    await docket.submitMany(Array.from({ length: size }, (_, k) => ({ kind: KIND, payload: { i: i + k } })));
  }
  await docket.close();
  await admin.query(`ALTER TABLE ${schema}.jobs SET (autovacuum_enabled = false)`);
  await admin.query(`VACUUM ANALYZE ${schema}.jobs`);
  const claims = new PostgresClaimQueries(schema);
  let drained = 0;
  while (drained < drainedTarget) {
    const claimed = await admin.query<{ id: string | null }>(claims.claimSql, claimParams(500, drainLeaseMs, false));
    const ids = claimed.rows.flatMap((row) => (row.id === null ? [] : [row.id]));
    if (ids.length === 0) break;
    await admin.query(
      `UPDATE ${schema}.jobs SET state = 'done', finished_at = now(), lease_until = NULL WHERE id = ANY($1::bigint[])`,
      [ids],
    );
    drained += ids.length;
  }
  const explain = async (limit: number, includeLapsed = true): Promise<string> => {
    await admin.query('BEGIN');
    try {
      // As the store runs a claim that searches lapsed leases: plain index scans, which mark the
      // dead entries they pass (PostgresClaimQueries.planClaimInTransaction).
      await claims.planClaimInTransaction(admin);
      const plan = await admin.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN (ANALYZE, BUFFERS, SUMMARY, TIMING OFF, COSTS OFF) ${claims.claimSql}`,
        claimParams(limit, 30_000, includeLapsed),
      );
      if (values.plans) console.log(plan.rows.map((row) => `    ${row['QUERY PLAN']}`).join('\n'));
      const lines = plan.rows.map((row) => row['QUERY PLAN'].trim());
      const buffers = lines.find((line) => line.startsWith('Buffers:')) ?? '?';
      const hits = Number(/hit=(\d+)/.exec(buffers)?.[1] ?? Number.NaN);
      const time = lines.find((line) => line.startsWith('Execution Time')) ?? '?';
      const planning = lines.find((line) => line.startsWith('Planning Time')) ?? '?';
      return `${buffers} (${(hits / limit).toFixed(1)} per job), ${time}, ${planning}`;
    } finally {
      await admin.query('ROLLBACK');
    }
  };
  console.log(`${jobs - drained} pending, ${drained} finished, no vacuum since: their entries lead the pending index`);
  const both = async () => {
    for (const limit of [10, 510]) {
      console.log(`  claim of ${String(limit).padStart(3)}, lapsed search: ${await explain(limit)}`);
      console.log(`  claim of ${String(limit).padStart(3)}, lapsed again:  ${await explain(limit)}`);
      console.log(`  claim of ${String(limit).padStart(3)}, pending only:  ${await explain(limit, false)}`);
    }
  };
  await both();
  await admin.query(`VACUUM ${schema}.jobs`);
  console.log('after VACUUM:');
  await both();
} finally {
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
}
