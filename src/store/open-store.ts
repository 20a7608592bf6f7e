/**
 * Opens a store by URL: `postgres://…` / `postgresql://…` for PostgreSQL, `sqlite:path/to/file.db`
 * or `sqlite::memory:` for the embedded default. Migrations run on open, under a lock, so many
 * processes starting together migrate once.
 */
import { ConfigurationError, DocketError, ValidationError } from '../job/errors.js';
import { type PostgresConnectionOptions, resolvePostgresConnectionOptions } from './postgres/connection-options.js';
import type { Store } from './store.js';

export {
  DEFAULT_CONNECT_ATTEMPT_TIMEOUT_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS,
  DEFAULT_KEEP_ALIVE_DELAY_MS,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  type PostgresConnectionOptions,
  resolvePostgresConnectionOptions,
} from './postgres/connection-options.js';

/**
 * Options shared by every store. The PostgreSQL connection options (timeouts, keepalives,
 * `listenUrl`) are {@link PostgresConnectionOptions}, checked by one parser for every face;
 * SQLite ignores them but refuses bad values all the same, so a typo is never silently kept.
 */
export interface OpenStoreOptions extends PostgresConnectionOptions {
  /**
   * A sharded store: one postgres:// URL per shard (docs/sharding.md), instead of a single store
   * URL. Every other option applies to each shard. Refused with a url, with a SQLite URL, with a
   * URL listed twice, and when empty.
   */
  shards?: readonly string[] | undefined;
  /** PostgreSQL schema that holds Docket's tables (default `docket`). Ignored by SQLite. */
  schema?: string | undefined;
  /** PostgreSQL pool size (default 10). */
  poolSize?: number | undefined;
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

/** The store URL with its password masked, for messages and logs (an unparsable URL is returned as is). */
export function redactStoreUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}

/** Opens (and migrates) the store a URL names, or with `options.shards` (and no url) a sharded store. */
export async function openStore(url: string | undefined, options: OpenStoreOptions = {}): Promise<Store> {
  const { shards, ...single } = options;
  if (shards !== undefined) {
    if (url !== undefined) {
      throw new ConfigurationError(
        `give either a store url or shards, not both (url ${redactStoreUrl(url)} with ${Array.isArray(shards) ? shards.length : 'some'} shards)`,
      );
    }
    const { ShardedStore, checkShardUrls } = await import('./sharded/sharded-store.js');
    checkShardUrls(shards);
    resolvePostgresConnectionOptions(single);
    return ShardedStore.open(shards, single);
  }
  if (url === undefined)
    throw new ConfigurationError('openStore needs a store url (postgres://… or sqlite:…) or shards');
  const location = parseStoreUrl(url);
  resolvePostgresConnectionOptions(single);
  options = single;
  if (location.kind === 'postgres') {
    const { PostgresStore } = await import('./postgres/postgres-store.js');
    return PostgresStore.open(location.url, options);
  }
  const { SqliteStore } = await importSqliteStore();
  return SqliteStore.open(location.path, options);
}

/** The npm package the SQLite store runs on; an optional dependency, so a PostgreSQL-only install can omit it. */
export const SQLITE_DRIVER_PACKAGE = 'better-sqlite3';

/**
 * Loads the SQLite store, and with it better-sqlite3, only when a SQLite URL is opened: a
 * PostgreSQL-only install that left the optional native package out never touches it, and one
 * that opens a SQLite URL without it gets an error naming the package instead of a resolver trace.
 */
async function importSqliteStore(): Promise<typeof import('./sqlite/sqlite-store.js')> {
  try {
    return await import('./sqlite/sqlite-store.js');
  } catch (error) {
    if (!isMissingPackage(error, SQLITE_DRIVER_PACKAGE)) throw error;
    throw new DocketError(
      'missing_dependency',
      `SQLite store URLs need the optional package "${SQLITE_DRIVER_PACKAGE}", which is not installed: ` +
        `run "npm install ${SQLITE_DRIVER_PACKAGE}" (it compiles a native addon), or use a postgres:// URL`,
      { cause: error },
    );
  }
}

/** True when `error` says the package `name` itself could not be found (not a module inside it). */
function isMissingPackage(error: unknown, name: string): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false;
  return typeof message === 'string' && (message.includes(`'${name}'`) || message.includes(`"${name}"`));
}

/** One schema migration a store lacks, with the SQL that applies it (schema already substituted). */
export interface PendingMigration {
  version: number;
  name: string;
  sql: string;
}

/**
 * What a store URL holds, read without creating, migrating or locking anything: for read-only
 * commands (which must never create a database a typo named) and `docket migrate --dry-run`.
 */
export interface StoreInspection {
  /** SQLite: the file exists. PostgreSQL: the schema exists. */
  exists: boolean;
  /** Docket's migration table is there, so this is a Docket store (possibly an outdated one). */
  hasDocketSchema: boolean;
  /** The PostgreSQL schema inspected; undefined for SQLite. */
  schema: string | undefined;
  /** Migration versions recorded in the store, ascending. */
  appliedVersions: number[];
  /** Migrations this build has and the store lacks, oldest first, with their SQL. */
  pending: PendingMigration[];
  /**
   * The statements that create the migration table (and the schema) when missing: the script
   * `docket migrate --sql` prints starts with them, so an operator can run it on an empty database.
   */
  bootstrapSql: string;
  /** The SQL that records one applied migration, for scripts that apply migrations by hand. */
  recordSql(migration: PendingMigration): string;
  /**
   * PostgreSQL: the functions Docket keeps its hottest statements in (decision 0013) that the
   * schema lacks, with the statements that create them; opening the store creates them, and a
   * script that applies migrations by hand must too. Empty for SQLite.
   */
  missingFunctions: { name: string; sql: string }[];
}

/** Options of {@link inspectStore}. */
export interface InspectStoreOptions {
  /** PostgreSQL schema (default: the URL's `?schema=`, else `docket`). */
  schema?: string | undefined;
  /** PostgreSQL: how long to keep retrying a server that refuses connections, ms (default 30 000). */
  connectTimeoutMs?: number | undefined;
}

/**
 * Reads a store's migration state read-only. The migration table DDL here mirrors the one the
 * stores' migration runners create (src/store/sqlite/migrations.ts, src/store/postgres/migrations.ts);
 * test/cli/migrate-command.test.ts checks that a store built from the printed script is one the
 * runners accept as complete.
 */
export async function inspectStore(url: string, options: InspectStoreOptions = {}): Promise<StoreInspection> {
  const location = parseStoreUrl(url);
  if (location.kind === 'sqlite') return inspectSqlite(location.path);
  return inspectPostgres(location.url, options);
}

async function inspectSqlite(path: string): Promise<StoreInspection> {
  const { SQLITE_MIGRATIONS } = await import('./sqlite/migrations.js');
  const bootstrapSql = `CREATE TABLE IF NOT EXISTS docket_migrations (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at INTEGER NOT NULL
) STRICT;`;
  const recordSql = (migration: PendingMigration) =>
    `INSERT INTO docket_migrations (version, name, applied_at) VALUES (${migration.version}, ${sqlText(migration.name)}, CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER));`;
  const all = SQLITE_MIGRATIONS.map(({ version, name, sql }) => ({ version, name, sql: sql.trim() }));
  const { existsSync } = await import('node:fs');
  if (path === ':memory:' || !existsSync(path)) {
    return {
      exists: false,
      hasDocketSchema: false,
      schema: undefined,
      appliedVersions: [],
      pending: all,
      bootstrapSql,
      recordSql,
      missingFunctions: [],
    };
  }
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'docket_migrations'").get();
    const appliedVersions = table
      ? db
          .prepare('SELECT version FROM docket_migrations ORDER BY version')
          .pluck()
          .all()
          .map((version) => Number(version))
      : [];
    const applied = new Set(appliedVersions);
    return {
      exists: true,
      hasDocketSchema: table !== undefined,
      schema: undefined,
      appliedVersions,
      pending: all.filter((migration) => !applied.has(migration.version)),
      bootstrapSql,
      recordSql,
      missingFunctions: [],
    };
  } finally {
    db.close();
  }
}

async function inspectPostgres(url: string, options: InspectStoreOptions): Promise<StoreInspection> {
  const {
    splitSchemaFromUrl,
    validateSchemaName,
    isTransientConnectionError,
    DEFAULT_POSTGRES_SCHEMA,
    DEFAULT_CONNECT_TIMEOUT_MS,
    postgresStoredStatements,
  } = await import('./postgres/postgres-store.js');
  const { POSTGRES_MIGRATIONS, quoteIdentifier } = await import('./postgres/migrations.js');
  const { missingStoredStatements } = await import('./postgres/stored-statements.js');
  const split = splitSchemaFromUrl(url);
  const schema = validateSchemaName(options.schema ?? split.schema ?? DEFAULT_POSTGRES_SCHEMA);
  const s = quoteIdentifier(schema);
  const bootstrapSql = `CREATE SCHEMA IF NOT EXISTS ${s};
CREATE TABLE IF NOT EXISTS ${s}.migrations (
  version    integer     PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);`;
  const recordSql = (migration: PendingMigration) =>
    `INSERT INTO ${s}.migrations (version, name) VALUES (${migration.version}, ${sqlText(migration.name)});`;
  const all = POSTGRES_MIGRATIONS.map(({ version, name, sql }) => ({ version, name, sql: sql(s).trim() }));
  const { default: pg } = await import('pg');
  const timeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({
      connectionString: split.url,
      connectionTimeoutMillis: Math.max(250, Math.min(timeoutMs, 10_000)),
    });
    client.on('error', () => {});
    try {
      await client.connect();
      const found = await client.query<{ schema_exists: boolean; table: string | null }>(
        'SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema_exists, to_regclass($2)::text AS table',
        [schema, `${s}.migrations`],
      );
      const row = found.rows[0];
      const appliedVersions =
        row?.table != null
          ? (await client.query<{ version: number }>(`SELECT version FROM ${s}.migrations ORDER BY version`)).rows.map(
              (r) => Number(r.version),
            )
          : [];
      const applied = new Set(appliedVersions);
      const missing = await missingStoredStatements(client, schema, postgresStoredStatements(schema));
      return {
        exists: row?.schema_exists === true,
        hasDocketSchema: row?.table != null,
        schema,
        appliedVersions,
        pending: all.filter((migration) => !applied.has(migration.version)),
        bootstrapSql,
        recordSql,
        missingFunctions: missing.map((statement) => ({ name: statement.functionName, sql: statement.createSql })),
      };
    } catch (error) {
      if (!isTransientConnectionError(error) || Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    } finally {
      await client.end().catch(() => {});
    }
  }
}

/** A SQL string literal. */
function sqlText(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/** One shard of a sharded store, as `docket shards list` shows it. */
export interface ShardDescription {
  number: number;
  /** The URL as listed, password masked. */
  url: string;
  schema: string;
  draining: boolean;
  /** Marked down after a connection loss, until a probe finds it back. */
  down: boolean;
}

/** The administration a sharded store offers (src/store/sharded/); the CLI reaches it through {@link shardAdminOf}. */
export interface ShardAdmin {
  describeShards(): ShardDescription[];
  setDraining(url: string, draining: boolean): Promise<{ number: number; schedulesMoved: number }>;
  shardLoad(url: string): Promise<{ number: number; live: number; schedules: number; draining: boolean }>;
}

/** The store's shard administration when it is a sharded store, else null. */
export function shardAdminOf(store: Store): ShardAdmin | null {
  const candidate = store as Partial<ShardAdmin>;
  return typeof candidate.describeShards === 'function' &&
    typeof candidate.setDraining === 'function' &&
    typeof candidate.shardLoad === 'function'
    ? (store as unknown as ShardAdmin)
    : null;
}
