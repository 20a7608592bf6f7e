/**
 * Each shard's identity, kept in its own schema (`<schema>.shard_identity`, one row): its shard
 * number (which fixes its id range, shard-ids.ts), a random uuid (so two URLs that reach the same
 * schema are recognised as one shard) and whether it is draining (no new work is routed to it).
 * Stored in the shard, not in any process's configuration, so every process that opens the
 * shard list agrees on numbers whatever order it lists them in, and a shard keeps its number
 * (its ids keep routing to it) when shards are added or removed. The job sequence is narrowed to
 * the number's range when the number is given, before any job of the sharded store is written.
 *
 * Each shard also keeps a copy of the list's directory (`<schema>.shard_directory`: every
 * shard's location key, number, uuid and draining flag, as the processes that opened the list
 * last saw them). It answers one question: which number a shard has while that shard itself is
 * down, so a process can open the list, route keys and take work from the other shards before
 * the missing shard answers (sharded-store.ts, "deferred shards").
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { ConfigurationError } from '../../job/errors.js';
import { redactStoreUrl } from '../open-store.js';
import {
  type PostgresClientSettings,
  postgresClientConfig,
  type ResolvedPostgresConnectionOptions,
} from '../postgres/connection-options.js';
import { quoteIdentifier } from '../postgres/migrations.js';
import { DEFAULT_POSTGRES_SCHEMA, splitSchemaFromUrl, validateSchemaName } from '../postgres/postgres-store.js';
import { MAX_SHARD_NUMBER, shardIdRange } from './shard-ids.js';

/** A shard's identity row. */
export interface ShardIdentity {
  shardNumber: number;
  uuid: string;
  draining: boolean;
}

/** Where one shard lives: its connection URL (without `?schema=`) and schema. */
export interface ShardLocation {
  /** The URL as the caller gave it (for messages, redacted). */
  given: string;
  url: string;
  schema: string;
  /**
   * The `pg` settings of the connections the sharded store opens to this shard itself (identity
   * and directory reads and writes, a keyed batch's transaction): the store's connection options,
   * as its pooled connections have them (connect attempt timeout, keepalives, statement and
   * read timeouts). Without them, a read of a shard whose network hung waited for TCP to give up
   * (many minutes), and the identity refresh, one shard after another, stopped with it.
   */
  client: PostgresClientSettings;
}

/** What the sharded store's own connections are called in `pg_stat_activity`. */
export const SHARD_ADMIN_APPLICATION = 'docket-shard-admin';

/**
 * Parses a shard URL into its connection URL and schema (`?schema=`, else `schema`, else docket);
 * `connection` gives the store's own connections to it their timeouts.
 */
export function shardLocation(
  given: string,
  schemaOption: string | undefined,
  connection: ResolvedPostgresConnectionOptions,
): ShardLocation {
  const split = splitSchemaFromUrl(given);
  return {
    given,
    url: split.url,
    schema: validateSchemaName(split.schema ?? schemaOption ?? DEFAULT_POSTGRES_SCHEMA),
    client: { ...postgresClientConfig(split.url, connection, 'pool'), application_name: SHARD_ADMIN_APPLICATION },
  };
}

/** The SQL of the identity table, idempotent. */
function createIdentitySql(schema: string): string {
  const s = quoteIdentifier(schema);
  return `CREATE TABLE IF NOT EXISTS ${s}.shard_identity (
    singleton    boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    shard_number integer     NOT NULL CHECK (shard_number BETWEEN 0 AND ${MAX_SHARD_NUMBER}),
    shard_uuid   text        NOT NULL,
    draining     boolean     NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now()
  )`;
}

/**
 * A shard URL reduced to what names a database schema (host, port, database, schema): for
 * duplicate checks and as the shard directory's key. `localhost` is 127.0.0.1; the default port is 5432.
 */
export function shardLocationKey(url: string, schemaOption?: string): string {
  try {
    const parsed = new URL(url);
    const host = parsed.hostname.toLowerCase().replace(/^localhost$/, '127.0.0.1');
    const schema = parsed.searchParams.get('schema') ?? schemaOption ?? '';
    return `${host}:${parsed.port || '5432'}${parsed.pathname}?${schema}`;
  } catch {
    return url;
  }
}

/** The key a shard is recorded under in the shard directories. */
export function directoryKey(location: ShardLocation): string {
  return shardLocationKey(location.given, location.schema);
}

/** The SQL of the directory table, idempotent. */
function createDirectorySql(schema: string): string {
  const s = quoteIdentifier(schema);
  return `CREATE TABLE IF NOT EXISTS ${s}.shard_directory (
    location_key text        PRIMARY KEY,
    shard_number integer     NOT NULL,
    shard_uuid   text        NOT NULL,
    draining     boolean     NOT NULL DEFAULT false,
    recorded_at  timestamptz NOT NULL DEFAULT now()
  )`;
}

/**
 * A new connection to the shard with its {@link ShardLocation.client} settings (`application` in
 * `pg_stat_activity`, the store's admin name by default); a connect that fails leaves nothing open.
 */
export async function connectShardClient(location: ShardLocation, application?: string): Promise<pg.Client> {
  const client = new pg.Client(
    application === undefined ? location.client : { ...location.client, application_name: application },
  );
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => {});
    throw error;
  }
  return client;
}

/** Runs `fn` on a fresh client of the shard ({@link connectShardClient}), closed after. */
export async function withShardClient<T>(location: ShardLocation, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await connectShardClient(location);
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** The shard's identity, or null when it was never numbered. Creates the (empty) table if missing. */
export async function readShardIdentity(location: ShardLocation): Promise<ShardIdentity | null> {
  return withShardClient(location, async (client) => {
    await ensureIdentityTable(client, location.schema);
    return identityOf(client, location.schema);
  });
}

/**
 * Creates the identity table under a transaction-scoped advisory lock: two processes opening the
 * same fresh shard at once would otherwise race in CREATE TABLE IF NOT EXISTS (a duplicate
 * pg_type row) and one of them would fail to open.
 */
async function ensureIdentityTable(client: pg.Client, schema: string): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`docket.shard_identity:${schema}`]);
    await client.query(createIdentitySql(schema));
    await client.query(createDirectorySql(schema));
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

async function identityOf(client: pg.Client, schema: string): Promise<ShardIdentity | null> {
  const s = quoteIdentifier(schema);
  const rows = await client.query<{ shard_number: number; shard_uuid: string; draining: boolean }>(
    `SELECT shard_number, shard_uuid, draining FROM ${s}.shard_identity`,
  );
  const row = rows.rows[0];
  return row ? { shardNumber: row.shard_number, uuid: row.shard_uuid, draining: row.draining } : null;
}

/**
 * Gives a fresh shard its number and narrows its job sequence to the number's id range, in one
 * transaction. Refused when the shard already holds jobs outside that range (a store used alone
 * before can only become shard 0, whose range starts at 1). When another process numbered it
 * first, that number is kept and returned.
 */
export async function assignShardNumber(location: ShardLocation, shardNumber: number): Promise<ShardIdentity> {
  const { first, last } = shardIdRange(shardNumber);
  const s = quoteIdentifier(location.schema);
  return withShardClient(location, async (client) => {
    await client.query('BEGIN');
    try {
      await client.query(`LOCK TABLE ${s}.shard_identity IN EXCLUSIVE MODE`);
      const existing = await identityOf(client, location.schema);
      if (existing) {
        await client.query('COMMIT');
        return existing;
      }
      const held = await client.query<{ low: string | null; high: string | null }>(
        `SELECT min(id)::text AS low, max(id)::text AS high FROM (
           SELECT id FROM ${s}.jobs UNION ALL SELECT id FROM ${s}.dead_jobs) AS ids`,
      );
      const low = held.rows[0]?.low;
      const high = held.rows[0]?.high;
      if ((low != null && Number(low) < first) || (high != null && Number(high) > last)) {
        throw new ConfigurationError(
          `shard ${redactStoreUrl(location.given)} already holds job ids ${low}..${high}, outside the range ` +
            `${first}..${last} of shard number ${shardNumber}; only an empty store (or one used alone before, as shard 0) can join`,
        );
      }
      const sequence = `${s}.jobs_id_seq`;
      const current = await client.query<{ last_value: string; is_called: boolean }>(
        `SELECT last_value::text, is_called FROM ${sequence}`,
      );
      const next = current.rows[0]!.is_called
        ? Number(current.rows[0]!.last_value) + 1
        : Number(current.rows[0]!.last_value);
      const restart = Math.max(first, next);
      await client.query(
        `ALTER SEQUENCE ${sequence} MINVALUE ${first} MAXVALUE ${last} START WITH ${first} RESTART WITH ${restart}`,
      );
      const uuid = randomUUID();
      await client.query(`INSERT INTO ${s}.shard_identity (shard_number, shard_uuid) VALUES ($1, $2)`, [
        shardNumber,
        uuid,
      ]);
      await client.query('COMMIT');
      return { shardNumber, uuid, draining: false };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    }
  });
}

/** One shard as a directory records it. */
export interface ShardDirectoryEntry {
  locationKey: string;
  identity: ShardIdentity;
}

/**
 * Records `entries` in the directory of the shard at `location` (newer entries replace older
 * ones of the same location key). The table exists: readShardIdentity created it.
 */
export async function recordShardDirectory(
  location: ShardLocation,
  entries: readonly ShardDirectoryEntry[],
): Promise<void> {
  if (entries.length === 0) return;
  const s = quoteIdentifier(location.schema);
  await withShardClient(location, (client) =>
    client.query(
      `INSERT INTO ${s}.shard_directory AS d (location_key, shard_number, shard_uuid, draining)
       SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::boolean[])
       ON CONFLICT (location_key) DO UPDATE
         SET shard_number = excluded.shard_number, shard_uuid = excluded.shard_uuid,
             draining = excluded.draining, recorded_at = now()`,
      [
        entries.map((entry) => entry.locationKey),
        entries.map((entry) => entry.identity.shardNumber),
        entries.map((entry) => entry.identity.uuid),
        entries.map((entry) => entry.identity.draining),
      ],
    ),
  );
}

/**
 * Every entry of the directory of the shard at `location`, by location key. The table exists:
 * readShardIdentity created it (opening reads every answering shard's identity first).
 */
export async function readShardDirectory(location: ShardLocation): Promise<Map<string, ShardIdentity>> {
  const s = quoteIdentifier(location.schema);
  const { rows } = await withShardClient(location, (client) =>
    client.query<{ location_key: string; shard_number: number; shard_uuid: string; draining: boolean }>(
      `SELECT location_key, shard_number, shard_uuid, draining FROM ${s}.shard_directory`,
    ),
  );
  return new Map(
    rows.map((row) => [
      row.location_key,
      { shardNumber: row.shard_number, uuid: row.shard_uuid, draining: row.draining },
    ]),
  );
}

/** Marks a shard draining (no new work routed to it) or active again; returns its identity. */
export async function setShardDraining(location: ShardLocation, draining: boolean): Promise<ShardIdentity | null> {
  const s = quoteIdentifier(location.schema);
  return withShardClient(location, async (client) => {
    await ensureIdentityTable(client, location.schema);
    await client.query(`UPDATE ${s}.shard_identity SET draining = $1`, [draining]);
    return identityOf(client, location.schema);
  });
}

/**
 * Numbers for the shards of a list, given what each already holds: a numbered shard keeps its
 * number; a fresh one takes its list position when that is free, else the lowest free number.
 * Refuses two URLs that reach one shard (same uuid) and two shards holding one number.
 */
export function planShardNumbers(
  locations: readonly ShardLocation[],
  identities: readonly (ShardIdentity | null)[],
): number[] {
  const taken = new Map<number, number>();
  const uuids = new Map<string, number>();
  for (const [index, identity] of identities.entries()) {
    if (!identity) continue;
    const sameUuid = uuids.get(identity.uuid);
    if (sameUuid !== undefined) {
      throw new ConfigurationError(
        `shards ${redactStoreUrl(locations[sameUuid]!.given)} and ${redactStoreUrl(locations[index]!.given)} are the same database schema; list each shard once`,
      );
    }
    uuids.set(identity.uuid, index);
    const other = taken.get(identity.shardNumber);
    if (other !== undefined) {
      throw new ConfigurationError(
        `shards ${redactStoreUrl(locations[other]!.given)} and ${redactStoreUrl(locations[index]!.given)} both hold shard number ${identity.shardNumber}; ` +
          'one of them was copied from the other or numbered by another shard list',
      );
    }
    taken.set(identity.shardNumber, index);
  }
  const numbers: number[] = [];
  for (const [index, identity] of identities.entries()) {
    if (identity) {
      numbers.push(identity.shardNumber);
      continue;
    }
    let number = taken.has(index) ? 0 : index;
    while (taken.has(number)) number += 1;
    if (number > MAX_SHARD_NUMBER) throw new ConfigurationError(`at most ${MAX_SHARD_NUMBER + 1} shards`);
    taken.set(number, index);
    numbers.push(number);
  }
  return numbers;
}
