/**
 * SQLite-specific routing behaviour: migrating a version-2 file that already holds live keyed
 * jobs, and the kind-filtered claim past a large backlog of another kind (its plan is checked in
 * sqlite-store.test.ts; its cost in bench/claim-foreign-kinds.ts). The shared behaviour is in
 * test/conformance/.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { normalizeSubmit, type SubmitInput } from '../../src/job/job-spec.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';

function spec(input: SubmitInput) {
  return normalizeSubmit(input, () => 0);
}

describe('SqliteStore: routing', () => {
  const dirs: string[] = [];
  const stores: SqliteStore[] = [];

  function tempFile(): string {
    const dir = mkdtempSync(join(tmpdir(), 'docket-sqlite-routing-'));
    dirs.push(dir);
    return join(dir, 'docket.db');
  }

  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('migrates a version-2 file holding a live keyed job to per-(queue, kind) keys and the kind index', async () => {
    const path = tempFile();
    const raw = new Database(path);
    raw.exec(
      `CREATE TABLE docket_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`,
    );
    for (const migration of SQLITE_MIGRATIONS.filter((m) => m.version <= 2)) {
      raw.exec(migration.sql);
      raw.prepare('INSERT INTO docket_migrations VALUES (?, ?, 0)').run(migration.version, migration.name);
    }
    raw
      .prepare(
        `INSERT INTO jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at, idempotency_key)
         VALUES ('email.send', 'default', '{}', 0, 'pending', 1000, 5, '{}', 0, 'order-42')`,
      )
      .run();
    raw.close();

    const store = await SqliteStore.open(path);
    stores.push(store);
    expect(store.appliedMigrations).toEqual([3, 4, 5]);
    const check = new Database(path, { readonly: true });
    const indexes = check
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs' ORDER BY name`)
      .pluck()
      .all();
    check.close();
    expect(indexes).toContain('jobs_pending_kind_claim');
    expect(indexes).toContain('jobs_idempotency_scope');
    expect(indexes).not.toContain('jobs_pending_claim');
    expect(indexes).not.toContain('jobs_idempotency_key');
    const [invoice] = await store.jobSubmit({
      jobs: [spec({ kind: 'invoice.build', idempotencyKey: 'order-42', payload: {} })],
    });
    expect(invoice).toMatchObject({ created: true });
    const [email] = await store.jobSubmit({
      jobs: [spec({ kind: 'email.send', idempotencyKey: 'order-42', payload: {} })],
    });
    expect(email).toMatchObject({ created: false, id: '1' });
  });

  it('claims its kind past 300,000 due rows of another kind, and counts those as due', async () => {
    const path = tempFile();
    const store = await SqliteStore.open(path);
    stores.push(store);
    const raw = new Database(path);
    raw.exec(`WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 300000)
      INSERT INTO jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at)
      SELECT 'foreign', 'default', 'null', x % 3, 'pending', 1000 - x, 5, '{}', 0 FROM n`);
    raw.close();
    const now = new Date(10_000);
    const mine = await store.jobSubmit({ now, jobs: [spec({ kind: 'mine' }), spec({ kind: 'mine', priority: 7 })] });
    const claim = () => store.jobClaim({ owner: 'w', limit: 10, leaseMs: 1000, now, kinds: ['mine'] });
    const claimed = await claim();
    expect(claimed.map((job) => job.id)).toEqual(mine.map((result) => result.id));
    expect(await claim()).toEqual([]);
    // Both of its jobs are leased until 11 s; the foreign backlog neither wakes nor counts for it.
    expect(await store.jobNextRunAt({ now, kinds: ['mine'] })).toEqual(new Date(11_000));
    expect(await store.jobDueCountsByKind({ now })).toEqual([{ queue: 'default', kind: 'foreign', count: 300_000 }]);
    const foreign = await store.jobList({ kind: 'foreign', states: ['running'] });
    expect(foreign).toEqual([]);
  }, 60_000);
});
