/**
 * Docket driver, on PostgreSQL (`docket`) and on an embedded SQLite file (`docket-sqlite`).
 * Default: `docket.worker()` at the shared concurrency, every other option default. Tuned (like the
 * peers' published configurations): a local buffer of {@link TUNED_PREFETCH} prefetched jobs, so a
 * claim leases up to concurrency + prefetch rows in one round trip.
 *
 * `docket-lean` is the same two workers on a Docket opened with `retentionMs: 0`: a job's row is
 * deleted in the statement that completes it instead of kept as a done record, which is what
 * graphile-worker always does (decision 0022). Its own database.
 *
 * `docket-baseline` is the same driver on another checkout of Docket (the directory named by
 * DOCKET_BASELINE, with its own node_modules), so a change is measured against the code it
 * replaces side by side, in the same rounds, on the same loaded machine; `docket-sqlite-baseline`
 * is that checkout on SQLite, beside `docket-sqlite` (requested with `--systems docket,docket-baseline`).
 */
import { rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import pg from 'pg';
import type { Docket } from '../../src/docket.js';
import type { WorkerOptions } from '../../src/worker/worker-options.js';
import { importDocket, THIS_CHECKOUT } from '../checkouts.js';
import { databaseNameOf, dropDatabase, recreateDatabase } from '../pg-admin.js';
import {
  type BenchJob,
  benchIndexOf,
  benchKindName,
  benchKindNames,
  NEIGHBOUR_QUEUE,
  OUTAGE_RETRY_DELAY_MS,
  type SystemConfig,
  type SystemModule,
  type SystemName,
} from './system.js';

/** The kind of every job Docket's drivers submit and handle (the HTTP workload's requests too). */
export const DOCKET_BENCH_KIND = 'bench.noop';
/** The tuned variant's prefetch: graphile-worker's published local queue size. */
const TUNED_PREFETCH = 500;
/** The schema Docket's drivers open (the HTTP workload's `docket serve` too). */
export const DOCKET_BENCH_SCHEMA = 'docket';
/** Schedule creations in flight while a schedule spike is armed. */
const SCHEDULES_IN_FLIGHT = 16;

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

function workerOptions(config: SystemConfig): WorkerOptions {
  const options: WorkerOptions =
    config.variant === 'tuned'
      ? { concurrency: config.concurrency, prefetch: TUNED_PREFETCH }
      : { concurrency: config.concurrency };
  // A neighbour handles the bench's kind too, so only the queue tells its work from the bench's.
  return config.neighbour ? { ...options, queues: [NEIGHBOUR_QUEUE] } : options;
}

/** The Docket class a driver opens: this checkout's, or the baseline checkout's. */
type DocketClass = Pick<typeof Docket, 'open'>;

/** Loads Docket from the DOCKET_BASELINE checkout (its src/, run through tsx like ours). */
async function loadBaselineDocket(): Promise<DocketClass> {
  const dir = process.env.DOCKET_BASELINE;
  if (!dir) throw new Error('docket-baseline needs DOCKET_BASELINE=<a checkout of Docket with node_modules>');
  return importDocket(dir);
}

/**
 * `loadDocket` imports the checkout's Docket when a driver first opens it, never at this module's
 * import: a worker process of the baseline then holds the baseline's modules only, as a worker of
 * this checkout holds only this checkout's. (With this checkout's modules loaded beside the
 * baseline's, the same code drained SQLite on 1.4x less CPU: docs/benchmarks.md, "A/A runs".)
 */
function docketModule(
  name: SystemName,
  loadDocket: () => Promise<DocketClass> = () => importDocket(THIS_CHECKOUT),
): SystemModule {
  const sqlite = name === 'docket-sqlite' || name === 'docket-sqlite-baseline';
  const lean = name === 'docket-lean';
  async function open(config: SystemConfig): Promise<Docket> {
    return (await loadDocket()).open({
      url: config.databaseUrl,
      schema: DOCKET_BENCH_SCHEMA,
      ...(lean ? { retentionMs: 0 } : {}),
    });
  }
  return {
    name,
    variants: ['default', 'tuned'],

    describe(variant, concurrency) {
      const options =
        variant === 'tuned'
          ? `{ concurrency: ${concurrency}, prefetch: ${TUNED_PREFETCH} }`
          : `{ concurrency: ${concurrency} }`;
      if (lean) {
        return `Docket.open({ retentionMs: 0 }) and docket.worker(${options}): a job's row is deleted as it completes (no done records, as graphile-worker keeps none); every other option default`;
      }
      return `docket.worker(${options}); every other option default${sqlite ? ' (SQLite file, WAL)' : ''}`;
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
      // Count live due jobs through the partial indexes, like the peers' drivers do. queueStats()
      // also counts every finished row (27 ms at 40,000 on PostgreSQL; a scan of the table on
      // SQLite, 64 ms at 100,000), which would add a slow query to the end of each drain measured
      // and charge it to Docket.
      const pool = sqlite ? undefined : new pg.Pool({ connectionString: config.databaseUrl, max: 1 });
      // An idle connection dropped by the server (a database dropped WITH (FORCE)) must not crash the run.
      pool?.on('error', () => {});
      // SQLite: a read-only connection of its own (WAL readers never block the workers' writes);
      // Docket's SQLite clock is this host's, so due means run_at <= Date.now().
      const file = sqlite ? new Database(sqlitePath(config), { readonly: true }) : undefined;
      const liveDue = file
        ?.prepare<{ now: number }, number>(
          `SELECT (SELECT count(*) FROM jobs WHERE state = 'running')
              + (SELECT count(*) FROM jobs WHERE state = 'pending' AND run_at <= :now)`,
        )
        .pluck();
      return {
        async insert(jobs: readonly BenchJob[]) {
          await docket.submitMany(
            jobs.map((job) => ({
              kind: benchKindName(DOCKET_BENCH_KIND, job.kind ?? 0),
              payload: job.failFirstAttempt ? { i: job.i, failFirstAttempt: true } : { i: job.i },
              ...(job.runAt ? { runAt: job.runAt } : {}),
              // The outage's retry an hour away, jitter-free: a run records first failures only.
              ...(job.failFirstAttempt
                ? {
                    retry: {
                      baseDelayMs: OUTAGE_RETRY_DELAY_MS,
                      factor: 1,
                      maxDelayMs: OUTAGE_RETRY_DELAY_MS,
                      jitterRatio: 0,
                    },
                  }
                : {}),
            })),
          );
        },
        async scheduleAt(indices: readonly number[], dueAt: Date) {
          if (dueAt.getTime() % 1000 !== 0)
            throw new Error(`a schedule spike is due at a whole second, not ${dueAt.toISOString()}`);
          // A six-field cron naming the instant's second of the year (UTC): due then, next a year later.
          const d = dueAt;
          const cron = `${d.getUTCSeconds()} ${d.getUTCMinutes()} ${d.getUTCHours()} ${d.getUTCDate()} ${d.getUTCMonth() + 1} *`;
          // As an application creating one schedule per tenant would: one call each, some in flight.
          let next = 0;
          const creator = async () => {
            while (next < indices.length) {
              const i = indices[next++]!;
              await docket.schedule({ id: `bench-${i}`, cron, job: { kind: DOCKET_BENCH_KIND, payload: { i } } });
            }
          };
          await Promise.all(Array.from({ length: SCHEDULES_IN_FLIGHT }, creator));
        },
        async submitOne(i: number, key?: string) {
          await docket.submit({
            kind: DOCKET_BENCH_KIND,
            payload: { i },
            ...(key === undefined ? {} : { idempotencyKey: key }),
          });
        },
        async submitOneAt(i: number, runAtMs: number) {
          await docket.submit({ kind: DOCKET_BENCH_KIND, payload: { i }, runAt: runAtMs });
        },
        async remainingDue() {
          if (pool) {
            const { rows } = await pool.query<{ n: string }>(
              `SELECT (SELECT count(*) FROM ${DOCKET_BENCH_SCHEMA}.jobs WHERE state = 'running')
                    + (SELECT count(*) FROM ${DOCKET_BENCH_SCHEMA}.jobs WHERE state = 'pending' AND run_at <= now()) AS n`,
            );
            return Number(rows[0]?.n ?? 0);
          }
          return liveDue?.get({ now: Date.now() }) ?? 0;
        },
        async close() {
          await docket.close();
          await pool?.end();
          file?.close();
        },
      };
    },

    async startWorker(config, onStart) {
      const docket = await open(config);
      const handler = async (payload: unknown, ctx: { attempt: number }) => {
        onStart(benchIndexOf(payload));
        // The outage workload: a downstream answering 503 to every first attempt.
        if (ctx.attempt === 1 && (payload as { failFirstAttempt?: boolean }).failFirstAttempt === true)
          throw new Error('outage: the downstream answered 503 Service Unavailable');
      };
      // The kinds workload: one handler per kind, as a service registers one per job type.
      for (const kind of benchKindNames(DOCKET_BENCH_KIND, config)) docket.handle(kind, handler);
      const worker = docket.worker(workerOptions(config));
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

/** Docket on PostgreSQL keeping no done records (`retentionMs: 0`). */
export const docketLeanSystem: SystemModule = docketModule('docket-lean');

/** Docket on an embedded SQLite file behind the bench interface. */
export const docketSqliteSystem: SystemModule = docketModule('docket-sqlite');

/** Docket on PostgreSQL from the DOCKET_BASELINE checkout, for before/after comparisons. */
export const docketBaselineSystem: SystemModule = docketModule('docket-baseline', loadBaselineDocket);

/** Docket on an embedded SQLite file from the DOCKET_BASELINE checkout, beside `docket-sqlite`. */
export const docketSqliteBaselineSystem: SystemModule = docketModule('docket-sqlite-baseline', loadBaselineDocket);
