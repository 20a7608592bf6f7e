/**
 * `Docket.open` honours every store option it accepts (issue 11): each is passed through to the
 * store, and each test observes the option's effect there, not just that it was accepted.
 */
import { createServer } from 'node:net';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigurationError, Docket, type WakeUp } from '../../src/index.js';
import type { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createTestDatabase, POSTGRES_URL, storeKinds, type TestDatabase } from '../support/stores.js';
import { deferred, within } from './support/deferred.js';

/** A loopback port with nothing listening on it: connections are refused at once. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('Docket.open store options on sqlite', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
  });

  afterAll(async () => {
    await db?.drop();
  });

  it('passes synchronous: full through (power-loss durability)', async () => {
    const docket = await Docket.open({ url: db.url, synchronous: 'full' });
    try {
      expect((docket.store as SqliteStore).settings().synchronous).toBe('full');
    } finally {
      await docket.close();
    }
    const plain = await Docket.open({ url: db.url });
    try {
      expect((plain.store as SqliteStore).settings().synchronous).toBe('normal');
    } finally {
      await plain.close();
    }
  });

  it('passes busyTimeoutMs through', async () => {
    const docket = await Docket.open({ url: db.url, busyTimeoutMs: 1234 });
    try {
      expect((docket.store as SqliteStore).settings().busyTimeoutMs).toBe(1234);
    } finally {
      await docket.close();
    }
  });
});

describe.runIf(storeKinds().includes('postgres'))('Docket.open store options on postgres', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
  });

  afterAll(async () => {
    await db?.drop();
  });

  it('passes schema through: the tables live in it', async () => {
    const docket = await Docket.open({ url: POSTGRES_URL, schema: db.schema });
    try {
      expect((docket.store as PostgresStore).schema).toBe(db.schema);
      const { id } = await docket.submit({ kind: 'opt.schema' });
      const pool = (docket.store as PostgresStore).db as pg.Pool;
      const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${db.schema}.jobs WHERE id = $1`, [id]);
      expect(rows[0]?.n).toBe(1);
    } finally {
      await docket.close();
    }
  });

  it('passes poolSize through: the pool never opens more connections', async () => {
    const docket = await Docket.open({ url: POSTGRES_URL, schema: db.schema, poolSize: 2 });
    try {
      const pool = (docket.store as PostgresStore).db as pg.Pool;
      await Promise.all(Array.from({ length: 6 }, () => pool.query('SELECT pg_sleep(0.05)')));
      expect(pool.totalCount).toBeLessThanOrEqual(2);
      expect(pool.options.max).toBe(2);
    } finally {
      await docket.close();
    }
  });

  it('passes connectTimeoutMs through: a refused server fails fast at 0, and is retried for longer when asked', async () => {
    const port = await closedPort();
    const url = `postgres://postgres@127.0.0.1:${port}/test`;
    let startedAt = Date.now();
    await expect(Docket.open({ url, connectTimeoutMs: 0 })).rejects.toThrow(/ECONNREFUSED|connect/);
    // The store's default is 30 s of retries; 0 gives up on the first refusal. The bound leaves
    // room for a loaded machine's stalls (1-2 s) and is still far under the default.
    expect(Date.now() - startedAt).toBeLessThan(10_000);

    startedAt = Date.now();
    await expect(Docket.open({ url, connectTimeoutMs: 1500 })).rejects.toThrow(/ECONNREFUSED|connect/);
    const elapsed = Date.now() - startedAt;
    expect(elapsed).toBeGreaterThanOrEqual(300);
    expect(elapsed).toBeLessThan(5_000);
  });

  it('passes wakeHorizonMs through: a submit due beyond the default horizon still notifies', async () => {
    // Wake-ups arrive in commit order: the first one names the first job only if it was inside
    // the horizon; otherwise the first wake-up is the due-now job submitted after it.
    async function firstWakeUp(wakeHorizonMs: number | undefined): Promise<{ runAt: Date | null; later: Date }> {
      const docket = await Docket.open({
        url: POSTGRES_URL,
        schema: db.schema,
        ...(wakeHorizonMs === undefined ? {} : { wakeHorizonMs }),
      });
      try {
        const first = deferred<WakeUp>();
        const unsubscribe = await docket.store.subscribe((wakeUp) => {
          if (wakeUp.runAt !== null) first.resolve(wakeUp);
        });
        const later = new Date((await docket.store.now()).getTime() + 20_000);
        await docket.submit({ kind: 'opt.wake', runAt: later });
        await docket.submit({ kind: 'opt.wake' });
        const wakeUp = await within(first.promise, 5_000, 'a wake-up');
        await unsubscribe();
        return { runAt: wakeUp.runAt, later };
      } finally {
        await docket.close();
      }
    }
    const wide = await firstWakeUp(60_000);
    expect(wide.runAt?.getTime()).toBe(wide.later.getTime());
    const narrow = await firstWakeUp(undefined);
    expect(narrow.runAt!.getTime()).toBeLessThan(narrow.later.getTime() - 10_000);
  });
});

describe.each(storeKinds())('Docket.open option checks on %s', (kind) => {
  it('refuses store options next to an already-open store, which could not honour them', async () => {
    const db = await createTestDatabase(kind);
    const store = await db.open();
    try {
      await expect(Docket.open({ store, synchronous: 'full' })).rejects.toThrow(ConfigurationError);
      await expect(Docket.open({ store, poolSize: 3, wakeHorizonMs: 1 })).rejects.toThrow(
        /options poolSize, wakeHorizonMs cannot be applied to an already-open store/,
      );
    } finally {
      await store.close();
      await db.drop();
    }
  });

  it('refuses an unhandledAfterMs that is not a positive integer', async () => {
    await expect(Docket.open({ url: 'sqlite::memory:', unhandledAfterMs: 0 })).rejects.toThrow(
      /unhandledAfterMs must be a positive integer/,
    );
  });

  it('still refuses an unknown option, naming it', async () => {
    await expect(Docket.open({ url: 'sqlite::memory:', synchronus: 'full' } as never)).rejects.toThrow(
      /unknown Docket option synchronus/,
    );
  });
});
