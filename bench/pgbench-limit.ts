/**
 * The limit: pgbench running only the minimal SQL of one job's life (insert, lease update, delete)
 * against a jobs table shaped like a scheduler's, one statement per transaction, single and
 * batched. Its lifecycles per second are what this PostgreSQL can do for any scheduler; a real
 * one's drain is compared against it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { dropDatabase, recreateDatabase, scratchName } from './pg-admin.js';

const DATABASE = scratchName('pgbench');

const SCHEMA_SQL = `
CREATE TABLE jobs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind text NOT NULL,
  queue text NOT NULL DEFAULT 'default',
  payload jsonb NOT NULL,
  priority smallint NOT NULL DEFAULT 0,
  run_at timestamptz NOT NULL DEFAULT now(),
  lease_until timestamptz,
  lease_owner text,
  token bigint NOT NULL DEFAULT 0,
  attempts int NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_claim ON jobs (queue, priority, run_at, id);
`;

/** The claim: due, unleased rows in index order, skipping rows another claimer holds. */
function claimSql(limit: number): string {
  return `UPDATE jobs SET lease_until = now() + interval '30 seconds', lease_owner = 'pgbench', token = token + 1, attempts = attempts + 1
  WHERE id IN (SELECT id FROM jobs WHERE queue = 'default' AND run_at <= now() AND (lease_until IS NULL OR lease_until <= now())
               ORDER BY priority, run_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED)`;
}

/** pgbench scripts: one job per transaction group, or `batch` jobs per statement. */
export function pgbenchScripts(batch: number): { single: string; batched: string } {
  const single = [
    `INSERT INTO jobs (kind, payload) VALUES ('bench', '{"i":1}');`,
    `WITH c AS (${claimSql(1).replace(/\n\s*/g, ' ')} RETURNING id) SELECT coalesce(max(id), 0) AS id FROM c \\gset`,
    'DELETE FROM jobs WHERE id = :id;',
    '',
  ].join('\n');
  const batched = [
    `INSERT INTO jobs (kind, payload) SELECT 'bench', jsonb_build_object('i', g) FROM generate_series(1, ${batch}) g;`,
    `WITH c AS (${claimSql(batch).replace(/\n\s*/g, ' ')} RETURNING id) SELECT coalesce(string_agg(id::text, ','), '0') AS ids FROM c \\gset`,
    'DELETE FROM jobs WHERE id IN (:ids);',
    '',
  ].join('\n');
  return { single, batched };
}

/** One pgbench result. */
export interface PgbenchResult {
  script: 'single' | 'batched';
  batch: number;
  clients: number;
  seconds: number;
  tps: number;
  lifecyclesPerSec: number;
  command: string;
}

function runPgbench(args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('pgbench', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`pgbench exited ${code}: ${out.slice(-500)}`));
    });
  });
}

/** Runs both scripts against a scratch database and drops it afterwards. */
export async function pgbenchLimit(options: {
  seconds: number;
  clients: number;
  threads: number;
  batch: number;
}): Promise<PgbenchResult[]> {
  const url = await recreateDatabase(DATABASE);
  const dir = mkdtempSync(join(tmpdir(), 'docket-pgbench-'));
  try {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(SCHEMA_SQL);
    await client.end();
    const scripts = pgbenchScripts(options.batch);
    const results: PgbenchResult[] = [];
    for (const script of ['single', 'batched'] as const) {
      const file = join(dir, `${script}.sql`);
      writeFileSync(file, scripts[script]);
      const args = [
        '-n',
        '-f',
        file,
        '-T',
        String(options.seconds),
        '-c',
        String(options.clients),
        '-j',
        String(options.threads),
        url,
      ];
      const out = await runPgbench(args, (options.seconds + 30) * 1000);
      const tps = Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(out)?.[1] ?? Number.NaN);
      const batch = script === 'single' ? 1 : options.batch;
      results.push({
        script,
        batch,
        clients: options.clients,
        seconds: options.seconds,
        tps,
        lifecyclesPerSec: tps * batch,
        command: `pgbench ${args.slice(0, -1).join(' ').replace(dir, '$TMP')} <scratch db>`,
      });
    }
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await dropDatabase(DATABASE);
  }
}

/** The schema and scripts, for RESULTS.md. */
export function pgbenchSqlForReport(batch: number): string {
  const scripts = pgbenchScripts(batch);
  return `-- schema\n${SCHEMA_SQL.trim()}\n\n-- single.sql\n${scripts.single}\n-- batched.sql\n${scripts.batched}`;
}
