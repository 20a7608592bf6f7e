/**
 * A PostgreSQL connection lost while checked out of the pool must fail the operation in flight,
 * never the process (issue 13: `docket work` exited 1 with "Unhandled 'error' event" when its
 * schedule sweep's backend was terminated). Each case makes a store's operation wait on a lock
 * held by a blocker connection, so its backend is known to be mid-transaction, terminates exactly
 * that backend (found by this test's own application_name and the lock wait), and checks that no
 * uncaught exception was raised and that the next call works on a fresh connection.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { normalizeSubmit } from '../../src/job/job-spec.js';
import { normalizeScheduleSpec } from '../../src/schedule/schedule.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { assertPostgresReachable, POSTGRES_URL } from '../support/stores.js';

/** Errors that escaped to the process: each one would have killed a `docket work` process. */
const uncaught: unknown[] = [];
const trap = (error: unknown) => uncaught.push(error);
beforeAll(async () => {
  await assertPostgresReachable();
  process.on('uncaughtException', trap);
});
afterAll(() => {
  process.off('uncaughtException', trap);
});

const opened: PostgresStore[] = [];
const blockers: pg.Client[] = [];
const schemas: string[] = [];
afterEach(async () => {
  uncaught.length = 0;
  await Promise.all(blockers.splice(0).map((client) => client.end().catch(() => {})));
  await Promise.all(opened.splice(0).map((store) => store.close()));
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  try {
    for (const schema of schemas.splice(0)) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await admin.end();
  }
});

/** A schema and an application_name that no other test uses, so only our backends are touched. */
function isolation(): { schema: string; applicationName: string; url: string } {
  const suffix = randomBytes(5).toString('hex');
  const schema = `t_connloss_${suffix}`;
  schemas.push(schema);
  const applicationName = `docket_connloss_${suffix}`;
  const url = `${POSTGRES_URL}${POSTGRES_URL.includes('?') ? '&' : '?'}application_name=${applicationName}`;
  return { schema, applicationName, url };
}

async function blocker(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, application_name: 'docket_connloss_blocker' });
  client.on('error', () => {});
  await client.connect();
  blockers.push(client);
  return client;
}

/** Waits until one backend of `applicationName` is waiting on a lock, and returns its pid. */
async function waitingBackend(client: pg.Client, applicationName: string): Promise<number> {
  let pid: number | undefined;
  await expect
    .poll(
      async () => {
        const result = await client.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
          [applicationName],
        );
        pid = result.rows[0]?.pid;
        return result.rowCount;
      },
      { timeout: 10_000, interval: 20 },
    )
    .toBe(1);
  return pid as number;
}

async function terminate(client: pg.Client, pid: number): Promise<void> {
  const result = await client.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [pid]);
  expect(result.rows).toEqual([{ ok: true }]);
}

/** Lets the dead socket's 'end' and 'error' events run before the assertions. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe('PostgresStore when a checked-out connection is lost', () => {
  it('opens its sessions with the default idle-in-transaction and statement timeouts, under the URL’s application_name', async () => {
    const { schema, applicationName, url } = isolation();
    const store = await PostgresStore.open(url, { schema, poolSize: 1 });
    opened.push(store);
    const settings = await store.db.query<{ idle: string; statement: string; named: boolean }>(
      `SELECT current_setting('idle_in_transaction_session_timeout') AS idle,
              current_setting('statement_timeout') AS statement,
              (SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = pg_backend_pid() AND application_name = $1) AS named`,
      [applicationName],
    );
    expect(settings.rows).toEqual([{ idle: '1min', statement: '30s', named: true }]);
  });

  it('a schedule sweep whose backend is terminated mid-transaction fails, the process survives, the next sweep works', async () => {
    const { schema, applicationName, url } = isolation();
    const store = await PostgresStore.open(url, { schema, poolSize: 2 });
    opened.push(store);
    const lockHolder = await blocker();
    await lockHolder.query('BEGIN');
    await lockHolder.query(`LOCK TABLE "${schema}".schedules IN ACCESS EXCLUSIVE MODE`);

    const sweep = store.scheduleRepair();
    const swept = sweep.then(
      () => 'resolved',
      (error: Error) => error.message,
    );
    await terminate(lockHolder, await waitingBackend(lockHolder, applicationName));
    expect(await swept).toMatch(/terminat/i);
    await settle();
    expect(uncaught).toEqual([]);

    await lockHolder.query('ROLLBACK');
    expect(await store.scheduleRepair()).toBe(0);
    const [submitted] = await store.jobSubmit({ jobs: [normalizeSubmit({ kind: 'after.loss' })] });
    const claimed = await store.jobClaim({ queues: ['default'], owner: 'w1', limit: 1, leaseMs: 30_000 });
    expect(claimed.map((job) => job.id)).toEqual([submitted!.id]);
    // The dead client was destroyed, not returned: every pooled connection is a live backend.
    const live = await lockHolder.query<{ count: string }>(
      'SELECT count(*) FROM pg_stat_activity WHERE application_name = $1',
      [applicationName],
    );
    const pool = store.db as pg.Pool;
    expect(Number(live.rows[0]!.count)).toBe(pool.totalCount);
    expect(uncaught).toEqual([]);
  });

  it('a schedule upsert terminated while it waits fails without sending ROLLBACK on the dead client, and the store carries on', async () => {
    const { schema, applicationName, url } = isolation();
    const store = await PostgresStore.open(url, { schema, poolSize: 1 });
    opened.push(store);
    const lockHolder = await blocker();
    await lockHolder.query('BEGIN');
    await lockHolder.query(`LOCK TABLE "${schema}".schedules IN ACCESS EXCLUSIVE MODE`);
    const spec = normalizeScheduleSpec({ id: 'nightly', cron: '0 3 * * *', job: { kind: 'report' } });
    const upsert = store.scheduleUpsert({ spec }).then(
      () => 'resolved',
      (error: Error) => error.message,
    );
    await terminate(lockHolder, await waitingBackend(lockHolder, applicationName));
    // The connection's own error, not "Client has encountered a connection error and is not queryable"
    // from a ROLLBACK sent on the dead client.
    const message = await upsert;
    expect(message).toMatch(/terminat/i);
    expect(message).not.toMatch(/not queryable/);
    await settle();
    expect(uncaught).toEqual([]);
    await lockHolder.query('ROLLBACK');
    // poolSize 1: this only works if the dead client left the pool.
    expect(await store.scheduleList({})).toEqual([]);
    expect(uncaught).toEqual([]);
  });

  it('open survives its migration backend being terminated while it waits for the migration lock', async () => {
    const { schema, applicationName, url } = isolation();
    const lockHolder = await blocker();
    await lockHolder.query('SELECT pg_advisory_lock(hashtext($1))', [`docket.migrate:${schema}`]);
    const opening = PostgresStore.open(url, { schema, poolSize: 1, connectTimeoutMs: 20_000 });
    opening.then(
      (store) => opened.push(store),
      () => {},
    );
    await terminate(lockHolder, await waitingBackend(lockHolder, applicationName));
    await settle();
    expect(uncaught).toEqual([]);
    // The open retries (57P01 is transient) and waits for the lock again; release it.
    await lockHolder.query('SELECT pg_advisory_unlock(hashtext($1))', [`docket.migrate:${schema}`]);
    const store = await opening;
    expect(await store.now()).toBeInstanceOf(Date);
    expect(uncaught).toEqual([]);
  });
});
