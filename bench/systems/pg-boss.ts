/**
 * pg-boss 10 driver. pg-boss has no concurrency setting: each `work()` call is one polling loop that
 * fetches `batchSize` jobs, runs the handler, completes the batch and then waits out the rest of its
 * polling interval (default 2 s, minimum 0.5 s), with no wake-up on insert.
 *
 * Default: `concurrency` loops with the library's defaults (one job per loop every 2 s). Tuned: its
 * batch fetch, as its docs describe it: 4 loops, each fetching 500 jobs every 0.5 s (the minimum
 * interval), the batch's jobs run concurrently and completed in one call.
 *
 * pg-boss 12 (bench/peers-latest) through the same driver, with its API changes: the class is a
 * named export (no default export), `insert(name, jobs)` takes the queue name first, and its
 * tuned variant adds what 12 publishes for throughput: `burstWhenBatchFull` (fetch again at once
 * while batches come back full) and LISTEN/NOTIFY wake-ups (`useListenNotify` on the instance,
 * `notify: true` on the queue). Its default variant stays the library's defaults.
 */
import PgBoss from 'pg-boss';
import { databaseNameOf, dropDatabase, recreateDatabase } from '../pg-admin.js';
import {
  type BenchJob,
  benchIndexOf,
  NEIGHBOUR_QUEUE,
  refuseKinds,
  type SystemConfig,
  type SystemModule,
  type SystemName,
} from './system.js';

const QUEUE = 'bench';
const SCHEMA = 'pgboss';
const TUNED_LOOPS = 4;
const TUNED_BATCH_SIZE = 500;
const TUNED_POLLING_SECONDS = 0.5;
/** PostgreSQL's SQLSTATE for a transaction chosen as a deadlock's victim. */
const DEADLOCK_DETECTED = '40P01';

// Maintenance and cron off in every process: they are periodic background work, not job throughput,
// and the harness drops the database after each run anyway.
/** The pg-boss release a driver runs: its class and which generation of the API it has. */
export interface PgBossLibrary {
  PgBoss: new (options: Record<string, unknown>) => PgBoss;
  generation: 10 | 12;
}

/** pg-boss behind the bench interface, for one release of the library. */
export function makePgBossSystem(lib: PgBossLibrary, name: SystemName): SystemModule {
  const v12 = lib.generation === 12;
  const tunedExtra = v12 ? ', burstWhenBatchFull: true' : '';
  function bossFor(config: SystemConfig, migrate: boolean, max: number): PgBoss {
    return new lib.PgBoss({
      connectionString: config.databaseUrl,
      schema: SCHEMA,
      max,
      supervise: false,
      schedule: false,
      migrate,
      ...(v12 && config.variant === 'tuned' ? { useListenNotify: true } : {}),
    });
  }
  async function createQueue(boss: PgBoss, config: SystemConfig, queue: string): Promise<void> {
    // Typed loosely: 12's queue options (notify) are not in 10's types.
    const create = boss.createQueue.bind(boss) as (queue: string, options?: object) => Promise<unknown>;
    await create(queue, v12 && config.variant === 'tuned' ? { notify: true } : undefined);
  }
  /**
   * createQueue from several processes at once: pg-boss 10 makes each queue's partition by DDL,
   * and three neighbours starting together deadlocked on it (PostgreSQL chose one as the victim).
   * The victim's transaction rolled back and the winner's created the queue, so a retry finds it
   * there (its insert ON CONFLICT DO NOTHING) and returns.
   */
  async function createQueueOnce(boss: PgBoss, config: SystemConfig, queue: string): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await createQueue(boss, config, queue);
      } catch (error) {
        if ((error as { code?: string }).code !== DEADLOCK_DETECTED || attempt >= 5) throw error;
      }
    }
  }
  return {
    name,
    variants: ['default', 'tuned'],

    describe(variant, concurrency) {
      return variant === 'default'
        ? `${concurrency} × work('${QUEUE}', handler) with defaults (batchSize 1, pollingIntervalSeconds 2, no wake-up on insert); pool max ${concurrency + 2}`
        : `${TUNED_LOOPS} × work('${QUEUE}', { batchSize: ${TUNED_BATCH_SIZE}, pollingIntervalSeconds: ${TUNED_POLLING_SECONDS}${tunedExtra} }, handler)${v12 ? ", new PgBoss({ useListenNotify: true }), createQueue('bench', { notify: true })" : ''} — batch fetch, each batch run concurrently and completed in one call`;
    },

    async reset(config) {
      refuseKinds(config, 'pg-boss routes job types by queue, each worked by its own polling loops');
      await recreateDatabase(databaseNameOf(config.databaseUrl));
      const boss = bossFor(config, true, 2);
      boss.on('error', () => {});
      await boss.start();
      await createQueue(boss, config, QUEUE);
      await boss.stop({ graceful: false, wait: true });
    },

    async openStore(config) {
      // pg-boss's default pool (10): the single-submit workload measures its send() with defaults.
      const boss = bossFor(config, false, 10);
      boss.on('error', (error) => console.error('pg-boss (harness):', error.message));
      await boss.start();
      const db = boss.getDb();
      return {
        async insert(jobs: readonly BenchJob[]) {
          const rows = jobs.map((job) => ({ data: { i: job.i }, ...(job.runAt ? { startAfter: job.runAt } : {}) }));
          // pg-boss 12 takes the queue name first; 10 wants it on every row.
          const insert = boss.insert.bind(boss) as (...args: unknown[]) => Promise<unknown>;
          await (v12 ? insert(QUEUE, rows) : insert(rows.map((row) => ({ name: QUEUE, ...row }))));
        },
        async submitOne(i: number, key?: string) {
          // The key is stored, but on this standard-policy queue (the default) no unique index
          // covers it: pg-boss deduplicates by singletonKey only in a short, singleton, stately
          // (or, in 12, exclusive) queue, or within a singletonSeconds slot.
          await (key === undefined ? boss.send(QUEUE, { i }) : boss.send(QUEUE, { i }, { singletonKey: key }));
        },
        async submitOneAt(i: number, runAtMs: number) {
          await boss.send(QUEUE, { i }, { startAfter: new Date(runAtMs) });
        },
        async remainingDue() {
          const { rows } = await db.executeSql(
            `SELECT count(*)::text AS n FROM ${SCHEMA}.job WHERE name = $1 AND state < 'completed' AND start_after <= now()`,
            [QUEUE],
          );
          return Number((rows[0] as { n: string } | undefined)?.n ?? 0);
        },
        async close() {
          await boss.stop({ graceful: false, wait: true });
        },
      };
    },

    async startWorker(config, onStart) {
      const tuned = config.variant === 'tuned';
      const loops = tuned ? TUNED_LOOPS : config.concurrency;
      const boss = bossFor(config, false, loops + 2);
      boss.on('error', (error) => console.error('pg-boss (worker):', error.message));
      await boss.start();
      // A neighbour is another service's worker: it creates its own queue as it starts (pg-boss
      // wants a queue created before it is worked).
      const queue = config.neighbour ? NEIGHBOUR_QUEUE : QUEUE;
      if (config.neighbour) await createQueueOnce(boss, config, queue);
      const options = tuned
        ? {
            batchSize: TUNED_BATCH_SIZE,
            pollingIntervalSeconds: TUNED_POLLING_SECONDS,
            ...(v12 ? { burstWhenBatchFull: true } : {}),
          }
        : {};
      for (let n = 0; n < loops; n += 1) {
        await boss.work<{ i: number }>(queue, options, async (jobs) => {
          await Promise.all(
            jobs.map(async (job) => {
              onStart(benchIndexOf(job.data));
            }),
          );
        });
      }
      return {
        async stop() {
          await boss.stop({ graceful: true, wait: true, timeout: 10_000 });
        },
      };
    },

    async destroy(config) {
      await dropDatabase(databaseNameOf(config.databaseUrl));
    },
  };
}

/** pg-boss (the repository's release, 10) behind the bench interface. */
export const pgBossSystem: SystemModule = makePgBossSystem({ PgBoss, generation: 10 }, 'pg-boss');
