/**
 * Docket through a real pgbouncer 1.18 in `pool_mode = transaction` (test/support/pgbouncer.ts),
 * in front of the main PostgreSQL cluster: migrations from many processes at once, a worker that
 * finds other processes' jobs by polling alone (`listenUrl: false`), a worker woken through a
 * direct LISTEN connection (`listenUrl` = the direct URL) while every query goes through the
 * pooler, and the option's refusals. The conformance suite covers the store contract through the
 * same pooler (its `postgres-pgbouncer` kind).
 *
 * Runs when pgbouncer is installed, and always in CI, where a missing pgbouncer fails the file.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConfigurationError, Docket, type WorkerOptions } from '../../src/index.js';
import { migrationLockKey, POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { describeRun, startDocket } from '../cli/run-docket.js';
import {
  acquirePgbouncer,
  pgbouncerAvailable,
  type RunningPgbouncer,
  startPgbouncer,
  targetOf,
} from '../support/pgbouncer.js';
import { createTestDatabase, POSTGRES_URL, storeKinds, type TestDatabase } from '../support/stores.js';
import { deferred, within } from './support/deferred.js';

/**
 * A lease no stall of a loaded CI machine (1-2 s) outlasts, heartbeats at a tenth of it: these tests
 * count exact attempts but are not about leases, and with 2 s a stall could lapse a lease and the job
 * be taken back and run again (at-least-once, as designed).
 */
const QUICK: WorkerOptions = { leaseMs: 10_000, heartbeatIntervalMs: 1000, shutdownGraceMs: 1000 };

/** Runs `sql` on a direct (unpooled) connection to the main cluster: assertions only. */
async function direct<R extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    return (await client.query<R>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

/** Server sessions whose last statement LISTENed on `schema`'s wake-up channel. */
async function listenSessions(schema: string): Promise<number> {
  const [row] = await direct<{ n: number }>(
    'SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()',
    [`LISTEN "docket.${schema}.wake"`],
  );
  return row?.n ?? 0;
}

const runs = pgbouncerAvailable() && storeKinds().includes('postgres');

describe.runIf(runs)('Docket through pgbouncer in transaction mode', () => {
  let bouncer: RunningPgbouncer;
  let releaseBouncer: (() => Promise<void>) | undefined;
  const databases: TestDatabase[] = [];
  const dockets: Docket[] = [];

  let setupError: unknown;
  beforeAll(async () => {
    // Rethrown by every test (see freshDatabase), so a missing pgbouncer in CI counts as failed
    // tests with the install command, not as skipped ones.
    try {
      const acquired = await acquirePgbouncer(targetOf(POSTGRES_URL));
      bouncer = acquired.bouncer;
      releaseBouncer = acquired.release;
      expect((await bouncer.config()).get('pool_mode')).toBe('transaction');
    } catch (error) {
      setupError = error;
    }
  });

  afterEach(async () => {
    await Promise.all(dockets.splice(0).map((docket) => docket.close()));
    await Promise.all(databases.splice(0).map((db) => db.drop()));
  });

  afterAll(async () => {
    await releaseBouncer?.();
  });

  async function freshDatabase(): Promise<TestDatabase> {
    if (setupError !== undefined) throw setupError;
    const db = await createTestDatabase('postgres-pgbouncer');
    databases.push(db);
    return db;
  }

  async function openDocket(options: Parameters<typeof Docket.open>[0]): Promise<Docket> {
    const docket = await Docket.open(options);
    dockets.push(docket);
    return docket;
  }

  it('migrates a fresh schema exactly once when ten stores open it through the pooler at once, and holds no lock after', async () => {
    const db = await freshDatabase();
    // A session advisory lock taken and released by separate statements would hang here: through
    // the pooler the unlock runs on another server session and the lock is never released.
    const stores = await within(
      Promise.all(Array.from({ length: 10 }, () => db.open())),
      30_000,
      'ten concurrent opens through pgbouncer',
    );
    try {
      const versions = await direct<{ version: number }>(
        `SELECT version FROM "${db.schema}".migrations ORDER BY version`,
      );
      expect(versions.map((row) => row.version)).toEqual(POSTGRES_MIGRATIONS.map((migration) => migration.version));
      const [held] = await direct<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks
          WHERE locktype = 'advisory' AND objid = ((hashtext($1)::bigint & 4294967295)::text)::oid`,
        [migrationLockKey(db.schema as string)],
      );
      expect(held?.n).toBe(0);
    } finally {
      await Promise.all(stores.map((store) => store.close()));
    }
  });

  it('runs another process’s jobs end to end by polling alone with listenUrl false, retries included', async () => {
    const db = await freshDatabase();
    const pooled = db.url;
    expect(new URL(pooled).port).toBe(String(bouncer.port));
    const workerSide = await openDocket({ url: pooled, listenUrl: false });
    // A second Docket with its own pool stands for another process: its submits cannot wake the
    // worker in-process, and with no LISTEN anywhere only the worker's polls can find them.
    const submitter = await openDocket({ url: pooled, listenUrl: false });
    expect(workerSide.store.capabilities.listenNotify).toBe(false);

    const total = 40;
    const attemptsById = new Map<string, number>();
    const allDone = deferred();
    let completed = 0;
    workerSide.handle<{ n: number; failFirst: boolean }>('pooled.work', async (payload, ctx) => {
      attemptsById.set(ctx.jobId, ctx.attempt);
      // Every fourth job fails its first attempt: the fail → retry path also runs through the pooler.
      if (payload.failFirst && ctx.attempt === 1) throw new Error(`first attempt of ${payload.n} fails`);
    });
    workerSide.events.on('completed', () => {
      completed += 1;
      if (completed === total) allDone.resolve();
    });
    const worker = workerSide.worker({ ...QUICK, concurrency: 4, pollIntervalMs: 200 });
    await worker.start();
    expect(await listenSessions(db.schema as string)).toBe(0);

    const startedAt = Date.now();
    const ids: string[] = [];
    for (let n = 0; n < total; n++) {
      const submitted = await submitter.submit({
        kind: 'pooled.work',
        payload: { n, failFirst: n % 4 === 0 },
        maxAttempts: 3,
        retry: { baseDelayMs: 50, factor: 1, maxDelayMs: 50, jitterRatio: 0 },
      });
      ids.push(submitted.id);
    }
    await within(allDone.promise, 30_000, () => `all ${total} jobs completed (saw ${completed})`);
    const drainMs = Date.now() - startedAt;
    await worker.stop();
    console.log(`pgbouncer, listenUrl false, poll 200 ms: ${total} jobs (10 retried once) done in ${drainMs} ms`);

    for (const [index, id] of ids.entries()) {
      const job = await submitter.getJob(id);
      expect(job, id).toMatchObject({ state: 'done', attempts: index % 4 === 0 ? 2 : 1 });
      expect(attemptsById.get(id)).toBe(index % 4 === 0 ? 2 : 1);
    }
    expect(await listenSessions(db.schema as string)).toBe(0);
  });

  it('wakes a worker through a direct listenUrl at once, while every query goes through the pooler', async () => {
    const db = await freshDatabase();
    const workerSide = await openDocket({ url: db.url, listenUrl: POSTGRES_URL });
    const submitter = await openDocket({ url: db.url, listenUrl: false });
    expect(workerSide.store.capabilities.listenNotify).toBe(true);
    const ran = deferred<string>();
    workerSide.handle('pooled.wake', async (_payload, ctx) => ran.resolve(ctx.jobId));
    // A minute between polls: a job run within seconds was found by the NOTIFY, not by a poll.
    const worker = workerSide.worker({ ...QUICK, pollIntervalMs: 60_000 });
    await worker.start();
    await expect.poll(() => listenSessions(db.schema as string), { timeout: 10_000 }).toBe(1);

    const submittedAt = Date.now();
    const { id } = await submitter.submit({ kind: 'pooled.wake', payload: {} });
    // Far under the minute-long poll, with room for a loaded machine's stalls.
    expect(await within(ran.promise, 15_000, 'the woken worker running the job')).toBe(id);
    const wakeMs = Date.now() - submittedAt;
    await worker.stop();
    console.log(`pgbouncer, listenUrl direct, poll 60 s: submit to handler start in ${wakeMs} ms`);
    expect(wakeMs).toBeLessThan(15_000);
  });

  it('runs jobs end to end in a real `docket work --listen-url off` process through the pooler, and exits 0 on SIGTERM', async () => {
    const db = await freshDatabase();
    const dir = mkdtempSync(join(tmpdir(), 'docket-pgbouncer-work-'));
    const marksFile = join(dir, 'marks.jsonl');
    writeFileSync(
      join(dir, 'handlers.mjs'),
      `import { appendFileSync } from 'node:fs';
export default {
  'pooled.cli': async (payload, ctx) => {
    appendFileSync(process.env.DOCKET_TEST_MARKS, JSON.stringify({ id: ctx.jobId, attempt: ctx.attempt }) + '\\n');
  },
};
`,
    );
    const submitter = await openDocket({ url: db.url, listenUrl: false });
    const worker = startDocket(
      [
        'work',
        '--db',
        db.url,
        '--listen-url',
        'off',
        '--handlers',
        join(dir, 'handlers.mjs'),
        '--concurrency',
        '4',
        '--poll-interval-ms',
        '100',
        '--shutdown-grace-ms',
        '500',
        '--id',
        'pooled-cli',
      ],
      { env: { DOCKET_TEST_MARKS: marksFile } },
    );
    try {
      const ids: string[] = [];
      for (let n = 0; n < 20; n++) ids.push((await submitter.submit({ kind: 'pooled.cli', payload: { n } })).id);
      for (const id of ids) {
        await expect.poll(async () => (await submitter.getJob(id))?.state, { timeout: 30_000 }).toBe('done');
      }
      const marks = readFileSync(marksFile, 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { id: string });
      expect(marks.map((mark) => mark.id).sort()).toEqual([...ids].sort());
      expect(await listenSessions(db.schema as string)).toBe(0);
    } finally {
      worker.child.kill('SIGTERM');
      const result = await worker.exited;
      rmSync(dir, { recursive: true, force: true });
      expect(result.code, describeRun(result)).toBe(0);
    }
  });

  it('reads the text "off" or "false" (flags, environment, config files) as listenUrl false', async () => {
    const db = await freshDatabase();
    for (const text of ['off', 'false', 'OFF']) {
      const docket = await openDocket({ url: db.url, listenUrl: text });
      expect(docket.store.capabilities.listenNotify, text).toBe(false);
    }
  });

  it('refuses a listenUrl that is not a postgres:// URL or false, without printing its password and before connecting', async () => {
    const db = await freshDatabase();
    const refusals: [unknown, RegExp][] = [
      ['mysql://admin:hunter2@db/app', /listenUrl must be a postgres:\/\/ URL.*mysql:\/\/admin:\*\*\*@db/],
      [42, /listenUrl must be a postgres:\/\/ URL.*42/],
      [true, /listenUrl must be a postgres:\/\/ URL.*true/],
      ['postgres://', /listenUrl must be a postgres:\/\/ URL/],
    ];
    for (const [listenUrl, message] of refusals) {
      const opening = Docket.open({ url: db.url, listenUrl: listenUrl as string });
      await expect(opening).rejects.toBeInstanceOf(ConfigurationError);
      await expect(opening).rejects.toThrow(message);
      await expect(opening).rejects.not.toThrow(/hunter2/);
    }
    // Nothing was written: no open got as far as migrating the schema.
    const [schema] = await direct<{ n: number }>('SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1', [
      db.schema,
    ]);
    expect(schema?.n).toBe(0);
  });

  it('explains a pooler that refuses the pool’s startup parameter, naming ignore_startup_parameters', async () => {
    // pgbouncer as installed: no ignore_startup_parameters, so the pool's
    // idle_in_transaction_session_timeout is refused with "unsupported startup parameter".
    if (setupError !== undefined) throw setupError;
    const strict = await startPgbouncer({ ...targetOf(POSTGRES_URL), ignoreStartupParameters: [] });
    try {
      const opening = Docket.open({
        url: strict.url(new URL(POSTGRES_URL).pathname.slice(1)),
        schema: 'never_created',
        connectTimeoutMs: 0,
      });
      await expect(opening).rejects.toBeInstanceOf(ConfigurationError);
      await expect(opening).rejects.toThrow(
        /startup parameter idle_in_transaction_session_timeout .*ignore_startup_parameters/,
      );
    } finally {
      await strict.stop();
    }
  });
});
