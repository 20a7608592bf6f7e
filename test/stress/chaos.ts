/**
 * `npm run chaos`: the fault-injection run from the command line. Prints its figures and the seed,
 * exits 1 when any invariant was violated or the queue did not drain.
 *
 *   npm run chaos -- --minutes 10 --store postgres --seed 42 --jobs-per-second 100
 *   npm run chaos -- --seconds 60 --store sqlite
 *   npm run chaos -- --store both
 *   npm run chaos -- --failover --minutes 10   # on a Patroni cluster: leader kills and switchovers
 *   npm run chaos -- --shards --minutes 10     # on a sharded store over 3 clusters: shard restarts
 *
 * `--failover` starts the harness of test/failover/patroni-cluster.ts (etcd, two PostgreSQL 15
 * nodes under Patroni, HAProxy; its own ports and a temporary directory) and stops it at the end.
 * `--shards` starts three throwaway PostgreSQL 15 clusters on ports 5491-5493 (bench/capped-clusters.ts,
 * no CPU cap: the nemesis, not a quota, is the point here) and destroys them at the end.
 */
import { Command } from 'commander';
import { destroyCappedClusters, startCappedClusters } from '../../bench/capped-clusters.js';
import { PatroniCluster } from '../failover/patroni-cluster.js';
import { formatFigures } from './chaos-figures.js';
import { DEFAULT_CHAOS_OPTIONS, runChaos } from './chaos-run.js';

/** The sharded run's clusters: their own ports, so a shard benchmark (5481-5484) never meets them. */
const CHAOS_SHARD_PORTS = [5491, 5492, 5493];

const program = new Command()
  .name('chaos')
  .option('--store <store>', 'postgres, sqlite or both', 'postgres')
  .option('--seed <n>', 'nemesis and producer seed (default: random, printed)')
  .option('--minutes <n>', 'length of the fault phase in minutes')
  .option('--seconds <n>', 'length of the fault phase in seconds (default 90)')
  .option('--workers <n>', 'worker processes', String(DEFAULT_CHAOS_OPTIONS.workers))
  .option('--concurrency <n>', 'handlers per worker', String(DEFAULT_CHAOS_OPTIONS.concurrency))
  .option('--jobs-per-second <n>', 'producer rate', String(DEFAULT_CHAOS_OPTIONS.jobsPerSecond))
  .option('--fault-interval-ms <n>', 'mean time between faults', String(DEFAULT_CHAOS_OPTIONS.faultIntervalMs))
  .option(
    '--drain-seconds <n>',
    'longest drain after the faults stop',
    String(DEFAULT_CHAOS_OPTIONS.drainTimeoutMs / 1000),
  )
  .option(
    '--recovery-slack-ms <n>',
    'allowed on top of lease + poll interval before a recovery after a kill violates I8 (a busy host needs more)',
    String(DEFAULT_CHAOS_OPTIONS.recoverySlackMs),
  )
  .option('--failover', 'run on a Patroni cluster behind HAProxy; the nemesis kills its leader and switches it over')
  .option('--shards', 'run on a sharded store over 3 clusters (ports 5491-5493); the nemesis restarts shards')
  .option('--json', 'print the full result as JSON too');
program.parse();
const args = program.opts();

const seed = args.seed !== undefined ? Number(args.seed) : Math.floor(Math.random() * 2 ** 31);
const faultMs =
  args.minutes !== undefined
    ? Number(args.minutes) * 60_000
    : args.seconds !== undefined
      ? Number(args.seconds) * 1000
      : DEFAULT_CHAOS_OPTIONS.faultMs;
const stores = args.store === 'both' ? (['postgres', 'sqlite'] as const) : [args.store as 'postgres' | 'sqlite'];
if (!['postgres', 'sqlite', 'both'].includes(args.store)) {
  console.error(`chaos: --store must be postgres, sqlite or both, not ${JSON.stringify(args.store)}`);
  process.exit(2);
}
if (args.failover && args.store !== 'postgres') {
  console.error('chaos: --failover needs --store postgres (the Patroni cluster is PostgreSQL)');
  process.exit(2);
}
if (args.shards && (args.store !== 'postgres' || args.failover)) {
  console.error('chaos: --shards needs --store postgres and no --failover (each shard is its own cluster)');
  process.exit(2);
}

// Ctrl-C or a kill of the harness still takes every worker process with it (chaos-run's exit hook).
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

let failed = false;
const patroni = args.failover ? await PatroniCluster.start((line) => console.log(line)) : undefined;
const shardClusters = args.shards
  ? await startCappedClusters({ ports: CHAOS_SHARD_PORTS, cpuCores: null, log: (line) => console.log(line) })
  : undefined;
try {
  for (const store of stores) {
    const result = await runChaos({
      failover: patroni ? { cluster: patroni } : undefined,
      shards: shardClusters ? { clusters: shardClusters } : undefined,
      ...DEFAULT_CHAOS_OPTIONS,
      store,
      seed,
      faultMs,
      workers: Number(args.workers),
      concurrency: Number(args.concurrency),
      jobsPerSecond: Number(args.jobsPerSecond),
      faultIntervalMs: Number(args.faultIntervalMs),
      drainTimeoutMs: Number(args.drainSeconds) * 1000,
      recoverySlackMs: Number(args.recoverySlackMs),
      log: (line) => console.log(line),
    });
    console.log(formatFigures(result));
    for (const violation of result.violations.slice(0, 50)) console.log(`VIOLATION ${violation}`);
    if (args.json) console.log(JSON.stringify(result));
    if (result.violations.length > 0 || !result.drained || result.unexpectedWorkerExits > 0) failed = true;
  }
} finally {
  await patroni?.stop();
  if (shardClusters) await destroyCappedClusters(shardClusters);
}
console.log(`chaos: ${failed ? 'FAILED' : 'passed'} (seed ${seed})`);
process.exit(failed ? 1 : 0);
