/**
 * SQLite schema migrations: numbered, recorded in `docket_migrations`, applied under
 * `BEGIN IMMEDIATE` so that ten processes opening one new file at once migrate exactly once.
 *
 * The write lock is the whole protocol: the first process to take it creates the tables and
 * records their versions; the others wait on busy_timeout, then see those versions and apply
 * nothing. A migration that fails rolls back with its transaction and leaves no half-made schema.
 *
 * Columns match the PostgreSQL twin (src/store/postgres/) one for one; instants are INTEGER epoch
 * milliseconds here where PostgreSQL uses timestamptz, and JSON is TEXT where it uses jsonb.
 */
import type Database from 'better-sqlite3';

/** One schema step; `version` numbers are dense and never reused. */
export interface SqliteMigration {
  version: number;
  name: string;
  sql: string;
}

/** Every migration, oldest first. Append only: an applied migration is never edited. */
export const SQLITE_MIGRATIONS: readonly SqliteMigration[] = [
  {
    version: 1,
    name: 'jobs and dead letters',
    sql: `
      -- Live (pending, running) and finished (done, cancelled) jobs. AUTOINCREMENT keeps ids unique
      -- for ever, even after the newest rows are pruned, so an old id never names a new job.
      CREATE TABLE jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        queue TEXT NOT NULL,
        payload TEXT NOT NULL,
        priority INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'cancelled')),
        run_at INTEGER NOT NULL,
        lease_until INTEGER,
        lease_owner TEXT,
        token INTEGER NOT NULL DEFAULT 0,
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        retry_policy TEXT NOT NULL,
        errors TEXT NOT NULL DEFAULT '[]',
        idempotency_key TEXT,
        timeout_ms INTEGER,
        schedule_id TEXT,
        schedule_slot INTEGER,
        created_at INTEGER NOT NULL,
        finished_at INTEGER,
        CHECK ((state = 'running') = (lease_until IS NOT NULL)),
        CHECK ((state IN ('done', 'cancelled')) = (finished_at IS NOT NULL))
      ) STRICT;

      -- The claim index, for pending jobs only (as in the PostgreSQL twin). A claim walks the
      -- distinct (queue, priority) pairs by one seek each, then reads each pair's due rows as the
      -- range (queue = ?, priority = ?, run_at <= now), already in claim order (run_at, id): it
      -- reads O(pairs * log n + batch) entries whatever the number of future-dated, running or
      -- finished rows, never sorts (10,000 jobs due in one second would otherwise be sorted on
      -- every claim), and a worker on one queue never walks another queue's backlog.
      CREATE INDEX jobs_pending_claim ON jobs (queue, priority, run_at, id) WHERE state = 'pending';

      -- Leases of running jobs: lapsed ones are the range lease_until <= now (claims pick them up
      -- again), and the earliest lease end is when one becomes due (jobNextRunAt). Holds only the
      -- in-flight rows, so it stays small.
      CREATE INDEX jobs_running_lease ON jobs (lease_until) WHERE state = 'running';

      -- Idempotency keys, unique among live jobs only, so a finished job frees its key. Submits
      -- check before inserting (serial under the write lock); the index is the backstop.
      CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key)
        WHERE idempotency_key IS NOT NULL AND state IN ('pending', 'running');

      -- Pruning finished records by age without a full scan under the write lock.
      CREATE INDEX jobs_finished ON jobs (finished_at) WHERE state IN ('done', 'cancelled');

      -- At most one job per recurring (schedule, slot) in this table, as in the PostgreSQL twin:
      -- a second insert for the slot fails instead of running the slot twice.
      CREATE UNIQUE INDEX jobs_schedule_slot ON jobs (schedule_id, schedule_slot) WHERE schedule_id IS NOT NULL;

      -- Parked jobs. Same columns plus parked_at (= finished_at; kept apart, as in PostgreSQL, so
      -- "finished" can change meaning without moving purges). id keeps the job's original id (no AUTOINCREMENT here), so a
      -- retry moves the row back into jobs under the id its submitter holds.
      CREATE TABLE dead_jobs (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        queue TEXT NOT NULL,
        payload TEXT NOT NULL,
        priority INTEGER NOT NULL,
        state TEXT NOT NULL DEFAULT 'dead' CHECK (state = 'dead'),
        run_at INTEGER NOT NULL,
        lease_until INTEGER,
        lease_owner TEXT,
        token INTEGER NOT NULL,
        attempts INTEGER NOT NULL,
        max_attempts INTEGER NOT NULL,
        retry_policy TEXT NOT NULL,
        errors TEXT NOT NULL,
        idempotency_key TEXT,
        timeout_ms INTEGER,
        schedule_id TEXT,
        schedule_slot INTEGER,
        created_at INTEGER NOT NULL,
        finished_at INTEGER NOT NULL,
        parked_at INTEGER NOT NULL
      ) STRICT;

      CREATE INDEX dead_jobs_parked_at ON dead_jobs (parked_at);
    `,
  },
  {
    version: 2,
    name: 'recurring schedules and paused queues',
    sql: `
      -- One row per recurring schedule: its definition and its progress. jobs_schedule_slot
      -- (version 1) keeps one job per (schedule, slot). Columns match the PostgreSQL twin.
      CREATE TABLE schedules (
        id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
        cron TEXT NOT NULL,
        time_zone TEXT NOT NULL,
        kind TEXT NOT NULL,
        queue TEXT NOT NULL,
        payload_json TEXT NOT NULL,
        priority INTEGER NOT NULL,
        max_attempts INTEGER NOT NULL,
        retry_policy TEXT NOT NULL,
        timeout_ms INTEGER,
        jitter_ms INTEGER NOT NULL CHECK (jitter_ms >= 0),
        jitter_mode TEXT NOT NULL CHECK (jitter_mode IN ('stable', 'per_occurrence')),
        misfire_policy TEXT NOT NULL CHECK (misfire_policy IN ('skip', 'run_once', 'catch_up')),
        catch_up_window_ms INTEGER NOT NULL,
        max_catch_up_runs INTEGER NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
        -- The latest slot that ever got a job; only moves forward, so no slot is planned twice.
        last_slot_at INTEGER,
        -- The pending next run, denormalised for listing; NULL while paused.
        next_slot_at INTEGER,
        next_run_at INTEGER,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      ) STRICT;

      -- Paused queues: claims skip a queue whose row says paused. Rows stay after a resume.
      CREATE TABLE queues (
        name TEXT PRIMARY KEY,
        paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
        paused_at INTEGER,
        CHECK ((paused = 1) = (paused_at IS NOT NULL))
      ) STRICT;
    `,
  },
  {
    version: 3,
    name: 'kind-aware claim index, idempotency per queue and kind, worker registry',
    sql: `
      -- The claim index with kind after queue (docs/decisions/0006-kind-aware-claims.md): a claim
      -- walks (queue, kind, priority) triples by one seek each, skips the kinds the worker does
      -- not handle before reading a row, then reads each triple's due range in claim order.
      DROP INDEX jobs_pending_claim;
      CREATE INDEX jobs_pending_kind_claim ON jobs (queue, kind, priority, run_at, id) WHERE state = 'pending';

      -- Idempotency keys are unique per (queue, kind) among live jobs: the same key in another
      -- queue or kind is another job. Submits check first (under the write lock); this is the backstop.
      DROP INDEX jobs_idempotency_key;
      CREATE UNIQUE INDEX jobs_idempotency_scope ON jobs (queue, kind, idempotency_key)
        WHERE idempotency_key IS NOT NULL AND state IN ('pending', 'running');

      -- The live worker registry, as in the PostgreSQL twin; queues, kinds and exclude_kinds are
      -- JSON arrays (queues/kinds NULL = every queue / every kind), instants epoch milliseconds.
      CREATE TABLE workers (
        id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
        host TEXT NOT NULL,
        pid INTEGER,
        version TEXT NOT NULL,
        queues TEXT,
        kinds TEXT,
        exclude_kinds TEXT NOT NULL DEFAULT '[]',
        concurrency INTEGER NOT NULL CHECK (concurrency >= 0),
        origin TEXT NOT NULL CHECK (origin IN ('local', 'remote')),
        started_at INTEGER NOT NULL,
        last_seen_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX workers_expires_at ON workers (expires_at);
    `,
  },
  {
    version: 4,
    name: 'dashboard: claim start times, list and count indexes',
    sql: `
      -- When the latest claim began (the claim sets it in its UPDATE), as in the PostgreSQL twin:
      -- start lateness and the job page's claim timeline.
      ALTER TABLE jobs ADD COLUMN started_at INTEGER;
      ALTER TABLE dead_jobs ADD COLUMN started_at INTEGER;
      -- The dashboard's lists and bounded counts: a state (and queue) paged by id either way, and
      -- a (state, queue) range counted from the index alone; dead letters by (queue, id).
      CREATE INDEX jobs_state_queue_id ON jobs (state, queue, id);
      CREATE INDEX dead_jobs_queue_id ON dead_jobs (queue, id);
    `,
  },
  {
    version: 5,
    name: 'dashboard: per-state list indexes, none for running rows',
    sql: `
      -- Decision 0017. SQLite rewrites an index entry whenever its key changes, so the single
      -- (state, queue, id) index cost a delete and an insert at every claim and every completion.
      -- One partial (queue, id) index per state that piles up (pending, done, cancelled) serves the
      -- same lists and counts with a claim only deleting and a completion only inserting; the few
      -- running rows are read through jobs_running_lease. Queries name the state as a literal
      -- (SQLite uses a partial index only for a WHERE that repeats its predicate).
      DROP INDEX jobs_state_queue_id;
      CREATE INDEX jobs_pending_queue_id ON jobs (queue, id) WHERE state = 'pending';
      CREATE INDEX jobs_done_queue_id ON jobs (queue, id) WHERE state = 'done';
      CREATE INDEX jobs_cancelled_queue_id ON jobs (queue, id) WHERE state = 'cancelled';
    `,
  },
];

/**
 * Applies every migration the file lacks, inside one IMMEDIATE transaction; returns the versions
 * this call applied (empty when another process got there first).
 */
export function runSqliteMigrations(db: Database.Database): number[] {
  const migrate = db.transaction((): number[] => {
    db.exec(`CREATE TABLE IF NOT EXISTS docket_migrations (
      version INTEGER PRIMARY KEY,
      name TEXT NOT NULL,
      applied_at INTEGER NOT NULL
    ) STRICT`);
    const applied = new Set(
      db
        .prepare('SELECT version FROM docket_migrations')
        .pluck()
        .all()
        .map((version) => Number(version)),
    );
    const record = db.prepare(
      `INSERT INTO docket_migrations (version, name, applied_at)
       VALUES (?, ?, CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER))`,
    );
    const appliedNow: number[] = [];
    for (const migration of SQLITE_MIGRATIONS) {
      if (applied.has(migration.version)) continue;
      db.exec(migration.sql);
      record.run(migration.version, migration.name);
      appliedNow.push(migration.version);
    }
    return appliedNow;
  });
  return migrate.immediate();
}
