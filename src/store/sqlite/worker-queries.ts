/**
 * The SQLite worker registry's SQL, each statement headed by purpose, parameters and result and
 * by how it differs from its PostgreSQL twin (src/store/postgres/worker-queries.ts). Instants are
 * epoch milliseconds; `:now` is the transaction's instant. Arrays are JSON text (queues and kinds
 * NULL mean "every queue" / "every kind").
 */
import type Database from 'better-sqlite3';
import type { WorkerRecord, WorkerRegistration } from '../store.js';

/** A workers row as better-sqlite3 returns it. */
export interface WorkerRow {
  id: string;
  host: string;
  pid: number | null;
  version: string;
  queues: string | null;
  kinds: string | null;
  exclude_kinds: string;
  concurrency: number;
  origin: 'local' | 'remote';
  started_at: number;
  last_seen_at: number;
  expires_at: number;
}

/**
 * Upsert by id: last_seen_at = now, expires_at = now + ttl; started_at kept while the stored
 * record is live, reset when it had expired.
 * Parameters: :id, :host, :pid, :version, :queues, :kinds, :exclude_kinds, :concurrency, :origin,
 * :now, :expires_at. Result: the row as stored.
 * PostgreSQL: identical, with text[] columns and interval arithmetic.
 */
export const WORKER_REGISTER = `
  INSERT INTO workers (id, host, pid, version, queues, kinds, exclude_kinds, concurrency, origin,
    started_at, last_seen_at, expires_at)
  VALUES (:id, :host, :pid, :version, :queues, :kinds, :exclude_kinds, :concurrency, :origin, :now, :now, :expires_at)
  ON CONFLICT (id) DO UPDATE SET
    host = excluded.host, pid = excluded.pid, version = excluded.version, queues = excluded.queues,
    kinds = excluded.kinds, exclude_kinds = excluded.exclude_kinds, concurrency = excluded.concurrency,
    origin = excluded.origin,
    started_at = CASE WHEN workers.expires_at > :now THEN workers.started_at ELSE excluded.started_at END,
    last_seen_at = excluded.last_seen_at, expires_at = excluded.expires_at
  RETURNING *`;

/** Removes one record. Parameters: :id. Result: changes. PostgreSQL: identical. */
export const WORKER_DEREGISTER = `DELETE FROM workers WHERE id = :id`;

/**
 * Deletes expired records (run just before WORKER_LIST in the same write transaction).
 * Parameters: :now. Result: changes. PostgreSQL: a DELETE CTE of its one list statement.
 */
export const WORKER_DELETE_EXPIRED = `DELETE FROM workers WHERE expires_at <= :now`;

/** Live records by id. Parameters: :now. Result: rows, ids ascending (bytewise). */
export const WORKER_LIST = `SELECT * FROM workers WHERE expires_at > :now ORDER BY id`;

/** Parameters of WORKER_REGISTER for a validated registration. */
export function workerParams(worker: WorkerRegistration, nowMs: number, ttlMs: number): Record<string, unknown> {
  return {
    id: worker.id,
    host: worker.host,
    pid: worker.pid,
    version: worker.version,
    queues: worker.queues === null ? null : JSON.stringify(worker.queues),
    kinds: worker.kinds === null ? null : JSON.stringify(worker.kinds),
    exclude_kinds: JSON.stringify(worker.excludeKinds),
    concurrency: worker.concurrency,
    origin: worker.origin,
    now: nowMs,
    expires_at: nowMs + ttlMs,
  };
}

/** Converts a row to a {@link WorkerRecord}. */
export function rowToWorker(row: WorkerRow): WorkerRecord {
  return {
    id: row.id,
    host: row.host,
    pid: row.pid,
    version: row.version,
    queues: row.queues === null ? null : (JSON.parse(row.queues) as string[]),
    kinds: row.kinds === null ? null : (JSON.parse(row.kinds) as string[]),
    excludeKinds: JSON.parse(row.exclude_kinds) as string[],
    concurrency: row.concurrency,
    origin: row.origin,
    startedAt: new Date(row.started_at),
    lastSeenAt: new Date(row.last_seen_at),
    expiresAt: new Date(row.expires_at),
  };
}

/** The worker-registry statements for one connection; writes run inside the store's transaction. */
export class SqliteWorkerQueries {
  private readonly stmt: {
    register: Database.Statement<Record<string, unknown>, WorkerRow>;
    deregister: Database.Statement<{ id: string }>;
    deleteExpired: Database.Statement<{ now: number }>;
    list: Database.Statement<{ now: number }, WorkerRow>;
  };

  constructor(db: Database.Database) {
    this.stmt = {
      register: db.prepare<Record<string, unknown>, WorkerRow>(WORKER_REGISTER),
      deregister: db.prepare<{ id: string }>(WORKER_DEREGISTER),
      deleteExpired: db.prepare<{ now: number }>(WORKER_DELETE_EXPIRED),
      list: db.prepare<{ now: number }, WorkerRow>(WORKER_LIST),
    };
  }

  /** Inserts or refreshes a worker's record. */
  register(worker: WorkerRegistration, nowMs: number, ttlMs: number): WorkerRecord {
    const row = this.stmt.register.get(workerParams(worker, nowMs, ttlMs));
    if (!row) throw new Error('workers INSERT … RETURNING returned no row');
    return rowToWorker(row);
  }

  /** Removes a worker's record; false when there was none. */
  deregister(id: string): boolean {
    return this.stmt.deregister.run({ id }).changes > 0;
  }

  /** Deletes expired records, then lists the live ones. */
  list(nowMs: number): WorkerRecord[] {
    this.stmt.deleteExpired.run({ now: nowMs });
    return this.stmt.list.all({ now: nowMs }).map(rowToWorker);
  }
}
