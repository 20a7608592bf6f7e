/**
 * pg-boss 10 driver. pg-boss has no concurrency setting: each `work()` call is one polling loop that
 * fetches `batchSize` jobs, runs the handler, completes the batch and then waits out the rest of its
 * polling interval (default 2 s, minimum 0.5 s), with no wake-up on insert.
 *
 * Default: `concurrency` loops with the library's defaults (one job per loop every 2 s). Tuned: its
 * batch fetch, as its docs describe it: 4 loops, each fetching 500 jobs every 0.5 s (the minimum
 * interval), the batch's jobs run concurrently and completed in one call.
 */
import PgBoss from 'pg-boss';
import { databaseNameOf, dropDatabase, recreateDatabase } from '../pg-admin.js';
import { type BenchJob, benchIndexOf, type SystemConfig, type SystemModule } from './system.js';

const QUEUE = 'bench';
const SCHEMA = 'pgboss';
const TUNED_LOOPS = 4;
const TUNED_BATCH_SIZE = 500;
const TUNED_POLLING_SECONDS = 0.5;

// Maintenance and cron off in every process: they are periodic background work, not job throughput,
// and the harness drops the database after each run anyway.
function bossFor(config: SystemConfig, migrate: boolean, max: number): PgBoss {
  return new PgBoss({
    connectionString: config.databaseUrl,
    schema: SCHEMA,
    max,
    supervise: false,
    schedule: false,
    migrate,
  });
}

/** pg-boss behind the bench interface. */
export const pgBossSystem: SystemModule = {
  name: 'pg-boss',
  variants: ['default', 'tuned'],

  describe(variant, concurrency) {
    return variant === 'default'
      ? `${concurrency} × work('${QUEUE}', handler) with defaults (batchSize 1, pollingIntervalSeconds 2, no wake-up on insert); pool max ${concurrency + 2}`
      : `${TUNED_LOOPS} × work('${QUEUE}', { batchSize: ${TUNED_BATCH_SIZE}, pollingIntervalSeconds: ${TUNED_POLLING_SECONDS} }, handler) — batch fetch, each batch run concurrently and completed in one call`;
  },

  async reset(config) {
    await recreateDatabase(databaseNameOf(config.databaseUrl));
    const boss = bossFor(config, true, 2);
    boss.on('error', () => {});
    await boss.start();
    await boss.createQueue(QUEUE);
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
        await boss.insert(
          jobs.map((job) => ({ name: QUEUE, data: { i: job.i }, ...(job.runAt ? { startAfter: job.runAt } : {}) })),
        );
      },
      async submitOne(i: number) {
        await boss.send(QUEUE, { i });
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
    const options = tuned ? { batchSize: TUNED_BATCH_SIZE, pollingIntervalSeconds: TUNED_POLLING_SECONDS } : {};
    for (let n = 0; n < loops; n += 1) {
      await boss.work<{ i: number }>(QUEUE, options, async (jobs) => {
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
