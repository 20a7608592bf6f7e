/**
 * Test access to real databases. Every test file gets its own PostgreSQL schema (or SQLite file)
 * so files can run in parallel. PostgreSQL is required: when it cannot be reached the tests fail,
 * they never skip, unless a developer explicitly sets DOCKET_SKIP_POSTGRES=1 outside CI.
 *
 * A third kind, `postgres-pgbouncer`, is the same PostgreSQL reached through a real pgbouncer in
 * `pool_mode = transaction` (test/support/pgbouncer.ts) with `listenUrl: false`: no session state
 * at all on the pooled connections, wake-ups by polling. The conformance suite runs on it
 * ({@link conformanceStoreKinds}); in CI a missing pgbouncer fails it rather than skipping it.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { acquirePgbouncer, pgbouncerAvailable, targetOf } from './pgbouncer.js';
import { acquireShardClusters, dropShardSchema, SHARD_CLUSTER_PORTS, shardSchemaUrl } from './shard-clusters.js';

/** The PostgreSQL server the tests use. */
export const POSTGRES_URL = process.env.DOCKET_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export type StoreKind = 'sqlite' | 'postgres' | 'postgres-pgbouncer' | 'postgres-sharded';

/** Which stores a suite runs against. PostgreSQL is left out only on an explicit local opt-out. */
export function storeKinds(): StoreKind[] {
  const skipPostgres = process.env.DOCKET_SKIP_POSTGRES === '1' && process.env.CI !== 'true';
  return skipPostgres ? ['sqlite'] : ['sqlite', 'postgres'];
}

/**
 * The kinds the conformance suite runs against: {@link storeKinds} plus PostgreSQL through
 * pgbouncer in transaction mode, when pgbouncer is installed, and always in CI (where its absence
 * must fail the suite: `.ci/run` installs it).
 */
export function conformanceStoreKinds(): StoreKind[] {
  const kinds = storeKinds();
  if (!kinds.includes('postgres')) return kinds;
  const withPooler: StoreKind[] = pgbouncerAvailable() ? [...kinds, 'postgres-pgbouncer'] : kinds;
  // The sharded store: 3 schemas on the 3 throwaway clusters of test/support/shard-clusters.ts.
  // scripts/run-node-lines.mjs turns it off for the extra Node lines: the sharded store is the
  // same TypeScript over the same driver on every line, and its 3 clusters cost CI time each run.
  return process.env.DOCKET_SHARDED_CONFORMANCE === 'off' ? withPooler : [...withPooler, 'postgres-sharded'];
}

/** A fresh, empty database location for one test file or test. */
export interface TestDatabase {
  kind: StoreKind;
  /** The URL to open it (for child processes and the CLI). */
  url: string;
  /** Extra open options (the PostgreSQL schema). */
  schema?: string;
  /** A sharded store's shard URLs (kind `postgres-sharded`; `url` is then only its first shard). */
  shards?: readonly string[];
  /** Opens a store on it; call as often as you need connections (multi-worker tests). */
  open(): Promise<Store>;
  /** Drops the schema / deletes the file. */
  drop(): Promise<void>;
}

/** Creates an isolated database for `kind`: a new schema on PostgreSQL, a new file for SQLite. */
export async function createTestDatabase(kind: StoreKind): Promise<TestDatabase> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'docket-test-'));
    const url = `sqlite:${join(dir, 'docket.db')}`;
    return {
      kind,
      url,
      open: () => openStore(url),
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  await assertPostgresReachable();
  const schema = `t_${randomBytes(6).toString('hex')}`;
  if (kind === 'postgres-sharded') {
    await acquireShardClusters();
    const shards = SHARD_CLUSTER_PORTS.map((port) => shardSchemaUrl(port, schema));
    return {
      kind,
      // No single URL names a sharded store; child processes and the CLI take `shards`.
      url: shards[0]!,
      shards,
      schema,
      open: () => openStore(undefined, { shards }),
      // The clusters stay up for the rest of this process (other files and tests share them);
      // the last process of the run to exit stops them (test/support/shard-clusters.ts).
      drop: async () => {
        await Promise.all(SHARD_CLUSTER_PORTS.map((port) => dropShardSchema(port, schema)));
      },
    };
  }
  const dropSchema = async () => {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      await client.end();
    }
  };
  if (kind === 'postgres-pgbouncer') {
    const { bouncer, release } = await acquirePgbouncer(targetOf(POSTGRES_URL));
    try {
      // The kind means nothing unless the pooler really is in transaction mode: ask it.
      const poolMode = (await bouncer.config()).get('pool_mode');
      if (poolMode !== 'transaction') throw new Error(`the test pgbouncer runs pool_mode=${poolMode}, not transaction`);
    } catch (error) {
      await release();
      throw error;
    }
    const pooledUrl = bouncer.url(new URL(POSTGRES_URL).pathname.slice(1));
    return {
      kind,
      url: `${pooledUrl}?schema=${schema}`,
      schema,
      open: () => openStore(pooledUrl, { schema, listenUrl: false }),
      drop: async () => {
        try {
          await dropSchema();
        } finally {
          await release();
        }
      },
    };
  }
  const url = `${POSTGRES_URL}${POSTGRES_URL.includes('?') ? '&' : '?'}schema=${schema}`;
  return {
    kind,
    url,
    schema,
    open: () => openStore(POSTGRES_URL, { schema }),
    drop: dropSchema,
  };
}

/** Fails loudly (never skips) when PostgreSQL is not there. */
export async function assertPostgresReachable(): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (error) {
    throw new Error(
      `PostgreSQL is required for these tests and is not reachable at ${POSTGRES_URL} (${(error as Error).message}). ` +
        'Start it with: pg_ctlcluster --skip-systemctl-redirect 15 main start',
    );
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Runs a SQL script against a test database as an operator would with sqlite3 or psql: on the
 * SQLite file, or on the PostgreSQL server (name the schema's tables qualified: no search_path).
 */
export async function runSqlScript(db: TestDatabase, script: string): Promise<void> {
  if (db.kind === 'sqlite') {
    const { default: Database } = await import('better-sqlite3');
    const sqlite = new Database(db.url.replace(/^sqlite:/, ''));
    try {
      sqlite.exec(script);
    } finally {
      sqlite.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    await client.query(script);
  } finally {
    await client.end();
  }
}
