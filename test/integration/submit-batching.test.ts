/**
 * Group commit of single submits (src/submit/), against real stores: concurrent `submit()` calls
 * share store calls, yet each resolves with its own committed row and its own error. The store
 * is the real one, wrapped only to count its jobSubmit calls (each is one statement or one
 * transaction), so "shared round trips" is measured, not assumed.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/clock.js';
import {
  ConfigurationError,
  Docket,
  IdempotencyConflictError,
  seededRandom,
  ValidationError,
} from '../../src/index.js';
import { normalizeSubmit } from '../../src/job/job-spec.js';
import type { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { wakeChannel } from '../../src/store/postgres/sql-fragments.js';
import type { JobSubmitParams, Store } from '../../src/store/store.js';
import {
  JobIdReservoir,
  MIN_RESERVED_ID_BLOCK,
  nextReservedBlockSize,
  RESERVED_ID_BLOCK,
  RESERVED_ID_MAX_AGE_MS,
} from '../../src/submit/job-id-reservoir.js';
import { startTestServer, type TestServer } from '../http/http-support.js';
import { POSTGRES_URL, storeKinds } from '../support/stores.js';
import { SEED, useInProcessDockets } from './support/suite-fixtures.js';

/** The real store, with every jobSubmit call's batch size recorded. */
function countingSubmits(store: Store): { store: Store; calls: JobSubmitParams[] } {
  const calls: JobSubmitParams[] = [];
  const counted = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property !== 'jobSubmit' || typeof value !== 'function') {
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return (params: JobSubmitParams) => {
        calls.push(params);
        return (value as Store['jobSubmit']).call(target, params);
      };
    },
  });
  return { store: counted, calls };
}

describe.each(storeKinds())('group-committed submits on %s', (kind) => {
  const dockets = useInProcessDockets(kind, 'submit-batching');

  async function openCounted(): Promise<{ docket: Docket; calls: JobSubmitParams[] }> {
    const { store, calls } = countingSubmits(await dockets.db.open());
    const docket = await Docket.open({ store, random: seededRandom(SEED) });
    dockets.closeAfterTest(docket);
    // The Docket does not own a store it was given: close it after the Docket.
    dockets.closeAfterTest({ close: () => store.close() } as unknown as Docket);
    return { docket, calls };
  }

  it('shares store calls among 100 concurrent submits, each resolving with its own stored job', async () => {
    const { docket, calls } = await openCounted();
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, n) => docket.submit({ kind: 'batched', payload: { n } })),
    );
    expect(new Set(results.map((r) => r.id)).size).toBe(100);
    expect(results.every((r) => r.created)).toBe(true);
    // Calls made in one synchronous run go out together.
    expect(calls.length).toBeLessThanOrEqual(2);
    for (const [n, result] of results.entries()) {
      const job = await docket.getJob(result.id);
      expect(job).toMatchObject({ kind: 'batched', payload: { n }, state: 'pending' });
      expect(job?.runAt.getTime()).toBe(result.runAt.getTime());
    }
  });

  it('sends together the calls of one event-loop turn made from callbacks of their own, as a server reads requests', async () => {
    const { docket, calls } = await openCounted();
    // Each call in its own macrotask callback of one turn, as the requests a server reads in one
    // pass over its sockets each arrive in a callback of their own (a microtask flush sent each
    // alone, and on SQLite, whose writes are never in flight, every request was a transaction).
    const results = await Promise.all(
      Array.from(
        { length: 20 },
        (_, n) =>
          new Promise<Awaited<ReturnType<Docket['submit']>>>((resolve, reject) => {
            setImmediate(() => {
              docket.submit({ kind: 'turn', payload: { n } }).then(resolve, reject);
            });
          }),
      ),
    );
    expect(new Set(results.map((r) => r.id)).size).toBe(20);
    expect(calls.map((c) => c.jobs.length)).toEqual([20]);
  });

  it('accumulates calls that arrive while a flush is in flight and sends them together', async () => {
    const { docket, calls } = await openCounted();
    // 20 closed-loop callers, 10 submits each: only the first flush can go out with a single call.
    const perCaller = await Promise.all(
      Array.from({ length: 20 }, async (_, caller) => {
        const ids: string[] = [];
        for (let i = 0; i < 10; i++) ids.push((await docket.submit({ kind: 'loop', payload: { caller, i } })).id);
        return ids;
      }),
    );
    expect(new Set(perCaller.flat()).size).toBe(200);
    expect(calls.length).toBeLessThan(100);
    expect(calls.map((c) => c.jobs.length).reduce((a, b) => a + b, 0)).toBe(200);
  });

  it('fails only the call whose input is invalid; its neighbours are written', async () => {
    const { docket } = await openCounted();
    const outcomes = await Promise.allSettled([
      docket.submit({ kind: 'fine', payload: 1 }),
      docket.submit({ kind: 'fine', payload: 2, maxAttempts: -1 }),
      docket.submit({ kind: 'fine', payload: 3 }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(ValidationError);
    expect((outcomes[1] as PromiseRejectedResult).reason.field).toBe('maxAttempts');
    const jobs = await docket.listJobs({ kind: 'fine' });
    expect(jobs.map((j) => j.payload).sort()).toEqual([1, 3]);
  });

  it('answers two calls with one key in one flush with one job: created for the first only', async () => {
    const { docket, calls } = await openCounted();
    const before = calls.length;
    const [first, second, other] = await Promise.all([
      docket.submit({ kind: 'keyed', payload: { a: 1 }, idempotencyKey: 'same-key' }),
      docket.submit({ kind: 'keyed', payload: { a: 1 }, idempotencyKey: 'same-key' }),
      docket.submit({ kind: 'keyed', payload: { a: 2 }, idempotencyKey: 'other-key' }),
    ]);
    expect(calls.length - before).toBe(1);
    expect(second?.id).toBe(first?.id);
    expect([first?.created, second?.created, other?.created]).toEqual([true, false, true]);
    expect(await docket.listJobs({ kind: 'keyed' })).toHaveLength(2);
  });

  it('fails only the call that reuses a live key with another payload, as a serial submit would', async () => {
    const { docket } = await openCounted();
    const live = await docket.submit({ kind: 'conflict', payload: 'original', idempotencyKey: 'held' });
    const outcomes = await Promise.allSettled([
      docket.submit({ kind: 'conflict', payload: 'a' }),
      docket.submit({ kind: 'conflict', payload: 'different', idempotencyKey: 'held' }),
      docket.submit({ kind: 'conflict', payload: 'original', idempotencyKey: 'held' }),
      docket.submit({ kind: 'conflict', payload: 'b', idempotencyKey: 'fresh' }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    const refused = (outcomes[1] as PromiseRejectedResult).reason as IdempotencyConflictError;
    expect(refused).toBeInstanceOf(IdempotencyConflictError);
    // The single-submit field name, not a batch position the caller never sent.
    expect(refused.field).toBe('idempotencyKey');
    expect(refused.existingId).toBe(live.id);
    expect((outcomes[2] as PromiseFulfilledResult<{ id: string; created: boolean }>).value).toMatchObject({
      id: live.id,
      created: false,
    });
    const jobs = await docket.listJobs({ kind: 'conflict' });
    expect(jobs.map((j) => j.payload).sort()).toEqual(['a', 'b', 'original']);
  });

  it('resolves two same-key calls with different payloads in one flush as two serial submits', async () => {
    const { docket } = await openCounted();
    const outcomes = await Promise.allSettled([
      docket.submit({ kind: 'race', payload: 'first', idempotencyKey: 'k' }),
      docket.submit({ kind: 'race', payload: 'second', idempotencyKey: 'k' }),
    ]);
    expect(outcomes[0]?.status).toBe('fulfilled');
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(IdempotencyConflictError);
    expect((await docket.listJobs({ kind: 'race' })).map((j) => j.payload)).toEqual(['first']);
  });

  it('lets close() wait for submits still in flight', async () => {
    const { docket } = await openCounted();
    const pending = Array.from({ length: 50 }, (_, n) => docket.submit({ kind: 'closing', payload: n }));
    const closed = docket.close();
    const results = await Promise.all(pending);
    await closed;
    expect(new Set(results.map((r) => r.id)).size).toBe(50);
  });
});

describe('group-committed submits on postgres: wake-ups, transactions, HTTP', () => {
  const dockets = useInProcessDockets('postgres', 'submit-batching-pg');
  let listener: pg.Client;
  const notifications: string[] = [];

  beforeAll(async () => {
    listener = new pg.Client({ connectionString: POSTGRES_URL });
    await listener.connect();
    listener.on('notification', (message) => notifications.push(message.payload ?? ''));
  });

  afterAll(async () => {
    await listener?.end();
  });

  it('sends at most one NOTIFY per flush, not one per submit', async () => {
    const docket = await dockets.open();
    const store = docket.store as PostgresStore;
    await listener.query(`LISTEN "${wakeChannel(store.schema)}"`);
    notifications.length = 0;
    await docket.submit({ kind: 'wake', payload: 0 });
    await expect.poll(() => notifications.length, { timeout: 10_000 }).toBe(1);
    notifications.length = 0;
    await Promise.all(Array.from({ length: 200 }, (_, n) => docket.submit({ kind: 'wake', payload: n })));
    // Let any late notification arrive before counting.
    await docket.submit({ kind: 'wake', payload: 'marker' });
    await expect.poll(() => notifications.length, { timeout: 10_000 }).toBeGreaterThan(0);
    expect(notifications.length).toBeLessThanOrEqual(3);
  });

  it("bypasses batching inside a caller's transaction: the job exists only when it commits", async () => {
    const docket = await dockets.open();
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      await client.query('BEGIN');
      const inside = await docket.submit({ kind: 'tx', payload: 'rolled back' }, { transaction: client });
      const outside = await docket.submit({ kind: 'tx', payload: 'autocommitted' });
      await client.query('ROLLBACK');
      expect(await docket.getJob(inside.id)).toBeNull();
      expect(await docket.getJob(outside.id)).toMatchObject({ payload: 'autocommitted' });
      await client.query('BEGIN');
      const committed = await docket.submit({ kind: 'tx', payload: 'committed' }, { transaction: client });
      expect(await docket.getJob(committed.id)).toBeNull();
      await client.query('COMMIT');
      expect(await docket.getJob(committed.id)).toMatchObject({ payload: 'committed' });
    } finally {
      await client.end();
    }
  });

  it('shares statements among concurrent HTTP POST /v1/jobs requests too', async () => {
    let server: TestServer | undefined;
    try {
      server = await startTestServer({ kind: 'postgres' });
      const running = server;
      const answers = await Promise.all(
        Array.from({ length: 100 }, (_, n) =>
          running.call('POST', '/v1/jobs', { body: { kind: 'http.batched', payload: { n } } }),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(answers.map(() => 201));
      // Rows written by one statement share its transaction's now(), to the microsecond; 100
      // separate commits would give (nearly) 100 distinct instants.
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      try {
        const { rows } = await client.query<{ jobs: string; statements: string }>(
          `SELECT count(*) AS jobs, count(DISTINCT created_at) AS statements FROM ${running.db.schema}.jobs WHERE kind = 'http.batched'`,
        );
        expect(Number(rows[0]?.jobs)).toBe(100);
        // Requests arrive one socket read at a time, so a flush often carries only the few that
        // came in while the one before it was out; still, many share statements.
        expect(Number(rows[0]?.statements)).toBeLessThan(90);
      } finally {
        await client.end();
      }
    } finally {
      await server?.stop();
    }
  });
});

describe('reserved job ids on postgres (JobIdReservoir)', () => {
  const dockets = useInProcessDockets('postgres', 'submit-batching-ids');

  it('hands out a young block in order, and reserves afresh once the spare ids are a second old', async () => {
    const docket = await dockets.open();
    const clock = new ManualClock(0);
    const reservoir = new JobIdReservoir(docket.store, clock);
    const [first] = await reservoir.take(1);
    const next = await reservoir.take(3);
    expect(next.map(Number)).toEqual([1, 2, 3].map((k) => Number(first) + k));
    // Another process draws from the same sequence meanwhile; our block is unaffected.
    const [elsewhere] = await docket.store.jobReserveIds({ count: 1 });
    expect(Number(elsewhere)).toBeGreaterThanOrEqual(Number(first) + MIN_RESERVED_ID_BLOCK);
    clock.advance(RESERVED_ID_MAX_AGE_MS + 1);
    const [fresh] = await reservoir.take(1);
    expect(Number(fresh)).toBeGreaterThan(Number(elsewhere));
    // A request larger than a block gets exactly its own ids.
    const many = await reservoir.take(RESERVED_ID_BLOCK + 5);
    expect(new Set(many).size).toBe(RESERVED_ID_BLOCK + 5);
  });

  it('sizes each block to what the last one served: small for a quiet process, growing under a burst', async () => {
    const docket = await dockets.open();
    const clock = new ManualClock(0);
    const reserved: number[] = [];
    const store = {
      jobReserveIds: async (params: { count: number }) => {
        reserved.push(params.count);
        return docket.store.jobReserveIds(params);
      },
    };
    const reservoir = new JobIdReservoir(store, clock);
    // Now and then: one submit a block, each block the smallest.
    for (let k = 0; k < 3; k += 1) {
      await reservoir.take(1);
      clock.advance(RESERVED_ID_MAX_AGE_MS + 1);
    }
    expect(reserved).toEqual([MIN_RESERVED_ID_BLOCK, MIN_RESERVED_ID_BLOCK, MIN_RESERVED_ID_BLOCK]);
    // A burst of single submits within the second: each block used up doubles the next.
    reserved.length = 0;
    const ids: string[] = [];
    for (let k = 0; k < 2_000; k += 1) ids.push(...(await reservoir.take(1)));
    expect(reserved).toEqual([16, 32, 64, 128, 256, 512, 1000]);
    // Every id handed out once, in ascending order.
    expect(new Set(ids).size).toBe(2_000);
    expect(ids.map(Number)).toEqual([...ids.map(Number)].sort((a, b) => a - b));
    // The pure rule: within the bounds, never below the flush's own need.
    expect(nextReservedBlockSize(0, 1)).toBe(MIN_RESERVED_ID_BLOCK);
    expect(nextReservedBlockSize(300, 1)).toBe(600);
    expect(nextReservedBlockSize(5_000, 1)).toBe(RESERVED_ID_BLOCK);
    expect(nextReservedBlockSize(0, 900)).toBe(900);
  });

  it('answers a resend with the job stored under its id, and refuses an id that holds a stranger', async () => {
    const docket = await dockets.open();
    const spec = (payload: unknown) => normalizeSubmit({ kind: 'resent', payload }, seededRandom(SEED));
    const ids = await docket.store.jobReserveIds({ count: 1 });
    const [written] = await docket.store.jobSubmit({ jobs: [spec('mine')], ids });
    const [resent] = await docket.store.jobSubmit({ jobs: [spec('mine')], ids });
    expect(resent).toEqual(written);
    expect(resent?.created).toBe(true);
    await expect(docket.store.jobSubmit({ jobs: [spec('someone else')], ids })).rejects.toThrow(
      /was not reserved for this submit/,
    );
    expect(await docket.listJobs({ kind: 'resent' })).toHaveLength(1);
  });

  it('answers each reserved-id insert with the runAt and payload stored, as the database computed them', async () => {
    const docket = await dockets.open();
    const random = seededRandom(SEED);
    const at = new Date(Date.UTC(2031, 4, 6, 7, 8, 9, 123));
    // Payloads that an array literal would have to escape (quotes, backslashes, commas, braces,
    // non-ASCII), and the runAt forms: asap, a delay, a jittered delay, an explicit instant.
    const inputs = [
      { kind: 'derived', payload: { quote: 'say "hi"', slash: 'a\\b', list: '{1,2}', text: 'é 𝄞' } },
      { kind: 'derived', payload: 'plain', delayMs: 61_001 },
      { kind: 'derived', payload: null, delayMs: 5_000, jitterMs: 997 },
      { kind: 'derived', payload: [1, 'two', { three: 3 }], runAt: at },
    ];
    for (const now of [undefined, new Date(Date.UTC(2030, 0, 2, 3, 4, 5, 678))]) {
      const specs = inputs.map((input) => normalizeSubmit(input, random));
      const ids = await docket.store.jobReserveIds({ count: specs.length });
      const results = await docket.store.jobSubmit({ jobs: specs, ids, ...(now ? { now } : {}) });
      expect(results.map((result) => result.id)).toEqual(ids);
      for (const [index, result] of results.entries()) {
        const stored = await docket.store.jobGet({ id: result.id });
        expect(stored?.runAt.getTime(), `jobs[${index}] at now=${String(now)}`).toBe(result.runAt.getTime());
        expect(stored?.payload).toEqual(inputs[index]!.payload);
      }
      expect(results[3]!.runAt).toEqual(at);
      if (now) expect(results[1]!.runAt.getTime()).toBe(now.getTime() + 61_001);
    }
  });

  it('refuses a reservation of no ids or more than the batch limit', async () => {
    const docket = await dockets.open();
    await expect(docket.store.jobReserveIds({ count: 0 })).rejects.toThrow(ValidationError);
    await expect(docket.store.jobReserveIds({ count: 100_001 })).rejects.toThrow(/from 1 to 100000/);
  });
});

describe('reserved job ids on sqlite', () => {
  const dockets = useInProcessDockets('sqlite', 'submit-batching-sqlite-ids');

  it('is refused with a ConfigurationError: SQLite submits are never resent', async () => {
    const docket = await dockets.open();
    expect(docket.store.capabilities.reservableJobIds).toBe(false);
    await expect(docket.store.jobReserveIds({ count: 1 })).rejects.toThrow(ConfigurationError);
    await expect(docket.store.jobSubmit({ jobs: [], ids: [] })).rejects.toThrow(ConfigurationError);
  });
});
