/**
 * graphile-worker driver (0.17 from the repository's node_modules; the same driver runs 0.18 from
 * bench/peers-latest, whose API for what is used here is unchanged). Default: the library's defaults at the shared concurrency. Tuned: the
 * configuration from its performance page (worker.graphile.org/docs/performance): local queue of
 * 500, batched completions and failures (`completeJobBatchDelay: 0`, `failJobBatchDelay: 0`) and a
 * pool of concurrency + 1.
 */

import type { WorkerUtils } from 'graphile-worker';
import * as graphileWorker from 'graphile-worker';
import pg from 'pg';
import { databaseNameOf, dropDatabase, recreateDatabase } from '../pg-admin.js';
import {
  type BenchJob,
  benchIndexOf,
  benchKindName,
  benchKindNames,
  NEIGHBOUR_QUEUE,
  type SystemConfig,
  type SystemModule,
  type SystemName,
} from './system.js';

const TASK = 'bench_noop';

/** What the driver uses of the library, so another release of it can be passed in. */
export type GraphileWorkerLibrary = Pick<typeof graphileWorker, 'Logger' | 'makeWorkerUtils' | 'run' | 'runMigrations'>;

function preset(config: SystemConfig) {
  if (config.variant === 'default') return undefined;
  return {
    worker: {
      localQueue: { size: 500 },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
      maxPoolSize: config.concurrency + 1,
    },
  };
}

/**
 * A pool the harness owns for graphile-worker's utilities and migrations, ended by the harness.
 * Given a connection string, graphile-worker makes its own pool, and its `release()` removes that
 * pool's error handlers and ends it without waiting: an idle connection that the next round's
 * `DROP DATABASE … WITH (FORCE)` then terminated was an unhandled 'error' event, and the whole
 * bench run died (seen once in a run of the single-submit workload, 2026-12-05). This pool keeps
 * its handlers; the `connect` listener is there because graphile-worker warns about a given pool
 * without one.
 */
function harnessPool(config: SystemConfig, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: config.databaseUrl, max });
  pool.on('error', () => {});
  pool.on('connect', () => {});
  return pool;
}

/** graphile-worker behind the bench interface, for one release of the library. */
export function makeGraphileWorkerSystem(lib: GraphileWorkerLibrary, name: SystemName): SystemModule {
  const { makeWorkerUtils, run, runMigrations } = lib;
  // Silent: graphile-worker logs every job at info level, and printing 100,000 lines would measure the terminal.
  const silentLogger = new lib.Logger(() => () => {});
  return {
    name,
    variants: ['default', 'tuned'],

    describe(variant, concurrency) {
      return variant === 'default'
        ? `run({ concurrency: ${concurrency} }); everything else default (pollInterval 2000 ms + LISTEN/NOTIFY, no local queue, unbatched completions, pool 10)`
        : `run({ concurrency: ${concurrency}, preset: { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0, maxPoolSize: ${concurrency + 1} } } }) (published performance configuration)`;
    },

    async reset(config) {
      await recreateDatabase(databaseNameOf(config.databaseUrl));
      const pgPool = harnessPool(config, 1);
      try {
        await runMigrations({ pgPool, logger: silentLogger });
      } finally {
        await pgPool.end();
      }
    },

    async openStore(config) {
      // graphile-worker's own default pool size, as before this pool was the harness's.
      const utilsPool = harnessPool(config, 10);
      const utils: WorkerUtils = await makeWorkerUtils({ pgPool: utilsPool, logger: silentLogger });
      const pool = new pg.Pool({ connectionString: config.databaseUrl, max: 2 });
      // An idle connection dropped by the server (a database dropped WITH (FORCE)) must not crash the run.
      pool?.on('error', () => {});
      return {
        async insert(jobs: readonly BenchJob[]) {
          await utils.addJobs(
            jobs.map((job) => ({
              identifier: benchKindName(TASK, job.kind ?? 0),
              payload: { i: job.i },
              ...(job.runAt ? { runAt: job.runAt } : {}),
            })),
          );
        },
        async submitOne(i: number, key?: string) {
          // jobKey's default mode is 'replace': a pending job with the key is updated, not added.
          await utils.addJob(TASK, { i }, key === undefined ? undefined : { jobKey: key });
        },
        async submitOneAt(i: number, runAtMs: number) {
          await utils.addJob(TASK, { i }, { runAt: new Date(runAtMs) });
        },
        async remainingDue() {
          const { rows } = await pool.query<{ n: string }>(
            `SELECT count(*)::text AS n FROM graphile_worker._private_jobs WHERE run_at <= now() AND attempts < max_attempts`,
          );
          return Number(rows[0]?.n ?? 0);
        },
        async close() {
          await utils.release();
          await utilsPool.end();
          await pool.end();
        },
      };
    },

    async startWorker(config, onStart) {
      const runner = await run({
        connectionString: config.databaseUrl,
        concurrency: config.concurrency,
        noHandleSignals: true,
        logger: silentLogger,
        // A neighbour's only task is one no bench job names: graphile-worker filters by task
        // identifier, not by queue (its queues serialise jobs, they do not route them).
        // The kinds workload: one task per kind, every one in the worker's task list.
        taskList: Object.fromEntries(
          (config.neighbour ? [NEIGHBOUR_QUEUE] : benchKindNames(TASK, config)).map((task) => [
            task,
            async (payload: unknown) => {
              onStart(benchIndexOf(payload));
            },
          ]),
        ),
        ...(preset(config) ? { preset: preset(config) } : {}),
      });
      return {
        async stop() {
          await runner.stop();
        },
      };
    },

    async destroy(config) {
      await dropDatabase(databaseNameOf(config.databaseUrl));
    },
  };
}

/** graphile-worker (the repository's release) behind the bench interface. */
export const graphileWorkerSystem: SystemModule = makeGraphileWorkerSystem(graphileWorker, 'graphile-worker');
