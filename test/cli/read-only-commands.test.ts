/**
 * Commands that read never write: stats, jobs list/show, dead list, schedules list/show, queues
 * list and workers list open an existing store only. A mistyped --db or schema is an error naming
 * the URL (exit 1), and neither a SQLite file nor a PostgreSQL schema appears. --schema and
 * DOCKET_SCHEMA pick the schema on every command; --connect-timeout bounds the wait for a down
 * database.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import { INTERACTIVE_CONNECT_TIMEOUT_MS } from '../../src/settings.js';
import { POSTGRES_URL, storeKinds } from '../support/stores.js';
import { describeRun, REPO_ROOT, runDocket, runDocketInProcess } from './run-docket.js';

/** Every read-only command, with the arguments it needs. */
const READ_COMMANDS: string[][] = [
  ['stats'],
  ['stats', '--kinds'],
  ['jobs', 'list'],
  ['jobs', 'show', '1'],
  ['dead', 'list'],
  ['schedules', 'list'],
  ['schedules', 'show', 'nightly'],
  ['queues', 'list'],
  ['workers', 'list'],
];

/** Commands that change existing records: they need an existing store too. */
const WRITE_COMMANDS: string[][] = [
  ['jobs', 'cancel', '1'],
  ['dead', 'retry', '1'],
  ['dead', 'purge', '--id', '1'],
  ['queues', 'pause', 'q'],
  ['schedules', 'pause', 'nightly'],
];

async function pgQuery<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

async function schemaExists(schema: string): Promise<boolean> {
  const rows = await pgQuery<{ n: number }>('SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1', [schema]);
  return rows[0]?.n === 1;
}

describe('on SQLite', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'docket-read-only-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses a file that does not exist, naming the URL, and creates nothing', async () => {
    const path = join(dir, 'typo.db');
    for (const args of [...READ_COMMANDS, ...WRITE_COMMANDS]) {
      const result = await runDocketInProcess([...args, '--db', `sqlite:${path}`]);
      expect(result.code, `${args.join(' ')}\n${describeRun(result)}`).toBe(1);
      expect(result.stderr).toContain(`no Docket store at sqlite:${path}: the file ${path} does not exist`);
      expect(result.stdout).toBe('');
      expect(existsSync(path), args.join(' ')).toBe(false);
    }
  });

  it('refuses a SQLite file that is not a Docket store, and adds no table to it', async () => {
    const path = join(dir, 'other-app.db');
    const other = new Database(path);
    other.exec('CREATE TABLE invoices (id INTEGER PRIMARY KEY)');
    other.close();
    for (const args of READ_COMMANDS) {
      const result = await runDocketInProcess([...args, '--db', `sqlite:${path}`]);
      expect(result.code, describeRun(result)).toBe(1);
      expect(result.stderr).toContain(`sqlite:${path} has no Docket schema`);
    }
    const check = new Database(path, { readonly: true });
    const tables = check.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all();
    check.close();
    expect(tables).toEqual(['invoices']);
  });

  it('reads an existing store, and the default docket.db is not created by a read', async () => {
    const url = `sqlite:${join(dir, 'real.db')}`;
    const docket = await Docket.open({ url });
    await docket.submit({ kind: 'read.me', delayMs: 60_000 });
    await docket.close();
    for (const args of READ_COMMANDS) {
      const result = await runDocketInProcess([...args, '--db', url]);
      // Job 1 exists; schedule "nightly" does not, so its show exits 1 ("not found").
      expect(result.code, describeRun(result)).toBe(args.join(' ') === 'schedules show nightly' ? 1 : 0);
      expect(result.stderr).not.toContain('no Docket store');
    }
    const defaultDb = await runDocket(['stats'], { cwd: dir, entry: [join(REPO_ROOT, 'bin/docket.js')] });
    expect(defaultDb.code, describeRun(defaultDb)).toBe(1);
    expect(defaultDb.stderr).toContain('no Docket store at sqlite:docket.db');
    expect(existsSync(join(dir, 'docket.db'))).toBe(false);
  }, 30_000);
});

describe.runIf(storeKinds().includes('postgres'))('on PostgreSQL', () => {
  const schema = `t_ro_${randomBytes(5).toString('hex')}`;
  const empty = `t_ro_empty_${randomBytes(5).toString('hex')}`;
  afterAll(async () => {
    await pgQuery(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pgQuery(`DROP SCHEMA IF EXISTS ${empty} CASCADE`);
  });

  it('refuses a schema that does not exist, by --schema or ?schema=, and creates no schema', async () => {
    const missing = `t_ro_missing_${randomBytes(5).toString('hex')}`;
    for (const args of [...READ_COMMANDS, ...WRITE_COMMANDS]) {
      const viaFlag = await runDocketInProcess([...args, '--db', POSTGRES_URL, '--schema', missing]);
      expect(viaFlag.code, describeRun(viaFlag)).toBe(1);
      expect(viaFlag.stderr).toContain(`no Docket store at schema "${missing}" of ${POSTGRES_URL}`);
    }
    const viaUrl = await runDocketInProcess(['stats', '--db', `${POSTGRES_URL}?schema=${missing}`]);
    expect(viaUrl.code, describeRun(viaUrl)).toBe(1);
    expect(viaUrl.stderr).toContain(`schema "${missing}"`);
    expect(await schemaExists(missing)).toBe(false);
  });

  it('refuses a schema without Docket tables and creates none in it', async () => {
    await pgQuery(`CREATE SCHEMA ${empty}`);
    const result = await runDocketInProcess(['jobs', 'list', '--db', POSTGRES_URL, '--schema', empty]);
    expect(result.code, describeRun(result)).toBe(1);
    expect(result.stderr).toContain(`schema "${empty}" of ${POSTGRES_URL} has no Docket schema`);
    const tables = await pgQuery('SELECT tablename FROM pg_tables WHERE schemaname = $1', [empty]);
    expect(tables).toEqual([]);
  });

  it('reads the schema named by --schema, and by DOCKET_SCHEMA in the environment', async () => {
    const docket = await Docket.open({ url: POSTGRES_URL, schema });
    await docket.submit({ kind: 'schema.job', queue: 'schema-q', delayMs: 60_000 });
    await docket.close();
    const viaFlag = await runDocketInProcess(['stats', '--json', '--db', POSTGRES_URL, '--schema', schema]);
    expect(viaFlag.code, describeRun(viaFlag)).toBe(0);
    expect((JSON.parse(viaFlag.stdout) as { queue: string }[]).map((row) => row.queue)).toEqual(['schema-q']);
    const viaEnv = await runDocket(['jobs', 'list', '--json', '--db', POSTGRES_URL], {
      env: { DOCKET_SCHEMA: schema },
    });
    expect(viaEnv.code, describeRun(viaEnv)).toBe(0);
    expect((JSON.parse(viaEnv.stdout) as { kind: string }[]).map((job) => job.kind)).toEqual(['schema.job']);
  }, 30_000);

  it('gives up on a database that is down within the --connect-timeout, naming the URL', async () => {
    const down = 'postgres://postgres@127.0.0.1:1/test';
    const startedAt = Date.now();
    const result = await runDocketInProcess(['stats', '--db', down, '--connect-timeout', '600']);
    const tookMs = Date.now() - startedAt;
    expect(result.code, describeRun(result)).toBe(1);
    expect(result.stderr).toContain(`cannot open the store ${down}`);
    // Under the interactive default (INTERACTIVE_CONNECT_TIMEOUT_MS, 5 s) with room for a loaded
    // machine's 1-2 s stall: a --connect-timeout ignored would take the default's 5 s.
    expect(INTERACTIVE_CONNECT_TIMEOUT_MS).toBe(5000);
    expect(tookMs).toBeGreaterThanOrEqual(500);
    expect(tookMs).toBeLessThan(4000);
    const fast = Date.now();
    const immediate = await runDocketInProcess(['stats', '--db', down, '--connect-timeout-ms', '0']);
    expect(immediate.code).toBe(1);
    expect(Date.now() - fast).toBeLessThan(3000);
  });
});
