/**
 * Opens a store by URL: `postgres://…` / `postgresql://…` for PostgreSQL, `sqlite:path/to/file.db`
 * or `sqlite::memory:` for the embedded default. Migrations run on open, under a lock, so many
 * processes starting together migrate once.
 */
import { ValidationError } from '../job/errors.js';
import type { Store } from './store.js';

/** Options shared by every store. */
export interface OpenStoreOptions {
  /** PostgreSQL schema that holds Docket's tables (default `docket`). Ignored by SQLite. */
  schema?: string | undefined;
  /** PostgreSQL pool size (default 10). */
  poolSize?: number | undefined;
  /**
   * PostgreSQL: how long opening keeps retrying a server that refuses connections or is still
   * starting up, ms (default 30 000; 0 fails at once).
   */
  connectTimeoutMs?: number | undefined;
  /** PostgreSQL: a submit notifies listeners only when one of its jobs is due within this many ms (default 5000). */
  wakeHorizonMs?: number | undefined;
  /** SQLite: how long a writer waits for another process's write lock, ms (default 5000). */
  busyTimeoutMs?: number | undefined;
  /**
   * SQLite: `normal` (default) survives a kill -9 of any process; `full` also survives an
   * operating-system crash or power loss, at the cost of an fsync per commit.
   */
  synchronous?: 'normal' | 'full' | undefined;
}

/** A parsed store URL. */
export type StoreLocation = { kind: 'postgres'; url: string } | { kind: 'sqlite'; path: string };

/** Parses a store URL, refusing unknown schemes with a clear error. */
export function parseStoreUrl(url: string): StoreLocation {
  if (typeof url !== 'string' || url.trim() === '') {
    throw new ValidationError('url', 'must be a non-empty store URL such as sqlite:docket.db or postgres://host/db');
  }
  if (/^postgres(ql)?:\/\//i.test(url)) return { kind: 'postgres', url };
  const sqlite = /^sqlite:(.+)$/i.exec(url);
  if (sqlite?.[1]) {
    const rest = sqlite[1].replace(/^\/\//, '');
    if (rest === '') throw new ValidationError('url', `has no SQLite file path: ${url}`);
    return { kind: 'sqlite', path: rest };
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1];
  throw new ValidationError(
    'url',
    `unknown store URL scheme ${scheme ? `"${scheme}:"` : `in "${url}"`}; use postgres://…, sqlite:path/to/file.db or sqlite::memory:`,
  );
}

/** Opens (and migrates) the store a URL names. */
export async function openStore(url: string, options: OpenStoreOptions = {}): Promise<Store> {
  const location = parseStoreUrl(url);
  if (location.kind === 'postgres') {
    const { PostgresStore } = await import('./postgres/postgres-store.js');
    return PostgresStore.open(location.url, options);
  }
  const { SqliteStore } = await import('./sqlite/sqlite-store.js');
  return SqliteStore.open(location.path, options);
}
