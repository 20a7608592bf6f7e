/**
 * SQLite-specific behaviour of SqliteStore: what the shared conformance suite cannot check
 * because it depends on the file, the processes sharing it and SQLite's planner. Every test uses
 * a real file (or `:memory:`) and real child processes; nothing is mocked.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { normalizeSubmit } from '../../src/job/job-spec.js';
import { checkBulkApplyParams, checkCountParams } from '../../src/store/dashboard-params.js';
import * as claimSql from '../../src/store/sqlite/claim-queries.js';
import { SqliteDashboardQueries } from '../../src/store/sqlite/dashboard-queries.js';
import { ForeignSubmitWatcher } from '../../src/store/sqlite/foreign-submit-watcher.js';
import * as jobSql from '../../src/store/sqlite/job-queries.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { LEASE_EXPIRED_MESSAGE, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { WakeUp } from '../../src/store/store.js';
import { planBulkReads, planListReads } from '../support/dashboard-plan-reads.js';

const CHILD = resolve(import.meta.dirname, 'fixtures/sqlite-child.ts');
const REPO = resolve(import.meta.dirname, '../..');

const dirs: string[] = [];
const stores: SqliteStore[] = [];
const children: ChildProcess[] = [];

function tempFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'docket-sqlite-'));
  dirs.push(dir);
  return join(dir, 'docket.db');
}

async function openStore(path: string, options: Parameters<typeof SqliteStore.open>[1] = {}): Promise<SqliteStore> {
  const store = await SqliteStore.open(path, options);
  stores.push(store);
  return store;
}

function spec(input: Parameters<typeof normalizeSubmit>[0]) {
  return normalizeSubmit(input, () => 0);
}

/** A child running the fixture, with its stdout as a queue of lines to await. */
function startChild(args: string[]): { child: ChildProcess; nextLine: () => Promise<string> } {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], {
    cwd: REPO,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines: string[] = [];
  const waiters: ((line: string) => void)[] = [];
  let exited = false;
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const waiter = waiters.shift();
    if (waiter) waiter(line);
    else lines.push(line);
  });
  const failures: ((error: Error) => void)[] = [];
  child.on('exit', (code, signal) => {
    exited = true;
    if (code !== 0 && signal === null) {
      for (const fail of failures) fail(new Error(`child ${args.join(' ')} exited ${code}: ${stderr}`));
    }
  });
  const nextLine = () =>
    new Promise<string>((resolveLine, reject) => {
      const line = lines.shift();
      if (line !== undefined) return resolveLine(line);
      if (exited) return reject(new Error(`child ${args.join(' ')} exited before printing: ${stderr}`));
      waiters.push(resolveLine);
      failures.push(reject);
    });
  return { child, nextLine };
}

function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolveExit) => child.on('exit', (code) => resolveExit(code)));
}

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  for (const store of stores.splice(0)) await store.close();
});

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('SqliteStore connection settings', () => {
  it('puts a file in WAL mode with synchronous NORMAL and a 5 s busy timeout by default', async () => {
    const path = tempFile();
    const store = await openStore(path);
    expect(store.settings()).toEqual({ journalMode: 'wal', busyTimeoutMs: 5000, synchronous: 'normal' });
    // WAL is a property of the file: a second connection sees it too.
    const raw = new Database(path);
    try {
      expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    } finally {
      raw.close();
    }
  });

  it('honours busyTimeoutMs and synchronous: full', async () => {
    const store = await openStore(tempFile(), { busyTimeoutMs: 1234, synchronous: 'full' });
    expect(store.settings()).toMatchObject({ busyTimeoutMs: 1234, synchronous: 'full' });
  });

  it('fails a write with SQLITE_BUSY once another connection has held the write lock past the timeout', async () => {
    const path = tempFile();
    const store = await openStore(path, { busyTimeoutMs: 100 });
    const raw = new Database(path);
    raw.exec('BEGIN IMMEDIATE');
    try {
      await expect(store.jobSubmit({ jobs: [spec({ kind: 'blocked' })] })).rejects.toMatchObject({
        code: 'SQLITE_BUSY',
      });
    } finally {
      raw.exec('ROLLBACK');
      raw.close();
    }
    // Nothing half-written: the failed submit left no row and the store still works.
    const [result] = await store.jobSubmit({ jobs: [spec({ kind: 'after' })] });
    expect(result?.id).toBe('1');
  });

  it('works on :memory: within one process', async () => {
    const store = await openStore(':memory:');
    expect(store.settings().journalMode).toBe('memory');
    const now = new Date(100_000);
    const [submitted] = await store.jobSubmit({ jobs: [spec({ kind: 'in-memory' })], now });
    const [claimed] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: 1000, now });
    expect(claimed?.id).toBe(submitted?.id);
    expect(await store.jobComplete({ id: claimed!.id, token: claimed!.token, now })).toBe('done');
  });

  it('closes idempotently', async () => {
    const store = await SqliteStore.open(':memory:');
    await store.close();
    await expect(store.close()).resolves.toBeUndefined();
  });
});

describe('SqliteStore migrations', () => {
  it('migrates a new file exactly once when ten processes open it at the same moment', async () => {
    const path = tempFile();
    const started = Array.from({ length: 10 }, () => startChild(['migrate', path]));
    for (const { nextLine } of started) expect(await nextLine()).toBe('ready');
    for (const { child } of started) child.stdin?.end('go\n');
    const reports = await Promise.all(
      started.map(async ({ nextLine }) => JSON.parse(await nextLine()) as { applied: number[] }),
    );
    expect(await Promise.all(started.map(({ child }) => exitOf(child)))).toEqual(Array(10).fill(0));

    const appliedEverywhere = reports.flatMap((report) => report.applied).sort((a, b) => a - b);
    expect(appliedEverywhere).toEqual(SQLITE_MIGRATIONS.map((migration) => migration.version));
    const raw = new Database(path, { readonly: true });
    try {
      const recorded = raw.prepare('SELECT version FROM docket_migrations ORDER BY version').pluck().all();
      expect(recorded).toEqual(SQLITE_MIGRATIONS.map((migration) => migration.version));
    } finally {
      raw.close();
    }
    const reopened = await openStore(path);
    expect(reopened.appliedMigrations).toEqual([]);
  });
});

describe('SqliteStore claim plan', () => {
  const path = tempFile();
  let store: SqliteStore;
  let raw: Database.Database;

  beforeAll(async () => {
    store = await SqliteStore.open(path);
    raw = new Database(path);
    // A million future-dated jobs over two priorities and three queues, plus finished records:
    // the rows a claim must never walk through.
    raw.exec(`WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 1000000)
      INSERT INTO jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at)
      SELECT 'future', 'q' || (x % 3), 'null', x % 2, 'pending', 10000000000 + x, 5, '{}', 0 FROM n`);
    raw.exec(`WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 100000)
      INSERT INTO jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at, finished_at)
      SELECT 'old', 'q1', 'null', 0, 'done', 50, 5, '{}', 0, 60 FROM n`);
  }, 60_000);

  afterAll(async () => {
    raw.close();
    await store.close();
  });

  function plan(text: string, params: Record<string, unknown>): string[] {
    return raw
      .prepare(`EXPLAIN QUERY PLAN ${text}`)
      .all(params)
      .map((row) => (row as { detail: string }).detail);
  }

  it('claims by index range scans, with no table scan and no sort of pending rows, before and after ANALYZE', () => {
    const params = {
      queue: 'q1',
      kind: 'future',
      priority: 0,
      now: 100_000,
      limit: 100,
      after: '',
      queues: '["q1"]',
      kinds: '["future"]',
      exclude_kinds: '[]',
    };
    // Without statistics is how Docket runs; after ANALYZE is how a user's `PRAGMA optimize` leaves it.
    for (const analyzed of [false, true]) {
      if (analyzed) raw.exec('ANALYZE');
      const context = `analyzed: ${analyzed}`;
      expect(plan(claimSql.JOB_DUE_PENDING, params), context).toEqual([
        'SEARCH jobs USING COVERING INDEX jobs_pending_kind_claim (queue=? AND kind=? AND priority=? AND run_at<?)',
      ]);
      // Reading on from a row (the merge of one priority's triples, decision 0026) enters the same range at its run_at.
      expect(plan(claimSql.JOB_DUE_PENDING_AFTER, { ...params, after_run_at: 50_000, after_id: 7 }), context).toEqual([
        'SEARCH jobs USING COVERING INDEX jobs_pending_kind_claim (queue=? AND kind=? AND priority=? AND run_at>? AND run_at<?)',
      ]);
      expect(plan(jobSql.JOB_DUE_PENDING_COUNT, params), context).toEqual([
        'SEARCH jobs USING COVERING INDEX jobs_pending_kind_claim (queue=? AND kind=? AND priority=? AND run_at<?)',
      ]);
      // The next pending queue: a seek in the claim index or in the dashboard's pending (queue, id)
      // index (migration 5), whichever the planner takes; either is one index step, never a scan.
      const nextQueue = plan(claimSql.JOB_PENDING_NEXT_QUEUE, params);
      expect(nextQueue, context).toHaveLength(1);
      expect(nextQueue[0], context).toMatch(
        /^SEARCH jobs USING COVERING INDEX (jobs_pending_kind_claim|jobs_pending_queue_id) \(queue>\?\)$/,
      );
      expect(plan(claimSql.JOB_PENDING_NEXT_KIND, params), context).toEqual([
        'SEARCH jobs USING COVERING INDEX jobs_pending_kind_claim (queue=? AND kind>?)',
      ]);
      expect(plan(claimSql.JOB_PENDING_NEXT_PRIORITY, params), context).toEqual([
        'SEARCH jobs USING COVERING INDEX jobs_pending_kind_claim (queue=? AND kind=? AND priority>?)',
      ]);
      expect(plan(jobSql.JOB_FIRST_PENDING_RUN_AT, params)[0], context).toMatch(
        /^SEARCH jobs USING (COVERING )?INDEX jobs_pending_kind_claim \(queue=\? AND kind=\? AND priority=\?\)$/,
      );
      expect(
        plan(claimSql.JOB_CLAIM_MANY, { ...params, ids: '[1, 2]', lease_until: 1, owner: 'w', message: 'm' })[0],
        context,
      ).toBe('SEARCH jobs USING INTEGER PRIMARY KEY (rowid=?)');
      // A batch completion: its leases drive the join, one rowid seek each, never a walk of the
      // running rows through another index per lease.
      expect(plan(jobSql.JOB_COMPLETE_MANY, { leases: '[[1, 1]]', owner: 'w', now: 1 }), context).toEqual([
        'SCAN json_each VIRTUAL TABLE INDEX 1:',
        'SEARCH jobs USING INTEGER PRIMARY KEY (rowid=?)',
      ]);
      // Lapsed leases: a range over the running rows' partial index; only those few are sorted.
      for (const text of [claimSql.JOB_LAPSED, claimSql.JOB_LAPSED_OF_KINDS, claimSql.JOB_LAPSED_EXHAUSTED]) {
        const lapsed = plan(text, params);
        expect(lapsed[0], context).toBe('SEARCH jobs USING INDEX jobs_running_lease (lease_until<?)');
        expect(
          lapsed.filter((step) => /^SCAN jobs\b/.test(step)),
          context,
        ).toEqual([]);
      }
    }
  });

  it('hands out the due jobs, in priority, run_at, id order, past a million future-dated rows', async () => {
    const now = new Date(100_000);
    const results = await store.jobSubmit({
      now,
      jobs: [
        spec({ kind: 'due-c', runAt: 90_000, priority: 1 }),
        spec({ kind: 'due-a', runAt: 95_000 }),
        spec({ kind: 'due-b', runAt: 95_000 }),
        spec({ kind: 'not-yet', runAt: 100_001 }),
      ],
    });
    const claimed = await store.jobClaim({ owner: 'w', limit: 10, leaseMs: 30_000, now });
    expect(claimed.map((job) => job.kind)).toEqual(['due-a', 'due-b', 'due-c']);
    expect(claimed.map((job) => job.id)).toEqual([results[1]?.id, results[2]?.id, results[0]?.id]);
    expect(await store.jobNextRunAt({ now })).toEqual(new Date(100_001));
  });
});

describe('SqliteStore dashboard plans', () => {
  const path = tempFile();
  let raw: Database.Database;

  beforeAll(async () => {
    await (await openStore(path)).close();
    raw = new Database(path);
    // 200,000 done and 100,000 pending jobs over three queues, a thousand cancelled, fifty running.
    const fill = (n: number, state: string, extra = '') =>
      raw.exec(`WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ${n})
        INSERT INTO jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy, created_at,
                          finished_at, lease_until, lease_owner)
        SELECT 'k' || (x % 5), 'q' || (x % 3), '{"c":' || (x % 100) || '}', 0, '${state}', 1000 + x, 5, '{}', 0, ${extra}`);
    fill(200_000, 'done', '2000 + x, NULL, NULL FROM n');
    fill(100_000, 'pending', 'NULL, NULL, NULL FROM n');
    fill(1_000, 'cancelled', '2000 + x, NULL, NULL FROM n');
    fill(50, 'running', "NULL, 5000 + x, 'w' FROM n");
  }, 60_000);

  afterAll(() => raw.close());

  it('keeps one (queue, id) index per piling-up state and none over running rows (migration 5)', () => {
    const indexes = raw
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs' AND sql IS NOT NULL ORDER BY name",
      )
      .pluck()
      .all();
    expect(indexes).toEqual([
      'jobs_cancelled_queue_id',
      'jobs_done_queue_id',
      'jobs_finished',
      'jobs_idempotency_scope',
      'jobs_pending_kind_claim',
      'jobs_pending_queue_id',
      'jobs_running_lease',
      'jobs_schedule_slot',
    ]);
  });

  it("reads every state's lists, counts and bulk batches from that state's index, before and after ANALYZE", () => {
    // Every statement the dashboard prepares, recorded, then planned.
    const sqls = new Set<string>();
    const recording = new Proxy(raw, {
      get(target, key) {
        if (key === 'prepare') {
          return (sql: string) => {
            sqls.add(sql);
            return target.prepare(sql);
          };
        }
        const value = Reflect.get(target, key);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const dashboard = new SqliteDashboardQueries(recording);
    for (const { label, first, later } of planListReads()) {
      expect(dashboard.list(first).length, label).toBeGreaterThan(0);
      dashboard.list(later);
    }
    for (const read of planBulkReads()) {
      dashboard.countMatching(checkCountParams({ action: read.action, filter: read.filter }), 10);
      const bulk = checkBulkApplyParams(read);
      expect(dashboard.batchIds(bulk, bulk.afterId, bulk.limit)).toHaveLength(100);
    }
    // A small bound, so every part is past it and estimated from its index too.
    const counts = dashboard.queueCounts(10_000, 10, [{ queue: 'q1', kind: 'k1', priority: 0 }]);
    expect(counts.map((c) => c.queue)).toEqual(['q0', 'q1', 'q2']);

    const planOf = (sql: string) => {
      const names = [...new Set([...sql.matchAll(/:([a-z_]+)/g)].map((m) => m[1] as string))];
      return raw
        .prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .all(Object.fromEntries(names.map((name) => [name, 1])))
        .map((row) => (row as { detail: string }).detail);
    };
    const jobReads = [...sqls].filter((sql) => /\bFROM jobs\b/.test(sql));
    expect(jobReads.length).toBeGreaterThan(20);
    for (const analyzed of [false, true]) {
      if (analyzed) raw.exec('ANALYZE');
      for (const sql of jobReads) {
        const steps = planOf(sql);
        const context = `analyzed: ${analyzed}\n${sql}\n${steps.join('\n')}`;
        // A walk of the whole table only in id order without a queue (it stops after one page);
        // a sort only of the running rows.
        if (!/NOT INDEXED/.test(sql))
          expect(
            steps.filter((step) => /^SCAN (jobs|j|x)$/.test(step)),
            context,
          ).toEqual([]);
        if (!/jobs_running_lease/.test(sql))
          expect(
            steps.filter((step) => /TEMP B-TREE/.test(step)),
            context,
          ).toEqual([]);
        for (const state of ['pending', 'done', 'cancelled']) {
          if (sql.includes(`.state = '${state}'`) && /\.queue = :/.test(sql) && !/kind = :kind/.test(sql)) {
            expect(
              steps.some((step) => step.includes(`INDEX jobs_${state}_queue_id (queue=?`)),
              context,
            ).toBe(true);
          }
        }
        expect(
          steps.some((step) => step.includes('jobs_state_queue_id')),
          context,
        ).toBe(false);
      }
    }
  });
});

describe('SqliteStore across processes', () => {
  it('hands each of 1,500 jobs to exactly one of three claiming processes', async () => {
    const path = tempFile();
    const store = await openStore(path);
    for (let i = 0; i < 1500; i += 500) {
      await store.jobSubmit({ jobs: Array.from({ length: 500 }, (_, j) => spec({ kind: 'shared', payload: i + j })) });
    }
    const started = ['a', 'b', 'c'].map((owner) => startChild(['claim', path, owner]));
    for (const { nextLine } of started) expect(await nextLine()).toBe('ready');
    for (const { child } of started) child.stdin?.end('go\n');
    const reports = await Promise.all(
      started.map(
        async ({ nextLine }) => JSON.parse(await nextLine()) as { claims: [string, number, number, number][] },
      ),
    );
    expect(await Promise.all(started.map(({ child }) => exitOf(child)))).toEqual([0, 0, 0]);

    const claims = reports.flatMap((report) => report.claims);
    const ids = claims.map(([id]) => id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(1500);
    // One claim per job means token 1 everywhere: no lease was ever taken over.
    expect(claims.every(([, token]) => token === 1)).toBe(true);
    // Every process got a share, so the claims really ran concurrently against one file.
    expect(reports.map((report) => report.claims.length > 0)).toEqual([true, true, true]);
    const [stats] = await store.queueStats();
    expect(stats).toMatchObject({ queue: 'default', done: 1500, available: 0, running: 0, scheduled: 0 });
  });

  it('keeps a job whose submit was acknowledged by a process killed with SIGKILL right after', async () => {
    const path = tempFile();
    await (await openStore(path)).close();
    const { child, nextLine } = startChild(['submit-and-hang', path]);
    const { id } = JSON.parse(await nextLine()) as { id: string };
    child.kill('SIGKILL');
    await exitOf(child);
    const reopened = await openStore(path);
    expect(await reopened.jobGet({ id })).toMatchObject({ id, kind: 'survivor', state: 'pending' });
  });
});

describe("SqliteStore wake-ups for other processes' submits", () => {
  it('wakes a subscriber when a submit from another process commits', async () => {
    const path = tempFile();
    const store = await openStore(path);
    const wakeUps: WakeUp[] = [];
    await store.subscribe((wakeUp) => wakeUps.push(wakeUp));
    const { nextLine } = startChild(['submit-and-hang', path]);
    const { id } = JSON.parse(await nextLine()) as { id: string };
    const submitted = await store.jobGet({ id });
    // Nothing in this process wrote, so only the watcher can have heard of the job.
    await expect
      .poll(() => wakeUps, { timeout: 5_000 })
      .toEqual([{ runAt: submitted?.runAt, queue: submitted?.queue, kind: submitted?.kind }]);
  });

  it("wakes a subscriber with the earliest run time of each queue and kind of another connection's submit, and stops with the last unsubscribe", async () => {
    const path = tempFile();
    const watching = await openStore(path);
    const other = await openStore(path);
    const heard: WakeUp[] = [];
    const unsubscribe = await watching.subscribe((wakeUp) => heard.push(wakeUp));
    const nowMs = (await other.now()).getTime();
    await other.jobSubmit({
      jobs: [
        spec({ kind: 'soon', runAt: nowMs + 2_000 }),
        spec({ kind: 'sooner', runAt: nowMs + 1_000 }),
        spec({ kind: 'soon', runAt: nowMs + 1_500 }),
      ],
    });
    const byKind = (wakeUps: WakeUp[]) => [...wakeUps].sort((x, y) => String(x.kind).localeCompare(String(y.kind)));
    await expect.poll(() => heard.length).toBe(2);
    expect(byKind(heard)).toEqual([
      { runAt: new Date(nowMs + 1_500), queue: 'default', kind: 'soon' },
      { runAt: new Date(nowMs + 1_000), queue: 'default', kind: 'sooner' },
    ]);

    await unsubscribe();
    await other.jobSubmit({ jobs: [spec({ kind: 'unheard', runAt: nowMs + 500 })] });
    // A later subscriber hears only what comes after it: its wake-up shows a look has passed the
    // unheard submit, which the first listener, gone, did not receive.
    const later: WakeUp[] = [];
    await watching.subscribe((wakeUp) => later.push(wakeUp));
    await other.jobSubmit({ jobs: [spec({ kind: 'heard', runAt: nowMs + 700 })] });
    await expect.poll(() => later).toEqual([{ runAt: new Date(nowMs + 700), queue: 'default', kind: 'heard' }]);
    expect(heard).toHaveLength(2);
  });

  it("reports another connection's inserts only: not its claims, heartbeats, completions or cancels, nor its own connection's writes", async () => {
    const path = tempFile();
    const other = await openStore(path);
    const db = new Database(path);
    try {
      const reported: WakeUp[] = [];
      const watcher = new ForeignSubmitWatcher(db, new jobSql.SqliteJobQueries(db), (wakeUps) =>
        reported.push(...wakeUps),
      );
      watcher.mark();
      expect(watcher.look()).toBeNull();
      const nowMs = (await other.now()).getTime();

      const [first] = await other.jobSubmit({
        jobs: [spec({ kind: 'a', runAt: nowMs + 300 }), spec({ kind: 'b', runAt: nowMs - 100 })],
      });
      const named = [
        { runAt: new Date(nowMs + 300), queue: 'default', kind: 'a' },
        { runAt: new Date(nowMs - 100), queue: 'default', kind: 'b' },
      ];
      expect(watcher.look()).toEqual(named);
      expect(watcher.look()).toBeNull();

      const claimed = await other.jobClaim({ owner: 'w', limit: 10, leaseMs: 60_000 });
      expect(claimed).toHaveLength(1);
      expect(watcher.look()).toBeNull();
      await other.jobHeartbeatMany({ leases: claimed, leaseMs: 60_000 });
      expect(watcher.look()).toBeNull();
      await other.jobCompleteMany({ leases: claimed });
      expect(watcher.look()).toBeNull();
      await other.jobCancel({ id: first!.id });
      expect(watcher.look()).toBeNull();

      // A job that is no longer pending when looked at (claimed at once) is reported by nobody.
      await other.jobSubmit({ jobs: [spec({ kind: 'c' })] });
      await other.jobClaim({ owner: 'w', limit: 10, leaseMs: 60_000 });
      expect(watcher.look()).toBeNull();

      // The watcher's own connection's commits do not move data_version for it.
      const own = new jobSql.SqliteJobQueries(db);
      db.transaction(() => own.submit([spec({ kind: 'own' })], nowMs)).immediate();
      expect(watcher.look()).toBeNull();
      expect(reported).toEqual(named);
    } finally {
      db.close();
    }
  });
});

describe('SqliteStore ids, parking and wake-ups', () => {
  it('never reuses an id, even after the newest jobs are pruned', async () => {
    const store = await openStore(tempFile());
    const now = new Date(100_000);
    const first = await store.jobSubmit({ jobs: [spec({ kind: 'a' }), spec({ kind: 'b' })], now });
    const claimed = await store.jobClaim({ owner: 'w', limit: 2, leaseMs: 1000, now });
    await store.jobCompleteMany({ leases: claimed, now });
    expect(await store.jobPruneFinished({ finishedBefore: new Date(100_001) })).toBe(2);
    const [next] = await store.jobSubmit({ jobs: [spec({ kind: 'c' })], now });
    expect(first.map((result) => result.id)).toEqual(['1', '2']);
    expect(next?.id).toBe('3');
  });

  it('parks a job at claim time when its last lease lapsed, and a retry brings it back under its id', async () => {
    const store = await openStore(tempFile());
    const [submitted] = await store.jobSubmit({ jobs: [spec({ kind: 'crasher', maxAttempts: 1 })], now: new Date(0) });
    const [claimed] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: 1000, now: new Date(0) });
    expect(claimed?.attempts).toBe(1);
    expect(await store.jobClaim({ owner: 'w', limit: 1, leaseMs: 1000, now: new Date(1000) })).toEqual([]);
    const [parked] = await store.deadLetterList({});
    expect(parked).toMatchObject({ id: submitted?.id, state: 'dead', attempts: 1, finishedAt: new Date(1000) });
    expect(parked?.errors).toEqual([
      {
        attempt: 1,
        at: new Date(1000),
        kind: 'lease_expired',
        message: `${LEASE_EXPIRED_MESSAGE}; parked after 1 attempts`,
        // The lapsed claim: when it started and whose it was (the job page's timeline).
        startedAt: new Date(0),
        owner: 'w',
      },
    ]);
    const retried = await store.deadLetterRetry({ id: submitted!.id, now: new Date(2000) });
    expect(retried).toMatchObject({ id: submitted?.id, state: 'pending', attempts: 0, token: 1 });
    expect(retried?.errors).toHaveLength(1);
    expect(await store.deadLetterList({})).toEqual([]);
  });

  it('wakes in-process subscribers once per queue and kind of a submit due within 5 s, and not for a later one', async () => {
    const store = await openStore(':memory:');
    const wakeUps: WakeUp[] = [];
    const unsubscribe = await store.subscribe((wakeUp) => wakeUps.push(wakeUp));
    const now = new Date(100_000);
    await store.jobSubmit({ jobs: [spec({ kind: 'later', runAt: 105_001 })], now });
    await store.jobSubmit({
      jobs: [
        spec({ kind: 'soon', runAt: 104_000 }),
        spec({ kind: 'sooner', runAt: 103_000 }),
        spec({ kind: 'soon', runAt: 103_500 }),
        // Beyond the horizon: its kind gets no wake-up of its own.
        spec({ kind: 'later', runAt: 106_000 }),
      ],
      now,
    });
    await expect.poll(() => wakeUps.length).toBe(2);
    expect(wakeUps).toEqual([
      { runAt: new Date(103_500), queue: 'default', kind: 'soon' },
      { runAt: new Date(103_000), queue: 'default', kind: 'sooner' },
    ]);
    await unsubscribe();
    await store.jobSubmit({ jobs: [spec({ kind: 'unheard' })], now });
    await Promise.resolve();
    expect(wakeUps).toHaveLength(2);
  });
});
