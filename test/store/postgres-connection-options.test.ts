/**
 * The connection options reach the server: each session carries the statement and
 * idle-in-transaction timeouts asked for; a statement stuck on a lock is cancelled by the pool's
 * statement timeout while pruning (maintenance) waits it out; `listenUrl` moves the LISTEN
 * connection elsewhere, and `listenUrl: false` opens none (the store then says it has no
 * cross-process wake-ups, so workers poll).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { assertPostgresReachable, POSTGRES_URL } from '../support/stores.js';

const opened: PostgresStore[] = [];
const schemas: string[] = [];
let admin: pg.Client;

beforeAll(async () => {
  await assertPostgresReachable();
  admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((store) => store.close()));
  for (const schema of schemas.splice(0)) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
});
afterAll(async () => {
  await admin?.end();
});

function named(): { schema: string; applicationName: string; url: string } {
  const suffix = randomBytes(5).toString('hex');
  const schema = `t_connopt_${suffix}`;
  schemas.push(schema);
  const applicationName = `docket_connopt_${suffix}`;
  return { schema, applicationName, url: `${POSTGRES_URL}?application_name=${applicationName}` };
}

async function open(url: string, options: Parameters<typeof PostgresStore.open>[1]): Promise<PostgresStore> {
  const store = await PostgresStore.open(url, options);
  opened.push(store);
  return store;
}

/** Backends of `applicationName` whose last statement was a LISTEN. */
async function listeners(applicationName: string): Promise<number> {
  const result = await admin.query<{ n: string }>(
    `SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'`,
    [applicationName],
  );
  return Number(result.rows[0]?.n);
}

describe('PostgreSQL connection options', () => {
  it('opens pool sessions with the statement and idle-in-transaction timeouts asked for', async () => {
    const { schema, url } = named();
    const store = await open(url, { schema, statementTimeoutMs: 12_000, idleInTransactionTimeoutMs: 7000 });
    const result = await store.db.query<{ statement: string; idle: string }>(
      `SELECT current_setting('statement_timeout') AS statement, current_setting('idle_in_transaction_session_timeout') AS idle`,
    );
    expect(result.rows).toEqual([{ statement: '12s', idle: '7s' }]);
  });

  it('sends no statement timeout when it is 0, leaving the server setting', async () => {
    const { schema, url } = named();
    const store = await open(url, { schema, statementTimeoutMs: 0 });
    // The admin session sent no statement_timeout either: both see the server's (or role's) own value.
    const server = await admin.query<{ statement: string }>(`SELECT current_setting('statement_timeout') AS statement`);
    const result = await store.db.query<{ statement: string }>(
      `SELECT current_setting('statement_timeout') AS statement`,
    );
    expect(result.rows).toEqual(server.rows);
    expect(result.rows[0]?.statement).not.toBe('30s');
  });

  it('cancels a pool statement stuck on a lock at the statement timeout, while pruning waits the lock out', async () => {
    const { schema, url } = named();
    const store = await open(url, { schema, statementTimeoutMs: 300 });
    const blocker = new pg.Client({ connectionString: POSTGRES_URL });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query(`LOCK TABLE "${schema}".jobs IN ACCESS EXCLUSIVE MODE`);
      const startedAt = performance.now();
      await expect(store.jobGet({ id: '1' })).rejects.toMatchObject({ code: '57014' });
      expect(performance.now() - startedAt).toBeGreaterThanOrEqual(250);
      // Pruning runs on the maintenance connection: no statement timeout, so it outlasts the lock.
      const pruning = store.jobPruneFinished({ finishedBefore: new Date() });
      await new Promise((resolve) => setTimeout(resolve, 800));
      await blocker.query('ROLLBACK');
      expect(await pruning).toBe(0);
      // The pool carries on after the cancellation.
      expect(await store.jobGet({ id: '1' })).toBeNull();
    } finally {
      await blocker.end();
    }
  });

  it('LISTENs on listenUrl when given, not on the store URL', async () => {
    const { schema, applicationName, url } = named();
    const listenName = `${applicationName}_l`;
    const store = await open(url, {
      schema,
      listenUrl: `${POSTGRES_URL}?application_name=${listenName}&schema=ignored`,
    });
    expect(store.capabilities.listenNotify).toBe(true);
    const unsubscribe = await store.subscribe(() => {});
    await expect.poll(() => listeners(listenName), { timeout: 5000 }).toBe(1);
    expect(await listeners(applicationName)).toBe(0);
    await unsubscribe();
    await expect.poll(() => listeners(listenName), { timeout: 5000 }).toBe(0);
  });

  it('opens no LISTEN connection with listenUrl: false, and says it has no cross-process wake-ups', async () => {
    const { schema, applicationName, url } = named();
    const store = await open(url, { schema, listenUrl: false });
    expect(store.capabilities.listenNotify).toBe(false);
    const unsubscribe = await store.subscribe(() => {});
    await new Promise((resolve) => setTimeout(resolve, 300));
    const backends = await admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE application_name LIKE $1 AND query LIKE 'LISTEN %'`,
      [`${applicationName}%`],
    );
    expect(Number(backends.rows[0]?.n)).toBe(0);
    await unsubscribe();
  });
});
