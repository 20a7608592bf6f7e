/**
 * The batch-submit ceiling of this machine's PostgreSQL, beside Docket's `submitMany`: how fast
 * can 1,000-job inserts into Docket's own table go when the client does nothing at all? The
 * reference the batch-submit target (issue 17: ≥ 100,000 jobs/s, one call in flight) is read
 * against, as the raw-SQL drain is for the drain targets.
 *
 *   npx tsx bench/insert-limit.ts                      8 rounds of 10 calls of each kind
 *   npx tsx bench/insert-limit.ts --rounds 4 --calls 20 --batch 1000
 *
 * Three kinds of call, alternating call by call, each its own autocommit transaction
 * (synchronous_commit on), into a fresh schema migrated by Docket (its indexes, its stored insert):
 * - `submitMany`: Docket's API with the bench's job shape (`{ i }` payloads, every option default);
 *   its client work (validation, ids, parameters, results) is on the clock.
 * - `stored insert`: the very statement and parameters `submitMany` would send for the same jobs
 *   (captured from the store's own query layer before the clock starts, under freshly reserved
 *   ids), replayed: the database's time and one round trip, nothing of Docket's client.
 * - `minimal insert`: one INSERT … SELECT over the ids alone, every other column a constant of the
 *   same shape: the least any scheduler can ask of this table and its indexes per row.
 * Printed: median ms per call and jobs/s for each, and `submitMany` ÷ each reference.
 */
import { parseArgs } from 'node:util';
import pg from 'pg';
import { Docket } from '../src/docket.js';
import { normalizeSubmit } from '../src/job/job-spec.js';
import type { PostgresStore } from '../src/store/postgres/postgres-store.js';
import type { Queryable } from '../src/store/postgres/sql-fragments.js';
import { median } from './stats.js';

const url = process.env.DOCKET_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '8' },
    calls: { type: 'string', default: '10' },
    batch: { type: 'string', default: '1000' },
  },
});
const rounds = Number(args.rounds);
const calls = Number(args.calls);
const batch = Number(args.batch);
for (const [name, value] of [
  ['--rounds', rounds],
  ['--calls', calls],
  ['--batch', batch],
] as const) {
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
}
const SCHEMA = 'insert_limit';
const KIND = 'bench.noop';
const QUEUE = 'default';

const admin = new pg.Client({ connectionString: url });
await admin.connect();

/** `count` ids from the jobs sequence, drawn before the clock starts. */
async function reserveIds(count: number): Promise<string[]> {
  const { rows } = await admin.query<{ id: string }>(
    `SELECT nextval('${SCHEMA}.jobs_id_seq')::text AS id FROM generate_series(1, $1::int)`,
    [count],
  );
  return rows.map((row) => row.id);
}

/** The wake-up horizon the capture passes; any value does, the statement's shape is the same. */
const WAKE_HORIZON_MS = 1000;

/**
 * The statement and parameters the store's own query layer sends to submit `inputs` under `ids`,
 * captured without sending them: the capturing Queryable answers as the insert would (every row
 * written), so the layer takes its usual path and nothing is written.
 */
async function capturedSubmit(store: PostgresStore, inputs: readonly object[], ids: string[]) {
  const jobs = inputs.map((input) => normalizeSubmit(input));
  const sent: { text: string; values: unknown[] }[] = [];
  const capture: Queryable = {
    async query(text: string, values: unknown[] = []) {
      sent.push({ text, values });
      return { rows: [{ written: String(jobs.length), now: new Date() }] } as never;
    },
  };
  await store.jobQueries.submit(capture, { jobs, ids }, WAKE_HORIZON_MS);
  if (sent.length !== 1) throw new Error(`expected one statement per submit, captured ${sent.length}`);
  return sent[0]!;
}

const samples = new Map<string, number[]>();
function record(what: string, ms: number): void {
  const values = samples.get(what) ?? [];
  values.push(ms);
  samples.set(what, values);
}

async function timed(what: string, operation: () => Promise<unknown>): Promise<void> {
  const startedAt = performance.now();
  await operation();
  record(what, performance.now() - startedAt);
}

try {
  await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  const docket = await Docket.open({ url, schema: SCHEMA });
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    // One job through Docket gives the minimal insert its default column values.
    await docket.submit({ kind: KIND, payload: { i: 0 } });
    const template = (
      await admin.query<{ retry_policy: unknown; max_attempts: number }>(
        `SELECT retry_policy, max_attempts FROM ${SCHEMA}.jobs LIMIT 1`,
      )
    ).rows[0]!;
    const retryPolicyJson = JSON.stringify(template.retry_policy);
    const store = docket.store as PostgresStore;
    const minimalInsert = `
      INSERT INTO ${SCHEMA}.jobs (id, kind, queue, payload, priority, state, run_at, token, attempts,
                                  max_attempts, retry_policy, errors, created_at)
      SELECT id, '${KIND}', '${QUEUE}', jsonb_build_object('i', id), 0, 'pending', now(), 0, 0,
             $2::int, $3::jsonb, '[]'::jsonb, now()
      FROM unnest($1::bigint[]) AS id`;

    let next = 0;
    for (let round = 1; round <= rounds; round++) {
      for (let call = 0; call < calls; call++) {
        const inputs = Array.from({ length: batch }, () => ({ kind: KIND, payload: { i: next++ } }));
        const stored = await capturedSubmit(store, inputs, await reserveIds(batch));
        const minimalParams = [`{${(await reserveIds(batch)).join(',')}}`, template.max_attempts, retryPolicyJson];
        const kinds: [string, () => Promise<unknown>][] = [
          ['submitMany', () => docket.submitMany(inputs)],
          ['stored insert', () => db.query(stored.text, stored.values)],
          ['minimal insert', () => db.query(minimalInsert, minimalParams)],
        ];
        // Rotate who goes first, so none always meets the others' freshly dirtied pages.
        for (let k = 0; k < kinds.length; k++) {
          const [what, operation] = kinds[(call + round + k) % kinds.length]!;
          await timed(what, operation);
        }
      }
      const line = [...samples]
        .map(([what, values]) => `${what} ${median(values.slice(-calls)).toFixed(2)} ms`)
        .join(', ');
      console.log(`round ${round}: ${line}`);
    }
  } finally {
    await db.end();
    await docket.close();
    await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  }
  console.log(`\nmedians over ${rounds} × ${calls} calls of ${batch} jobs (one call in flight):`);
  const rate = (what: string) => batch / (median(samples.get(what)!) / 1000);
  for (const what of samples.keys()) {
    console.log(`  ${what.padEnd(15)} ${median(samples.get(what)!).toFixed(2)} ms  ${Math.round(rate(what))} jobs/s`);
  }
  console.log(
    `  submitMany ÷ stored insert ${(rate('submitMany') / rate('stored insert')).toFixed(2)}, ÷ minimal insert ${(rate('submitMany') / rate('minimal insert')).toFixed(2)}`,
  );
} finally {
  await admin.end();
}
