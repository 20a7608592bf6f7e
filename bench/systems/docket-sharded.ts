/**
 * Docket over several PostgreSQL clusters, for the shard benchmark (bench/shards.ts). The config's
 * `shards` lists one URL per cluster (database {@link SHARD_DATABASE}, schema `docket`).
 *
 * Two layouts, both with the tuned worker of bench/systems/docket.ts (prefetch 500):
 * - `store` (the one measured): one Docket opened with `{ shards: [url, …] }`, so every submit
 *   is routed by the sharded store and every worker claims from every shard.
 * - `independent` (the reference, with `--shard-layout independent`): one ordinary Docket per
 *   cluster and, in each worker process, one worker per cluster. It is what N separate
 *   deployments would do and bounds what a sharded store can reach; the gap between the two is
 *   the cost of the sharded store's routing and claim scheduling.
 */
import pg from 'pg';
import { Docket } from '../../src/docket.js';
import {
  type BenchJob,
  benchIndexOf,
  NEIGHBOUR_QUEUE,
  refuseKinds,
  type SystemConfig,
  type SystemModule,
} from './system.js';

const KIND = 'bench.noop';
const TUNED_PREFETCH = 500;
const SCHEMA = 'docket';
/** The scratch database on each shard cluster: the clusters are throwaway, so one fixed name. */
export const SHARD_DATABASE = 'docket_bench';

function shardUrls(config: SystemConfig): readonly string[] {
  if (!config.shards || config.shards.length === 0) throw new Error('docket-sharded needs config.shards');
  return config.shards;
}

/** The shard's URL with the schema Docket uses, as `Docket.open` and `{ shards }` take it. */
function withSchema(url: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('schema', SCHEMA);
  return parsed.toString();
}

async function openSharded(config: SystemConfig): Promise<Docket[]> {
  const urls = shardUrls(config).map(withSchema);
  if (config.shardLayout === 'independent') return Promise.all(urls.map((url) => Docket.open({ url })));
  return [await Docket.open({ shards: urls })];
}

async function recreate(url: string): Promise<void> {
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${SHARD_DATABASE} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${SHARD_DATABASE}`);
  } finally {
    await client.end();
  }
}

/** Docket on N PostgreSQL clusters behind the bench interface. */
export const docketShardedSystem: SystemModule = {
  name: 'docket-sharded',
  variants: ['tuned'],

  describe(_variant, concurrency) {
    return `Docket.open({ shards: [url, …] }); docket.worker({ concurrency: ${concurrency}, prefetch: ${TUNED_PREFETCH} })`;
  },

  async reset(config) {
    refuseKinds(config, 'the shard benchmark drives one kind');
    await Promise.all(shardUrls(config).map(recreate));
    // Opening migrates every shard, so workers starting later find the schemas ready.
    const dockets = await openSharded(config);
    await Promise.all(dockets.map((docket) => docket.close()));
  },

  async openStore(config) {
    const dockets = await openSharded(config);
    // Counting through each shard's partial indexes, as the single-store driver does.
    const pools = shardUrls(config).map((url) => {
      const pool = new pg.Pool({ connectionString: url, max: 1 });
      pool.on('error', () => {});
      return pool;
    });
    let next = 0;
    return {
      async insert(jobs: readonly BenchJob[]) {
        const inputs = jobs.map((job) => ({
          kind: KIND,
          payload: { i: job.i },
          ...(job.runAt ? { runAt: job.runAt } : {}),
        }));
        // The sharded store routes each keyless job itself; the independent layout splits the
        // batch evenly, as the sharded store's keyless rule would with every shard healthy.
        const share = Math.ceil(inputs.length / dockets.length);
        await Promise.all(
          dockets.map((docket, k) => {
            const part = inputs.slice(k * share, (k + 1) * share);
            return part.length > 0 ? docket.submitMany(part) : Promise.resolve([]);
          }),
        );
      },
      async submitOne(i: number, key?: string) {
        // A keyed job goes to its key's shard in the sharded layout; the independent one has no
        // router, so it takes turns as keyless jobs do.
        await dockets[next++ % dockets.length]!.submit({
          kind: KIND,
          payload: { i },
          ...(key === undefined ? {} : { idempotencyKey: key }),
        });
      },
      async submitOneAt(i: number, runAtMs: number) {
        // Keyless, so routed (or taking turns) as submitOne's keyless jobs are.
        await dockets[next++ % dockets.length]!.submit({ kind: KIND, payload: { i }, runAt: runAtMs });
      },
      async remainingDue() {
        const counts = await Promise.all(
          pools.map(async (pool) => {
            const { rows } = await pool.query<{ n: string }>(
              `SELECT (SELECT count(*) FROM ${SCHEMA}.jobs WHERE state = 'running')
                    + (SELECT count(*) FROM ${SCHEMA}.jobs WHERE state = 'pending' AND run_at <= now()) AS n`,
            );
            return Number(rows[0]?.n ?? 0);
          }),
        );
        return counts.reduce((sum, n) => sum + n, 0);
      },
      async close() {
        await Promise.all(dockets.map((docket) => docket.close()));
        await Promise.all(pools.map((pool) => pool.end()));
      },
    };
  },

  async startWorker(config, onStart) {
    const dockets = await openSharded(config);
    const workers = dockets.map((docket) => {
      docket.handle(KIND, async (payload) => {
        onStart(benchIndexOf(payload));
      });
      return docket.worker({
        concurrency: config.concurrency,
        prefetch: TUNED_PREFETCH,
        ...(config.neighbour ? { queues: [NEIGHBOUR_QUEUE] } : {}),
      });
    });
    await Promise.all(workers.map((worker) => worker.start()));
    return {
      async stop() {
        await Promise.all(workers.map((worker) => worker.stop()));
        await Promise.all(dockets.map((docket) => docket.close()));
      },
    };
  },

  async destroy() {
    // The clusters themselves are destroyed by the shard benchmark with their data directories.
  },
};
