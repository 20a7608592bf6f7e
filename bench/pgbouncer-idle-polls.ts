/**
 * The measurement behind docs/operations.md ("pgbouncer", wake-ups): what one idle worker with
 * `listenUrl: false` costs the pooler, by poll interval. Starts a pgbouncer in transaction mode
 * (test/support/pgbouncer.ts: as user postgres, ports 6432-6439) in front of the test database,
 * opens a Docket through it on a fresh schema, starts one worker with nothing to do and counts
 * the queries pgbouncer forwarded (`SHOW STATS`, total_query_count) over a window.
 *
 *   npx tsx bench/pgbouncer-idle-polls.ts                       default poll, then 250 and 1000 ms
 *   npx tsx bench/pgbouncer-idle-polls.ts --window-ms 30000 --poll 100 --poll 500
 *
 * The first 2 s after start (registration, the first claims, the schedule sweep) are left out.
 * The schema is dropped and the bouncer stopped afterwards. DOCKET_BENCH_PG_URL names the direct
 * database (default: the tests' postgres://postgres@127.0.0.1:5432/test).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { Docket } from '../src/index.js';
import { startPgbouncer, targetOf } from '../test/support/pgbouncer.js';

const { values } = parseArgs({
  options: {
    'window-ms': { type: 'string', default: '10000' },
    poll: { type: 'string', multiple: true },
  },
});
const windowMs = Number(values['window-ms']);
const polls: (number | undefined)[] = values.poll?.map(Number) ?? [undefined, 250, 1000];
const directUrl = process.env.DOCKET_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const database = new URL(directUrl).pathname.slice(1);
const schema = `bench_idle_${process.pid}`;

const bouncer = await startPgbouncer(targetOf(directUrl));

/** Queries pgbouncer has forwarded for the database so far. */
async function forwardedQueries(): Promise<number> {
  const admin = new pg.Client({ connectionString: bouncer.url('pgbouncer') });
  await admin.connect();
  try {
    const stats = await admin.query<{ database: string; total_query_count: string }>('SHOW STATS');
    return Number(stats.rows.find((row) => row.database === database)?.total_query_count ?? 0);
  } finally {
    await admin.end();
  }
}

try {
  for (const pollIntervalMs of polls) {
    const docket = await Docket.open({ url: bouncer.url(database), schema, listenUrl: false });
    docket.handle('bench.idle', async () => {});
    const worker = docket.worker(pollIntervalMs === undefined ? {} : { pollIntervalMs });
    await worker.start();
    await sleep(2000);
    const before = await forwardedQueries();
    const startedAt = Date.now();
    await sleep(windowMs);
    const perSecond = ((await forwardedQueries()) - before) / ((Date.now() - startedAt) / 1000);
    const label = pollIntervalMs === undefined ? 'default (50 ms without LISTEN)' : `${pollIntervalMs} ms`;
    console.log(`idle worker, listenUrl false, pollIntervalMs ${label}: ${perSecond.toFixed(1)} queries/s`);
    await worker.stop();
    await docket.close();
  }
} finally {
  const client = new pg.Client({ connectionString: directUrl });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await client.end();
  await bouncer.stop();
}
