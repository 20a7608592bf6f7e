/**
 * The PostgreSQL worker registry's SQL: one row per worker process in `<schema>.workers`, each
 * query headed by purpose, parameters and result. Times are the database's
 * (`coalesce($1::timestamptz, now())`, a pinned instant in tests); a record is live while
 * `expires_at > now`, and expired rows are deleted by the next listing.
 */
import type { WorkerRecord, WorkerRegistration } from '../store.js';
import { quoteIdentifier } from './migrations.js';
import type { Queryable } from './sql-fragments.js';

const NOW = 'coalesce($1::timestamptz, now())';

/** A workers row as pg returns it (text[] as arrays, timestamptz as Date). */
interface WorkerRow {
  id: string;
  host: string;
  pid: number | null;
  version: string;
  queues: string[] | null;
  kinds: string[] | null;
  exclude_kinds: string[];
  concurrency: number;
  origin: 'local' | 'remote';
  started_at: Date;
  last_seen_at: Date;
  expires_at: Date;
}

/** Converts a row to a {@link WorkerRecord}: the one place snake_case becomes camelCase. */
function rowToWorker(row: WorkerRow): WorkerRecord {
  return {
    id: row.id,
    host: row.host,
    pid: row.pid,
    version: row.version,
    queues: row.queues,
    kinds: row.kinds,
    excludeKinds: row.exclude_kinds,
    concurrency: row.concurrency,
    origin: row.origin,
    startedAt: row.started_at,
    lastSeenAt: row.last_seen_at,
    expiresAt: row.expires_at,
  };
}

/** The registry SQL for one schema, and the code that runs it on any {@link Queryable}. */
export class PostgresWorkerQueries {
  private readonly sql: { register: string; deregister: string; list: string };

  constructor(schemaName: string) {
    const workers = `${quoteIdentifier(schemaName)}.workers`;
    this.sql = {
      /**
       * register: upsert by id. last_seen_at = now, expires_at = now + ttl; started_at is kept
       * while the stored record is still live (a heartbeat), and reset when it had expired (the
       * id came back after it was presumed dead, so it counts as a new start).
       * Params: $1 now?, $2 id, $3 host, $4 pid?, $5 version, $6 queues text[]?, $7 kinds text[]?,
       *   $8 exclude_kinds text[], $9 concurrency, $10 origin, $11 ttl ms.
       * Result: the row as stored.
       */
      register: `
        INSERT INTO ${workers} AS w (id, host, pid, version, queues, kinds, exclude_kinds, concurrency, origin,
                                     started_at, last_seen_at, expires_at)
        VALUES ($2, $3, $4, $5, $6::text[], $7::text[], $8::text[], $9, $10,
                ${NOW}, ${NOW}, ${NOW} + ($11::double precision * interval '1 millisecond'))
        ON CONFLICT (id) DO UPDATE SET
          host = excluded.host, pid = excluded.pid, version = excluded.version, queues = excluded.queues,
          kinds = excluded.kinds, exclude_kinds = excluded.exclude_kinds, concurrency = excluded.concurrency,
          origin = excluded.origin,
          started_at = CASE WHEN w.expires_at > ${NOW} THEN w.started_at ELSE excluded.started_at END,
          last_seen_at = excluded.last_seen_at, expires_at = excluded.expires_at
        RETURNING *`,

      /**
       * deregister: removes one record (graceful stop).
       * Params: $1 id. Result: rowCount 1 when there was a record.
       */
      deregister: `DELETE FROM ${workers} WHERE id = $1`,

      /**
       * list: deletes expired records and returns the live ones ordered by id. (The SELECT reads
       * the statement's snapshot, which still holds the rows being deleted, hence its own filter.)
       * Params: $1 now?. Result: live rows, ids ascending by bytes (COLLATE "C", as SQLite orders).
       */
      list: `
        WITH expired AS (DELETE FROM ${workers} WHERE expires_at <= ${NOW})
        SELECT * FROM ${workers} WHERE expires_at > ${NOW} ORDER BY id COLLATE "C"`,
    };
  }

  /** Records or refreshes a worker (already validated); returns the stored record. */
  async register(
    db: Queryable,
    worker: WorkerRegistration,
    ttlMs: number,
    now: Date | undefined,
  ): Promise<WorkerRecord> {
    const result = await db.query<WorkerRow>(this.sql.register, [
      now ?? null,
      worker.id,
      worker.host,
      worker.pid,
      worker.version,
      worker.queues === null ? null : [...worker.queues],
      worker.kinds === null ? null : [...worker.kinds],
      [...worker.excludeKinds],
      worker.concurrency,
      worker.origin,
      ttlMs,
    ]);
    return rowToWorker(result.rows[0]!);
  }

  /** Removes a worker's record; false when there was none. */
  async deregister(db: Queryable, id: string): Promise<boolean> {
    const result = await db.query(this.sql.deregister, [id]);
    return (result.rowCount ?? 0) > 0;
  }

  /** Live workers ordered by id; expired records are deleted. */
  async list(db: Queryable, now: Date | undefined): Promise<WorkerRecord[]> {
    const result = await db.query<WorkerRow>(this.sql.list, [now ?? null]);
    return result.rows.map(rowToWorker);
  }
}
