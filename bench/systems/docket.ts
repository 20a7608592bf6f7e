/**
 * Docket driver, on PostgreSQL (`docket`) and on an embedded SQLite file (`docket-sqlite`). One
 * configuration: the defaults of `docket.worker()` at the shared concurrency; Docket has no tuned
 * variant because its defaults are what it ships.
 */
import { rmSync } from 'node:fs';
import { Docket } from '../../src/docket.js';
import { databaseNameOf, dropDatabase, recreateDatabase } from '../pg-admin.js';
import { type BenchJob, benchIndexOf, type SystemConfig, type SystemModule, type SystemName } from './system.js';

const KIND = 'bench.noop';
const SCHEMA = 'docket';

function sqlitePath(config: SystemConfig): string {
  const match = /^sqlite:(.+)$/.exec(config.databaseUrl);
  if (!match?.[1] || match[1] === ':memory:')
    throw new Error(`docket-sqlite needs a file URL, got ${config.databaseUrl}`);
  return match[1];
}

function removeSqliteFiles(config: SystemConfig): void {
  const path = sqlitePath(config);
  for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(`${path}${suffix}`, { force: true });
}

async function open(config: SystemConfig): Promise<Docket> {
  return Docket.open({ url: config.databaseUrl, schema: SCHEMA });
}

function docketModule(name: SystemName): SystemModule {
  const sqlite = name === 'docket-sqlite';
  return {
    name,
    variants: ['default'],

    describe(_variant, concurrency) {
      return `docket.worker({ concurrency: ${concurrency} }); every other option default${sqlite ? ' (SQLite file, WAL)' : ''}`;
    },

    async reset(config) {
      if (sqlite) removeSqliteFiles(config);
      else await recreateDatabase(databaseNameOf(config.databaseUrl));
      // Opening migrates, so workers starting later find the schema ready.
      const docket = await open(config);
      await docket.close();
    },

    async openStore(config) {
      const docket = await open(config);
      return {
        async insert(jobs: readonly BenchJob[]) {
          await docket.submitMany(
            jobs.map((job) => ({ kind: KIND, payload: { i: job.i }, ...(job.runAt ? { runAt: job.runAt } : {}) })),
          );
        },
        async remainingDue() {
          const stats = await docket.store.queueStats();
          return stats.reduce((sum, queue) => sum + queue.available + queue.running, 0);
        },
        async close() {
          await docket.close();
        },
      };
    },

    async startWorker(config, onStart) {
      const docket = await open(config);
      docket.handle(KIND, async (payload) => {
        onStart(benchIndexOf(payload));
      });
      const worker = docket.worker({ concurrency: config.concurrency });
      await worker.start();
      return {
        async stop() {
          await worker.stop();
          await docket.close();
        },
      };
    },

    async destroy(config) {
      if (sqlite) removeSqliteFiles(config);
      else await dropDatabase(databaseNameOf(config.databaseUrl));
    },
  };
}

/** Docket on PostgreSQL behind the bench interface. */
export const docketSystem: SystemModule = docketModule('docket');

/** Docket on an embedded SQLite file behind the bench interface. */
export const docketSqliteSystem: SystemModule = docketModule('docket-sqlite');
