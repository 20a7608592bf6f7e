/**
 * `docket migrate`: applies pending migrations, or with --dry-run / --sql shows them without
 * changing anything (not even creating the database). A store built by running the printed
 * script is one Docket's own migration runner accepts as complete.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import { inspectStore } from '../../src/store/open-store.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { createTestDatabase, runSqlScript, type StoreKind, storeKinds, type TestDatabase } from '../support/stores.js';
import { describeRun, runDocketInProcess } from './run-docket.js';

const LATEST: Record<StoreKind, number[]> = {
  sqlite: SQLITE_MIGRATIONS.map((m) => m.version),
  postgres: POSTGRES_MIGRATIONS.map((m) => m.version),
  'postgres-pgbouncer': POSTGRES_MIGRATIONS.map((m) => m.version),
  'postgres-sharded': POSTGRES_MIGRATIONS.map((m) => m.version),
};

/** Whether the database exists at all: the SQLite file, or the PostgreSQL schema. */
async function databaseExists(db: TestDatabase): Promise<boolean> {
  return (await inspectStore(db.url)).exists;
}

describe.each(storeKinds())('docket migrate on %s', (kind) => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'docket-migrate-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('--dry-run and --sql list the pending migrations and create nothing', async () => {
    const db = await createTestDatabase(kind);
    try {
      const dry = await runDocketInProcess(['migrate', '--dry-run', '--db', db.url]);
      expect(dry.code, describeRun(dry)).toBe(0);
      expect(dry.stdout).toContain(`${LATEST[kind].length} pending migrations (nothing applied)`);
      const json = await runDocketInProcess(['migrate', '--dry-run', '--json', '--db', db.url]);
      const listed = JSON.parse(json.stdout) as { pending: { version: number }[]; functions: string[] };
      expect(listed.pending.map((m) => m.version)).toEqual(LATEST[kind]);
      // PostgreSQL: the statement functions opening would create (decision 0013) are listed too.
      const functionPrefixes =
        kind === 'sqlite'
          ? []
          : [
              'claim_merge_due',
              'claim_pending',
              'claim_searching',
              'insert_jobs',
              'complete_jobs',
              'complete_delete_jobs',
              'heartbeat_jobs',
              'fail_jobs',
            ];
      expect(listed.functions.map((name) => name.replace(/_[0-9a-f]{12}$/, ''))).toEqual(functionPrefixes);
      const sql = await runDocketInProcess(['migrate', '--sql', '--db', db.url]);
      expect(sql.code, describeRun(sql)).toBe(0);
      expect(sql.stdout).toContain('CREATE TABLE');
      for (const name of listed.functions)
        expect(sql.stdout).toContain(`CREATE OR REPLACE FUNCTION "${db.schema}"."${name}"`);
      expect(await databaseExists(db)).toBe(false);
      if (kind === 'sqlite') expect(existsSync(db.url.replace(/^sqlite:/, ''))).toBe(false);
    } finally {
      await db.drop();
    }
  });

  it('applies the migrations once, then says it is up to date', async () => {
    const db = await createTestDatabase(kind);
    try {
      const first = await runDocketInProcess(['migrate', '--db', db.url]);
      expect(first.code, describeRun(first)).toBe(0);
      expect(first.stdout).toContain(`applied migrations ${LATEST[kind].join(', ')}`);
      const again = await runDocketInProcess(['migrate', '--db', db.url]);
      expect(again.stdout).toContain('is up to date');
      const inspection = await inspectStore(db.url);
      expect(inspection.appliedVersions).toEqual(LATEST[kind]);
      expect(inspection.pending).toEqual([]);
      // Read-only commands now accept the store.
      const stats = await runDocketInProcess(['stats', '--db', db.url]);
      expect(stats.code, describeRun(stats)).toBe(0);
    } finally {
      await db.drop();
    }
  });

  it('prints a script that, run by hand, leaves a store Docket accepts as fully migrated', async () => {
    const db = await createTestDatabase(kind);
    try {
      const sql = await runDocketInProcess(['migrate', '--sql', '--db', db.url]);
      await runSqlScript(db, sql.stdout);
      const inspection = await inspectStore(db.url);
      expect(inspection.appliedVersions).toEqual(LATEST[kind]);
      expect(inspection.missingFunctions).toEqual([]);
      const after = await runDocketInProcess(['migrate', '--dry-run', '--db', db.url]);
      expect(after.stdout).toContain('is up to date');
      // Docket opens it without applying anything and works on it.
      const docket = await Docket.open({ url: db.url });
      try {
        const { id } = await docket.submit({ kind: 'after.script' });
        expect((await docket.getJob(id))?.kind).toBe('after.script');
      } finally {
        await docket.close();
      }
      expect((await inspectStore(db.url)).appliedVersions).toEqual(LATEST[kind]);
    } finally {
      await db.drop();
    }
  });
});

describe('docket migrate on a file that is not Docket’s', () => {
  it('refuses to add Docket tables to it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'docket-migrate-other-'));
    try {
      const path = join(dir, 'other.db');
      const other = new Database(path);
      other.exec('CREATE TABLE invoices (id INTEGER PRIMARY KEY)');
      other.close();
      const result = await runDocketInProcess(['migrate', '--db', `sqlite:${path}`]);
      expect(result.code, describeRun(result)).toBe(1);
      expect(result.stderr).toContain('exists but has no Docket schema');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
