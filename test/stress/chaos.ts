/**
 * `npm run chaos`: the fault-injection run from the command line. Prints its figures and the seed,
 * exits 1 when any invariant was violated or the queue did not drain.
 *
 *   npm run chaos -- --minutes 10 --store postgres --seed 42 --jobs-per-second 100
 *   npm run chaos -- --seconds 60 --store sqlite
 *   npm run chaos -- --store both
 *   npm run chaos -- --failover --minutes 10   # on a Patroni cluster: leader kills and switchovers
 *
 * `--failover` starts the harness of test/failover/patroni-cluster.ts (etcd, two PostgreSQL 15
 * nodes under Patroni, HAProxy; its own ports and a temporary directory) and stops it at the end.
 */
import { Command } from 'commander';
import { PatroniCluster } from '../failover/patroni-cluster.js';
import { type ChaosResult, DEFAULT_CHAOS_OPTIONS, runChaos } from './chaos-run.js';
import { formatScheduleSlots } from './schedule-slot-checker.js';

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
  .option('--failover', 'run on a Patroni cluster behind HAProxy; the nemesis kills its leader and switches it over')
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

/** Formats a result as the figures the issue asks for. */
export function formatFigures(result: ChaosResult): string {
  const f = result.figures;
  const lines = [
    `store                         ${result.options.store}`,
    `seed                          ${result.options.seed}`,
    `fault phase                   ${Math.round(result.faultPhaseMs / 1000)} s, drain ${Math.round(result.drainMs / 1000)} s (${result.drained ? 'drained' : 'NOT DRAINED'})`,
    `jobs submitted                ${f.jobsSubmitted} (done ${f.jobsDone}, parked ${f.jobsParked}: poison ${f.poisonJobsParked}, healthy ${f.healthyJobsParked} ${JSON.stringify(f.healthyParkedBy)})`,
    `handler starts                ${f.handlerStarts}`,
    `kills (kill -9)               ${f.kills} (+ ${f.poisonExits} poison-job exits)`,
    `pauses (SIGSTOP past lease)   ${f.pauses} (+ ${f.freezes} fleet freezes: every worker, 3-9 s)`,
    `database restarts             ${f.restarts}`,
    `connections terminated        ${f.connectionsTerminated}`,
    `ambiguous commits             ${f.ambiguousCommits}`,
    `stale results refused         ${f.staleResultsRefused} ${JSON.stringify(f.staleByOperation)}`,
    `  of which accepted earlier   ${f.completionsReportedStaleButAccepted} (complete retried after an ambiguous commit)`,
    `jobs finished twice           ${f.jobsFinishedTwice} (must be 0)`,
    `stale results accepted        ${f.staleResultsAccepted} (must be 0)`,
    `effects that ran twice        ${f.effectsRanTwice} (allowed: at-least-once)`,
    `jobs lost                     ${f.jobsLost} (must be 0)`,
    `jobs started early            ${f.jobsStartedEarly} (must be 0)`,
    `retries before their backoff  ${f.retriesBeforeBackoff} (must be 0)`,
    `overlapping leases seen       ${f.overlappingLeases} (must be 0)`,
    `duplicate idempotency keys    ${f.duplicateKeys}`,
    `worst recovery after a kill   ${f.worstRecoveryAfterKillMs ?? '-'} ms (bound ${f.recoveryBoundMs} ms; ${f.recoveriesMeasured} measured; during a restart or freeze: ${f.worstRecoveryDuringRestartMs ?? '-'} ms)`,
    `  after a further lost claim  ${f.worstRecoveryAfterLostClaimMs ?? '-'} ms (${f.recoveriesAfterLostClaim} such)`,
    ...formatScheduleSlots({ ...f.recurring, violations: [] }),
    `submit retries                ${result.submitRetries}`,
    `worker exits not by nemesis   ${result.unexpectedWorkerExits} (must be 0)`,
    ...formatFailovers(result),
    `violations                    ${result.violations.length}`,
  ];
  return lines.join('\n');
}

/** One line per failover: what happened and how long each phase took. */
export function formatFailovers(result: ChaosResult): string[] {
  if (result.failovers.length === 0) return [];
  const worst = (values: (number | null)[]) => Math.max(...values.map((v) => v ?? Number.POSITIVE_INFINITY));
  const kills = result.failovers.filter((f) => f.action === 'leaderKill');
  const switchovers = result.failovers.filter((f) => f.action === 'switchover');
  return [
    `failovers                     ${kills.length} leader kills, ${switchovers.length} switchovers`,
    `  kill -> first claim         worst ${kills.length ? worst(kills.map((f) => f.firstClaimAfterMs)) : '-'} ms (writable: worst ${kills.length ? worst(kills.map((f) => f.writableAfterMs)) : '-'} ms)`,
    `  switchover -> first claim   worst ${switchovers.length ? worst(switchovers.map((f) => f.firstClaimAfterMs)) : '-'} ms (writable: worst ${switchovers.length ? worst(switchovers.map((f) => f.writableAfterMs)) : '-'} ms)`,
    ...result.failovers.map(
      (f) =>
        `  ${f.action.padEnd(10)} ${f.from} -> ${f.to}: writable ${f.writableAfterMs} ms, first claim ${f.firstClaimAfterMs ?? '-'} ms, healthy ${f.healthyAfterMs} ms`,
    ),
  ];
}

// Ctrl-C or a kill of the harness still takes every worker process with it (chaos-run's exit hook).
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

let failed = false;
const patroni = args.failover ? await PatroniCluster.start((line) => console.log(line)) : undefined;
try {
  for (const store of stores) {
    const result = await runChaos({
      failover: patroni ? { cluster: patroni } : undefined,
      ...DEFAULT_CHAOS_OPTIONS,
      store,
      seed,
      faultMs,
      workers: Number(args.workers),
      concurrency: Number(args.concurrency),
      jobsPerSecond: Number(args.jobsPerSecond),
      faultIntervalMs: Number(args.faultIntervalMs),
      drainTimeoutMs: Number(args.drainSeconds) * 1000,
      log: (line) => console.log(line),
    });
    console.log(formatFigures(result));
    for (const violation of result.violations.slice(0, 50)) console.log(`VIOLATION ${violation}`);
    if (args.json) console.log(JSON.stringify(result));
    if (result.violations.length > 0 || !result.drained || result.unexpectedWorkerExits > 0) failed = true;
  }
} finally {
  await patroni?.stop();
}
console.log(`chaos: ${failed ? 'FAILED' : 'passed'} (seed ${seed})`);
process.exit(failed ? 1 : 0);
