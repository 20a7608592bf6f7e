/**
 * What the database's backends are doing while something else runs: samples `pg_stat_activity`
 * every few milliseconds and tallies each active client backend by its wait event and the head of
 * its statement, so a drain's database time splits into running (no wait event: on a CPU or
 * waiting for one) and each kind of wait (WAL flushes, relation extension, buffer locks, row locks).
 *
 *   npx tsx bench/wait-events.ts --seconds 60 &
 *   npx tsx bench/worker-cpu.ts --baseline raw-sql --jobs 100000 --prefetch auto --rounds 3 --concurrency 24
 *
 * Statements are grouped by their first 48 characters, which name Docket's stored statements
 * (`claim_pending_…`, `complete_jobs_…` in a schema of the run) and the raw-SQL reference's own
 * SQL apart. A sample shows who was active at one instant, so a group's count over the samples in
 * which any backend was active is how many of its backends were active on average then. The
 * sampler's own connection is left out; it costs a few per cent of one core.
 */
import { parseArgs } from 'node:util';
import pg from 'pg';
import { ADMIN_URL } from './pg-admin.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    'interval-ms': { type: 'string', default: '2' },
    top: { type: 'string', default: '30' },
  },
});

function positive(flag: string, text: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${flag} must be a positive number, got ${text}`);
  return value;
}

const seconds = positive('seconds', args.seconds);
const intervalMs = positive('interval-ms', args['interval-ms']);
const top = positive('top', args.top);

const client = new pg.Client({ connectionString: ADMIN_URL });
await client.connect();
const tally = new Map<string, number>();
const activeCounts = new Map<number, number>();
let samples = 0;
let busySamples = 0;
const stopAt = Date.now() + seconds * 1000;
while (Date.now() < stopAt) {
  const { rows } = await client.query<{ wait: string; head: string }>(
    `SELECT coalesce(wait_event_type || '/' || wait_event, 'running') AS wait,
            left(regexp_replace(query, '\\s+', ' ', 'g'), 48) AS head
       FROM pg_stat_activity
      WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' AND state = 'active'`,
  );
  samples += 1;
  if (rows.length > 0) busySamples += 1;
  activeCounts.set(rows.length, (activeCounts.get(rows.length) ?? 0) + 1);
  for (const row of rows) {
    const key = `${row.wait.padEnd(22)} ${row.head}`;
    tally.set(key, (tally.get(key) ?? 0) + 1);
  }
  await new Promise((resolve) => setTimeout(resolve, intervalMs));
}
await client.end();

console.log(`${samples} samples, ${busySamples} with an active backend`);
console.log(
  `active backends per sample: ${[...activeCounts]
    .sort((a, b) => a[0] - b[0])
    .map(([count, n]) => `${count}: ${n}`)
    .join(', ')}`,
);
console.log('samples  per busy sample  wait                   statement');
for (const [key, count] of [...tally].sort((a, b) => b[1] - a[1]).slice(0, top)) {
  console.log(`${String(count).padStart(7)}  ${(count / Math.max(1, busySamples)).toFixed(2).padStart(15)}  ${key}`);
}
