/**
 * `npm run bench`: Docket against graphile-worker, pg-boss and BullMQ on this machine's PostgreSQL
 * and Redis (loopback only), alternating the systems over several rounds, bounded in time. Docket
 * runs default and tuned, and both again keeping no done records (`docket-lean`: retentionMs 0,
 * the way graphile-worker keeps none; submits are the same code, so it skips the submit workloads).
 *
 *   npm run bench -- --smoke                 tiny sizes, about 2 min, results to a temp dir (CI)
 *   npm run bench                            the full run; writes bench/RESULTS.md + results.json
 *   npm run bench -- --only drain,spike      some workloads (drain backlog backfill outage stream spike schedule-spike large limit sqlite submit single-submit delayed neighbours http-submit remote-workers memory dashboard kinds)
 *   npm run bench -- --only backlog --rounds 3  default vs tuned drains at 20k, 100k, 1M (+ graphile-worker, raw-SQL reference;
 *                                            up to 100k the same worker then drains a second backlog)
 *   npm run bench -- --only backfill --rounds 3 a 100k backfill into a worker already running (decision 0023);
 *                                            --backfill-analyze off leaves out the ANALYZE (the control)
 *   npm run bench -- --only outage,backlog --backlog-jobs 20000 --rounds 3   every first attempt throwing
 *   npm run bench -- --only kinds --systems docket,graphile-worker,bullmq --rounds 3   a 20k backlog over 100 and
 *                                            1,000 job kinds (--kinds 10,100 --kinds-jobs 50000), one handler each
 *   npm run bench -- --only schedule-spike --systems docket,docket-sqlite   10,000 schedules due at one second
 *                                            (decision 0024), beside the drain of the same backlog
 *   npm run bench -- --only single-submit --systems docket,docket-baseline,graphile-worker,pg-boss,bullmq --rounds 3
 *                                            one job per call, then each call with a fresh caller's key (capacity-keyed)
 *   npm run bench -- --only delayed --systems docket,docket-sqlite,bullmq,graphile-worker,pg-boss
 *                                            single submits each due 2 s after its call (runAt, delay, startAfter):
 *                                            lateness of each start against its run time, early starts
 *   DOCKET_BASELINE=/tmp/base npm run bench -- --only neighbours --systems docket,docket-baseline,bullmq,graphile-worker,pg-boss
 *                                            the single-submit latency run beside 3 idle worker processes of the
 *                                            same system on another queue (--neighbours N): other services sharing
 *                                            the database; start latency, transactions per job, the neighbours' CPU
 *   npm run bench -- --only http-submit --systems docket,docket-baseline --rounds 3   POST /v1/jobs to `docket serve`
 *                                            (defaults; PostgreSQL and SQLite, each checkout's own CLI) beside a bare
 *                                            node:http server, 100 requests in flight (http-submit.ts)
 *   npm run bench -- --only remote-workers --systems docket,docket-baseline   remote HTTP workers of `docket serve`
 *                                            (defaults, each checkout's own CLI): a 20k drain, a stream, a delayed
 *                                            stream; lateness, server CPU, transactions and claims per job (remote-workers.ts)
 *   npm run bench -- --rounds 5 --max-minutes 60 --systems docket,graphile-worker --out /tmp/x
 *   npm run bench -- --peers-latest --only drain --systems docket,graphile-worker,pg-boss,bullmq
 *                                            adds graphile-worker 0.18, pg-boss 12, BullMQ latest on Node 24 (bench/peers-latest)
 *   npm run bench -- --docket-node 24 --only backlog,spike   Docket's PostgreSQL worker processes on Node 24
 *                                            (--baseline-node: docket-baseline's)
 *   npm run bench -- --soak --minutes 30      1,000 single submits/s, 7-day retention, sampled every 30 s (soak.ts)
 *   npm run bench -- --soak --minutes 10 --retention-ms 120000 --prune-interval-ms 60000   pruning keeping up
 *   npm run bench -- --only drain --drain-jobs 20000 --drain-cap-seconds 30 --out /tmp/x   a medium drain
 *   npm run bench -- --shards [--smoke]      the shard benchmark instead (bench/shards.ts: 1, 2, 4 CPU-capped clusters)
 *
 * Every run checks that each job ran exactly once; see workloads.ts. Exits non-zero when any run
 * lost or doubled a job (and, in smoke mode, when anything failed, errored or timed out).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { cpus, type as osType, release, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import pg from 'pg';
import { summarizeProfiles } from './cpu-profile.js';
import { runDashboardBench } from './dashboard-queries.js';
import { docketServeTarget, httpFloorTarget, httpSubmitRun, SERVE_SYSTEMS } from './http-submit.js';
import {
  isLatestSystem,
  latestNodePath,
  latestVersions,
  nodePathOfLine,
  pinnedNodeMajor,
} from './peers-latest/latest.js';
import {
  databaseClockOffsetMs,
  databaseNameOf,
  databaseNow,
  databaseUrl,
  dropAllScratchDatabases,
  hostNowMs,
  postgresSettings,
  scratchName,
  withAdmin,
} from './pg-admin.js';
import { pgbenchLimit } from './pgbench-limit.js';
import { remoteServeTarget, remoteWorkersParams, remoteWorkersRun } from './remote-workers.js';
import { type BenchResults, type ExplainCapture, writeReport } from './report.js';
import { parseSoakOptions, runSoak, soakMarkdown, writeSoakReport } from './soak.js';
import {
  DELAYED_SYSTEMS,
  KINDS_SYSTEMS,
  loadSystem,
  NEIGHBOUR_SYSTEMS,
  OUTAGE_SYSTEMS,
  SCHEDULE_SYSTEMS,
  SYSTEM_NAMES,
  type SystemConfig,
  type SystemName,
  type Variant,
} from './systems/system.js';
import {
  backfillRun,
  type Contender,
  delayedRun,
  drainRun,
  insertFutureFiller,
  outageRun,
  type RunRecord,
  type RunSubject,
  singleSubmitCapacityRun,
  singleSubmitLatencyRun,
  skippedRun,
  spikeRun,
  streamRun,
  submitRun,
} from './workloads.js';

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const WORKLOADS = [
  'drain',
  'backlog',
  'backfill',
  'outage',
  'stream',
  'spike',
  'schedule-spike',
  'large',
  'limit',
  'sqlite',
  'submit',
  'single-submit',
  'delayed',
  'neighbours',
  'http-submit',
  'remote-workers',
  'memory',
  'dashboard',
  'kinds',
] as const;
type Workload = (typeof WORKLOADS)[number];
const PEERS: SystemName[] = ['graphile-worker', 'pg-boss', 'bullmq'];

const { values: args } = parseCommandLine({
  options: {
    help: { type: 'boolean', short: 'h', default: false },
    smoke: { type: 'boolean', default: false },
    only: { type: 'string' },
    systems: { type: 'string' },
    rounds: { type: 'string' },
    concurrency: { type: 'string' },
    'max-minutes': { type: 'string' },
    'memory-minutes': { type: 'string' },
    'drain-jobs': { type: 'string' },
    'drain-cap-seconds': { type: 'string' },
    'drain-procs': { type: 'string' },
    'backlog-jobs': { type: 'string' },
    'backlog-cap-seconds': { type: 'string' },
    kinds: { type: 'string' },
    'kinds-jobs': { type: 'string' },
    'backfill-analyze': { type: 'string' },
    'single-submit-jobs': { type: 'string' },
    neighbours: { type: 'string' },
    out: { type: 'string' },
    'no-profile': { type: 'boolean', default: false },
    shards: { type: 'boolean', default: false },
    'shard-counts': { type: 'string' },
    'shard-cpu': { type: 'string' },
    'shard-jobs': { type: 'string' },
    'shard-procs': { type: 'string' },
    'shard-layout': { type: 'string' },
    'shard-spike-jobs': { type: 'string' },
    soak: { type: 'boolean', default: false },
    'peers-latest': { type: 'boolean', default: false },
    'docket-node': { type: 'string' },
    'baseline-node': { type: 'string' },
    minutes: { type: 'string' },
    rate: { type: 'string' },
    'retention-ms': { type: 'string' },
    'prune-interval-ms': { type: 'string' },
    'sample-seconds': { type: 'string' },
    'vacuum-seconds': { type: 'string' },
  },
});

if (args.help) {
  console.log(usage());
  process.exit(0);
}

const smoke = args.smoke ?? false;
const only = new Set<Workload>(
  args.only
    ? (args.only.split(',').map((name) => name.trim()) as Workload[])
    : // Smoke mode leaves out the long ones; backlog is the drain's code path at other sizes.
      WORKLOADS.filter((w) => !smoke || (w !== 'memory' && w !== 'backlog')),
);
for (const name of only)
  if (!WORKLOADS.includes(name)) refuse(`unknown workload ${name}; known: ${WORKLOADS.join(', ')}`);
const rounds = positiveNumber('rounds', args.rounds ?? (smoke ? 1 : 3));
const concurrency = positiveNumber('concurrency', args.concurrency ?? 24);
// Smoke: every workload once at tiny sizes takes about 2.5 min on a quiet 2-core VM and a little
// over 3 beside the rest of the test suite in CI (3 min left two runs out there); past the budget
// the last ones would be left out, which the smoke test refuses.
const maxMinutes = positiveNumber('max-minutes', args['max-minutes'] ?? (smoke ? 4 : 120));
const deadlineMs = hostNowMs() + maxMinutes * 60_000;

/** Sizes per mode; the full run's are the issue's. */
const SIZES = smoke
  ? {
      drainJobs: [300],
      drainProcs: [1],
      drainCapMs: 15_000,
      backlogJobs: [300, 1_000],
      backlogCapMs: 15_000,
      backfill: { jobs: 300, warm: 20 },
      outageJobs: 300,
      kinds: { jobs: 300, counts: [10] },
      streamRates: [200],
      streamMs: 1_000,
      spikeJobs: 300,
      spikeLeadMs: 1_000,
      spikeCapMs: 10_000,
      spikesPerWorker: 2,
      scheduleSpike: { jobs: 200, leadMs: 3_000 },
      fillerJobs: 5_000,
      largeDrainJobs: 300,
      largeStreamRate: 200,
      submit: [
        { jobs: 50, batch: 1 },
        { jobs: 2_000, batch: 1_000 },
      ],
      pgbench: { seconds: 1, clients: 4, threads: 2, batch: 100 },
      singleSubmit: { capacityJobs: 300, inFlight: 100, latencyRate: 200, latencyMs: 1_000 },
      delayed: { rate: 200, durationMs: 1_000, delayMs: 500, inFlight: 100 },
      neighbours: { count: 1, rate: 200, durationMs: 2_000, inFlight: 100, statsFlushMs: 0 },
      httpSubmit: { jobs: 300, inFlight: 100 },
      remoteWorkers: {
        drain: { jobs: 300, workers: 4, limit: 100, capMs: 30_000 },
        stream: { ratePerSec: 50, durationMs: 1_000, workers: 4, limit: 10, capMs: 30_000 },
        delayMs: 500,
        statsFlushMs: 0,
      },
      memoryMs: 0,
    }
  : {
      drainJobs: [20_000, 100_000],
      drainProcs: [1, 2],
      drainCapMs: 120_000,
      backlogJobs: [20_000, 100_000, 1_000_000],
      backlogCapMs: 300_000,
      backfill: { jobs: 100_000, warm: 100 },
      outageJobs: 20_000,
      // A service with a hundred job kinds is ordinary; a thousand is a large one (decision 0026).
      kinds: { jobs: 20_000, counts: [100, 1_000] },
      streamRates: [200, 1_000, 5_000],
      streamMs: 10_000,
      spikeJobs: 10_000,
      spikeLeadMs: 3_000,
      spikeCapMs: 30_000,
      // The first spike meets a worker just started, the last one a worker that has run two.
      spikesPerWorker: 3,
      // Creating 10,000 schedules one call each (16 in flight) takes about 12 s here (800 a
      // second): the lead covers it with room for a loaded machine.
      scheduleSpike: { jobs: 10_000, leadMs: 20_000 },
      fillerJobs: 1_000_000,
      largeDrainJobs: 20_000,
      largeStreamRate: 1_000,
      submit: [
        { jobs: 2_000, batch: 1 },
        { jobs: 100_000, batch: 1_000 },
      ],
      pgbench: { seconds: 10, clients: 4, threads: 2, batch: 100 },
      singleSubmit: { capacityJobs: 20_000, inFlight: 100, latencyRate: 1_000, latencyMs: 10_000 },
      // Reminders: single submits each due 2 s after its call, at the single-submit latency rate.
      delayed: { rate: 1_000, durationMs: 10_000, delayMs: 2_000, inFlight: 100 },
      // The single-submit latency run beside 3 idle workers of another queue; the transaction count
      // starts 11 s after the workers did, past the 10 s PostgreSQL 15 may hold their start-ups' counters.
      neighbours: { count: 3, rate: 1_000, durationMs: 10_000, inFlight: 100, statsFlushMs: 11_000 },
      httpSubmit: { jobs: 20_000, inFlight: 100 },
      // Remote HTTP workers: a 20k backlog drained by 4 claiming 100, then 100 jobs/s for 10 s to
      // 16 waiting workers claiming 10, due now and then 2 s after each submit.
      remoteWorkers: {
        drain: { jobs: 20_000, workers: 4, limit: 100, capMs: 120_000 },
        stream: { ratePerSec: 100, durationMs: 10_000, workers: 16, limit: 10, capMs: 30_000 },
        delayMs: 2_000,
        statsFlushMs: 11_000,
      },
      memoryMs: Number(args['memory-minutes'] ?? 10) * 60_000,
    };

/** A comma-separated list of positive integers, or a clear error naming the flag. */
function positiveIntegers(flag: string, text: string): number[] {
  const values = text.split(',').map((part) => Number(part.trim()));
  if (values.length === 0 || values.some((value) => !Number.isInteger(value) || value < 1)) {
    refuse(`--${flag} must be positive integers separated by commas, got ${JSON.stringify(text)}`);
  }
  return values;
}
/** A positive number of seconds, as ms, or a clear error naming the flag. */
function secondsMs(flag: string, text: string): number {
  return positiveNumber(flag, text) * 1000;
}
if (args['drain-jobs']) SIZES.drainJobs = positiveIntegers('drain-jobs', args['drain-jobs']);
if (args['drain-procs']) SIZES.drainProcs = positiveIntegers('drain-procs', args['drain-procs']);
if (args['drain-cap-seconds']) SIZES.drainCapMs = secondsMs('drain-cap-seconds', args['drain-cap-seconds']);
if (args['backlog-jobs']) SIZES.backlogJobs = positiveIntegers('backlog-jobs', args['backlog-jobs']);
if (args['backlog-cap-seconds']) SIZES.backlogCapMs = secondsMs('backlog-cap-seconds', args['backlog-cap-seconds']);
if (args.kinds) SIZES.kinds.counts = positiveIntegers('kinds', args.kinds);
if (args['kinds-jobs']) {
  const [jobs, ...rest] = positiveIntegers('kinds-jobs', args['kinds-jobs']);
  if (rest.length > 0) refuse(`--kinds-jobs takes one number, got ${JSON.stringify(args['kinds-jobs'])}`);
  SIZES.kinds.jobs = jobs!;
}
if (args['single-submit-jobs']) SIZES.singleSubmit.capacityJobs = Number(args['single-submit-jobs']);
if (args.neighbours) {
  const [count, ...rest] = positiveIntegers('neighbours', args.neighbours);
  if (rest.length > 0) refuse(`--neighbours takes one number, got ${JSON.stringify(args.neighbours)}`);
  SIZES.neighbours.count = count!;
}

/**
 * `--docket-node 22|24|26`: the Node line Docket's PostgreSQL worker processes run on (docket,
 * docket-lean and docket-sharded, and the raw-SQL reference beside them), and `--baseline-node` the same for
 * docket-baseline's, each installed like the node-lines suites' binaries (scripts/node-binary.mjs),
 * because users run the maintained lines, not this machine's Node 20. With DOCKET_BASELINE set to
 * this same checkout, `--docket-node 24` alone puts one tree on two Node lines side by side. The SQLite systems stay on the harness's
 * Node (better-sqlite3 here is built for its ABI), as do submits, which the harness makes. Each
 * configuration row of the report names the Node its worker processes reported.
 */
const docketNodePath = nodeBinaryFor('docket-node', args['docket-node']);
const baselineNodePath = nodeBinaryFor('baseline-node', args['baseline-node']);

function nodeBinaryFor(flag: string, text: string | undefined): string | undefined {
  return text === undefined ? undefined : nodePathOfLine(pinnedNodeMajor(flag, text));
}

/** The Node binary a system's worker processes run on; undefined: the harness's own. */
function nodePathOf(system: SystemName): string | undefined {
  if (isLatestSystem(system)) return latestNodePath();
  // The raw-SQL reference is the limit Docket's drains are divided by: it runs on Docket's line.
  if (system === 'docket' || system === 'docket-lean' || system === 'docket-sharded' || system === 'raw-sql')
    return docketNodePath;
  if (system === 'docket-baseline') return baselineNodePath;
  return undefined;
}

const outDir = args.out ?? (smoke ? mkdtempSync(join(tmpdir(), 'docket-bench-smoke-')) : BENCH_DIR);
const scratchDir = mkdtempSync(join(tmpdir(), 'docket-bench-scratch-'));
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PG_LOG = process.env.BENCH_PG_LOG ?? '/var/log/postgresql/postgresql-15-main.log';

function log(message: string): void {
  const elapsed = ((hostNowMs() - startedAt) / 1000).toFixed(0).padStart(5);
  console.log(`[${elapsed}s] ${message}`);
}
const startedAt = hostNowMs();

function configFor(system: SystemName, variant: Variant): SystemConfig {
  return {
    system,
    variant,
    concurrency,
    databaseUrl:
      system === 'docket-sqlite' || system === 'docket-sqlite-baseline'
        ? `sqlite:${join(scratchDir, `${system}.db`)}`
        : databaseUrl(scratchName(system)),
    redisUrl: REDIS_URL,
    redisPrefix: 'docket-bench',
    nodePath: nodePathOf(system),
  };
}

async function contendersFor(systems: SystemName[], unavailable: Map<string, string>): Promise<Contender[]> {
  const out: Contender[] = [];
  for (const system of systems) {
    try {
      const module = await loadSystem(system);
      for (const variant of module.variants) {
        // pg-boss's defaults run one job per loop every 2 s: a smoke run would only measure its timeout.
        if (smoke && variant === 'default' && !system.startsWith('docket')) continue;
        out.push({
          module,
          variant,
          config: configFor(system, variant),
          label: labelOf(system, variant, module.variants.length),
        });
      }
    } catch (error) {
      unavailable.set(system, (error as Error).message.split('\n')[0] ?? String(error));
    }
  }
  return out;
}

function labelOf(system: string, variant: Variant, variants: number): string {
  return variants > 1 ? `${system} (${variant})` : system;
}

/**
 * Runs `fn` for each contender each round, rotating the order so no system always goes first.
 * With a list of parameter sets, `fn` makes one run of each, in that order, back to back (a
 * variant right after the run it is compared with, on the same contender).
 */
async function alternate<T extends RunSubject>(
  contenders: readonly T[],
  workload: string,
  params: RunRecord['params'] | readonly RunRecord['params'][],
  results: RunRecord[],
  fn: (contender: T, round: number) => Promise<RunRecord | RunRecord[]>,
  skip: (contender: T) => string | null = () => null,
): Promise<void> {
  const paramSets: readonly RunRecord['params'][] = Array.isArray(params) ? params : [params];
  const timedOut = new Set<string>();
  for (let round = 1; round <= rounds; round += 1) {
    const shift = (round - 1) % Math.max(1, contenders.length);
    const order = [...contenders.slice(shift), ...contenders.slice(0, shift)];
    for (const contender of order) {
      const reason =
        hostNowMs() > deadlineMs
          ? `time budget of ${maxMinutes} min used up`
          : timedOut.has(contender.label)
            ? 'timed out in an earlier round'
            : skip(contender);
      if (reason) {
        for (const set of paramSets) results.push(skippedRun(contender, workload, round, set, reason));
        continue;
      }
      // Times taken in two processes (a submit here, a start in a worker) are read on one clock,
      // the host's monotonic one (hostNowMs), so a step or slew of the wall clock cannot enter them.
      const made = await fn(contender, round);
      const runs = Array.isArray(made) ? made : [made];
      for (const [k, run] of runs.entries()) {
        const set = paramSets[k] ?? paramSets[0] ?? {};
        run.params = { ...set, ...run.params };
        results.push(run);
        if (run.status === 'timeout') timedOut.add(contender.label);
        const headline = Object.entries(run.metrics)
          .filter(([key]) =>
            ['jobsPerSec', 'latencyP50Ms', 'latencyP99Ms', 'latenessP99Ms', 'lastStartAfterDueMs', 'early'].includes(
              key,
            ),
          )
          .map(([key, value]) => `${key}=${Math.round(value * 10) / 10}`)
          .join(' ');
        log(
          `${workload} ${JSON.stringify(set)} r${round} ${contender.label}: ${run.status} ${headline} ${run.problems.join('; ')}`,
        );
      }
    }
  }
}

/** The first timed-out (or failed) drain of a contender at a smaller size predicts the larger one. */
function drainSkip(results: RunRecord[], capMs: number, n: number, procs: number, workload = 'drain') {
  return (contender: Contender): string | null => {
    const earlier = results.filter(
      (run) =>
        run.workload === workload &&
        run.label === contender.label &&
        run.params.procs === procs &&
        Number(run.params.jobs) < n,
    );
    const rate = Math.max(0, ...earlier.map((run) => run.metrics.jobsPerSec ?? 0));
    if (earlier.some((run) => run.status === 'timeout') || (earlier.length > 0 && n / rate > capMs / 1000)) {
      return `its ${earlier[0]?.params.jobs}-job drain rate (${Math.round(rate)}/s) cannot finish ${n} jobs within the ${capMs / 1000} s cap`;
    }
    return null;
  };
}

async function machineInfo(): Promise<BenchResults['machine']> {
  const version = (pkg: string) => {
    try {
      return (
        JSON.parse(readFileSync(join(BENCH_DIR, '..', 'node_modules', pkg, 'package.json'), 'utf8')) as {
          version: string;
        }
      ).version;
    } catch {
      return 'unknown';
    }
  };
  const postgres = await withAdmin(
    async (client) => (await client.query<{ v: string }>('SELECT version() AS v')).rows[0]?.v ?? '',
  );
  let redis = 'unavailable';
  try {
    const { Redis } = await import('ioredis');
    const client = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await client.connect();
    redis = /redis_version:(\S+)/.exec(await client.info('server'))?.[1] ?? 'unknown';
    client.disconnect();
  } catch (error) {
    redis = `unavailable (${(error as Error).message})`;
  }
  let sqlite = 'unknown';
  try {
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(':memory:');
    sqlite = (db.prepare('SELECT sqlite_version() AS v').get() as { v: string }).v;
    db.close();
  } catch {
    sqlite = 'unavailable';
  }
  const clock = await databaseClockOffsetMs();
  return {
    cpu: `${cpus()[0]?.model ?? 'unknown'} × ${cpus().length}`,
    memoryGb: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    os: `${osType()} ${release()}`,
    node: process.version,
    postgres,
    redis,
    sqlite,
    versions: {
      docket: (JSON.parse(readFileSync(join(BENCH_DIR, '..', 'package.json'), 'utf8')) as { version: string }).version,
      'graphile-worker': version('graphile-worker'),
      'pg-boss': version('pg-boss'),
      bullmq: version('bullmq'),
      ioredis: version('ioredis'),
      pg: version('pg'),
      'better-sqlite3': version('better-sqlite3'),
      ...(args['peers-latest'] ? latestVersions() : {}),
    },
    dbClockOffsetMs: clock.offsetMs,
    dbClockErrorBoundMs: clock.errorBoundMs,
    postgresSettings: await postgresSettings(),
  };
}

/**
 * Captures the claim's plan with 1M future rows present: auto_explain (ANALYZE, no timing) is
 * switched on for the contender's database while a small drain runs, then off again, and the plans
 * of statements that lease rows are read from the server log.
 */
async function explainClaim(contender: Contender, jobs: number): Promise<ExplainCapture> {
  const database = databaseNameOf(contender.config.databaseUrl);
  let offset = 0;
  try {
    offset = statSync(PG_LOG).size;
  } catch (error) {
    return { label: contender.label, plans: [], note: `server log ${PG_LOG} unreadable: ${(error as Error).message}` };
  }
  await withAdmin(async (client) => {
    await client.query(`ALTER DATABASE ${database} SET session_preload_libraries = 'auto_explain'`);
    await client.query(`ALTER DATABASE ${database} SET auto_explain.log_min_duration = 0`);
    await client.query(`ALTER DATABASE ${database} SET auto_explain.log_analyze = on`);
    await client.query(`ALTER DATABASE ${database} SET auto_explain.log_timing = off`);
  });
  try {
    await drainRun(contender, jobs, 1, { round: 0, capMs: 30_000, fresh: false, workload: 'explain-probe' });
  } finally {
    await withAdmin((client) => client.query(`ALTER DATABASE ${database} RESET ALL`));
  }
  const text = readFileSync(PG_LOG, 'utf8').slice(offset);
  const blocks = text.split(/\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)/).filter((block) => block.includes('Query Text:'));
  const leasing = blocks.filter((block) => /lease/i.test(block) && /(Update on|LockRows)/.test(block));
  const distinct = new Map<string, string>();
  for (const block of leasing) {
    const query =
      /Query Text: ([\s\S]*?)\n\s*(Update on|Insert on|Limit|LockRows|CTE|Nested|Hash|Index|Seq|Result|Sort)/.exec(
        block,
      )?.[1] ?? block;
    const key = query.replace(/\s+/g, ' ').slice(0, 200);
    if (!distinct.has(key)) distinct.set(key, block.slice(block.indexOf('duration:')));
  }
  const plans = [...distinct.values()].slice(0, 3);
  return {
    label: contender.label,
    plans,
    note:
      plans.length === 0
        ? `no leasing statement found in ${blocks.length} logged plans`
        : `${leasing.length} leasing statements logged; ${plans.length} distinct shown`,
    seqScanOnJobs: plans.some((plan) => /Seq Scan on jobs/.test(plan)),
  };
}

/** Samples what the database sessions of one database wait on while `during` runs. */
async function sampleWaits(database: string, during: Promise<unknown>): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: databaseUrl('postgres') });
  await client.connect();
  const counts: Record<string, number> = {};
  let done = false;
  // Errors of `during` belong to its awaiting caller; this only needs to know when it settled.
  during.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  try {
    while (!done) {
      const { rows } = await client.query<{ w: string }>(
        `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') || '  ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS w
           FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND pid <> pg_backend_pid()`,
        [database],
      );
      for (const row of rows) counts[row.w] = (counts[row.w] ?? 0) + 1;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await client.end();
  }
  return counts;
}

/** A positive number from a flag, or a clear error naming the flag. */
function positive(name: string, value: string | undefined, fallback: number, integer = true): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new Error(`--${name} must be a positive ${integer ? 'integer' : 'number'}, got ${JSON.stringify(value)}`);
  }
  return n;
}

/** `--shards`: the shard benchmark of bench/shards.ts, with its own sizes; nothing else runs. */
async function shardMain(): Promise<void> {
  rmSync(scratchDir, { recursive: true, force: true });
  const { runShardBench, writeShardReport, summarize, SHARD_TARGETS } = await import('./shards.js');
  const layout = args['shard-layout'] ?? 'store';
  if (layout !== 'store' && layout !== 'independent') {
    throw new Error(`--shard-layout must be store or independent, got ${JSON.stringify(layout)}`);
  }
  const counts = (args['shard-counts'] ?? (smoke ? '1,2' : '1,2,4'))
    .split(',')
    .map((n) => positive('shard-counts', n.trim(), 1));
  const results = await runShardBench({
    smoke,
    counts,
    cpuCores: positive('shard-cpu', args['shard-cpu'], smoke ? 0.5 : 0.1, false),
    jobsPerShard: positive('shard-jobs', args['shard-jobs'], smoke ? 500 : 60_000),
    procs: positive('shard-procs', args['shard-procs'], 1),
    concurrency,
    rounds: positive('rounds', args.rounds, smoke ? 1 : 3),
    spikeJobs:
      args['shard-spike-jobs'] === '0'
        ? 0
        : positive('shard-spike-jobs', args['shard-spike-jobs'], smoke ? 1_000 : 100_000),
    spikeLeadMs: smoke ? 3_000 : 20_000,
    layout,
    capMs: smoke ? 30_000 : 180_000,
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    log,
  });
  const written = writeShardReport(results, outDir);
  log(`wrote ${written.join(', ')}`);
  for (const row of summarize(results)) {
    const target = SHARD_TARGETS[row.shards];
    log(
      `shards ${row.shards}: ${Math.round(row.jobsPerSec)} jobs/s, ${Math.round(row.ratio * 100) / 100}x one shard${target ? ` (target ${target}x: ${row.ratio >= target ? 'met' : 'MISSED'})` : ''}, ${row.okRounds}/${row.rounds} rounds ok`,
    );
  }
  const broken = results.drains.filter((drain) => drain.status !== 'ok');
  if (results.spike && results.spike.status !== 'ok')
    log(`NOT OK: spike: ${results.spike.status}: ${results.spike.problems.join('; ')}`);
  for (const drain of broken)
    log(`NOT OK: drain ${drain.shards} shard(s) r${drain.round}: ${drain.status}: ${drain.problems.join('; ')}`);
  if (broken.some((drain) => drain.status === 'failed') || results.spike?.status === 'failed') process.exitCode = 1;
  if (smoke && (broken.length > 0 || (results.spike && results.spike.status !== 'ok'))) process.exitCode = 1;
}

/** graphile-worker's releases: the repository's, and with --peers-latest 0.18 on Node 24. */
function isGraphileWorker(c: Contender): boolean {
  return c.module.name === 'graphile-worker' || c.module.name === 'graphile-worker-latest';
}

/** The systems a backlog drain compares: Docket, the raw-SQL reference and graphile-worker. */
function drainsABacklog(c: Contender): boolean {
  return c.module.name.startsWith('docket') || c.module.name === 'raw-sql' || isGraphileWorker(c);
}

/**
 * The largest backlog whose workers also drain a second one (workloads.ts secondDrain): a second
 * million-job backlog would double the longest workload's time.
 */
const SECOND_DRAIN_MAX_JOBS = 100_000;

/**
 * Drains of a backlog queued before any worker runs, at every size users hit (the issue's 20k,
 * 100k and 1M), Docket default and tuned beside graphile-worker default and tuned and the raw-SQL
 * reference. The largest size runs Docket and the reference only: seeding a million rows through
 * each peer's API and draining them at its default speed would take the whole time budget. Up to
 * {@link SECOND_DRAIN_MAX_JOBS}, the same worker process then drains a second backlog of the
 * size (its code compiled by then, as a long-running worker's is), reported beside the first.
 */
async function backlogDrains(all: readonly Contender[], results: RunRecord[]): Promise<void> {
  const largest = Math.max(...SIZES.backlogJobs);
  for (const n of SIZES.backlogJobs) {
    const chosen = all.filter(
      (c) =>
        // graphile-worker not at the largest size, where its default drain takes far longer than
        // the cap allows.
        drainsABacklog(c) && (!isGraphileWorker(c) || n < largest || SIZES.backlogJobs.length === 1),
    );
    await alternate(
      chosen,
      'backlog',
      { jobs: n, procs: 1 },
      results,
      (c, round) =>
        drainRun(c, n, 1, {
          round,
          capMs: SIZES.backlogCapMs,
          workload: 'backlog',
          insertChunk: 10_000,
          ...(n <= SECOND_DRAIN_MAX_JOBS
            ? { secondDrain: { databaseNow: () => databaseNow(databaseUrl('postgres')) } }
            : {}),
        }),
      drainSkip(results, SIZES.backlogCapMs, n, 1, 'backlog'),
    );
  }
}

/**
 * A backlog spread over many job kinds (`--kinds`, default 100 and 1,000; decision 0026), each
 * kind handled by the one worker process, as a service with a handler per job type runs: Docket's
 * kinds (PostgreSQL and SQLite), graphile-worker's task identifiers, BullMQ's job names
 * ({@link KINDS_SYSTEMS}). pg-boss
 * routes job types by queue, one polling loop each, and the raw-SQL reference claims one kind;
 * neither runs it. Smoke mode runs Docket's default variants only (the kinds' code path, not a
 * tuning) beside the peers' one smoke variant.
 */
async function kindsDrains(all: readonly Contender[], results: RunRecord[]): Promise<void> {
  const { jobs, counts } = SIZES.kinds;
  for (const kinds of counts) {
    await alternate(
      all.filter(
        (c) =>
          KINDS_SYSTEMS.includes(c.module.name) &&
          (!smoke || c.variant === 'default' || !c.module.name.startsWith('docket')),
      ),
      'kinds',
      { jobs, procs: 1, kinds },
      results,
      (c, round) =>
        drainRun(c, jobs, 1, { round, capMs: SIZES.backlogCapMs, workload: 'kinds', insertChunk: 10_000, kinds }),
    );
  }
}

async function main(): Promise<void> {
  if (args.shards) return shardMain();
  const stale = await dropAllScratchDatabases();
  if (stale.length > 0) log(`dropped stale scratch databases: ${stale.join(', ')}`);
  const unavailable = new Map<string, string>();
  const requested = args.systems
    ? (args.systems.split(',') as SystemName[])
    : (['docket', 'docket-lean', ...PEERS] as SystemName[]);
  // --peers-latest: each requested peer's latest release on Node 24 beside its repository release.
  if (args['peers-latest']) {
    for (const system of [...requested]) {
      const latest = `${system}-latest`;
      if (isLatestSystem(latest) && !requested.includes(latest)) requested.push(latest);
    }
  }
  for (const system of requested)
    if (!SYSTEM_NAMES.includes(system)) throw new Error(`unknown system ${system}; known: ${SYSTEM_NAMES.join(', ')}`);
  const contenders = await contendersFor(requested, unavailable);
  const docket = contenders.filter((c) => c.module.name === 'docket');
  // Docket on SQLite (its default configuration), and the baseline checkout on SQLite beside it
  // when docket-baseline is requested too.
  const sqliteSystems: SystemName[] = requested.includes('docket')
    ? ['docket-sqlite', ...(requested.includes('docket-baseline') ? (['docket-sqlite-baseline'] as const) : [])]
    : [];
  const sqliteContenders = (await contendersFor(sqliteSystems, unavailable)).filter((c) => c.variant === 'default');
  // The raw-SQL reference belongs to the limit, the drains of a backlog (queued first, or backfilled
  // into a running worker) and the single submits (as a submit path without group commit): it joins
  // those only, since its store side is Docket's and every other workload would measure Docket again.
  const [reference] =
    (only.has('limit') || only.has('backlog') || only.has('backfill') || only.has('single-submit')) &&
    !requested.includes('raw-sql')
      ? await contendersFor(['raw-sql'], unavailable)
      : [];
  const drainContenders = reference ? [...contenders, reference] : contenders;
  for (const [system, reason] of unavailable) log(`${system} unavailable: ${reason}`);
  log(
    `contenders: ${contenders.map((c) => c.label).join(', ')}; rounds ${rounds}; concurrency ${concurrency}; out ${outDir}`,
  );

  const results: RunRecord[] = [];
  const bench: BenchResults = {
    mode: smoke ? 'smoke' : 'full',
    startedAt: new Date().toISOString(),
    finishedAt: '',
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    machine: await machineInfo(),
    options: { rounds, concurrency, maxMinutes, workloads: [...only], sizes: SIZES },
    configs: [...drainContenders, ...sqliteContenders].map((c) => ({
      label: c.label,
      system: c.module.name,
      variant: c.variant,
      config: c.module.describe(c.variant, concurrency),
    })),
    unavailable: Object.fromEntries(unavailable),
    runs: results,
    pgbench: [],
    explain: [],
    profiles: [],
    waits: {},
  };

  try {
    if (only.has('drain')) {
      for (const n of SIZES.drainJobs) {
        for (const procs of SIZES.drainProcs) {
          await alternate(
            drainContenders,
            'drain',
            { jobs: n, procs },
            results,
            (c, round) => drainRun(c, n, procs, { round, capMs: SIZES.drainCapMs }),
            drainSkip(results, SIZES.drainCapMs, n, procs),
          );
        }
      }
    }
    if (only.has('limit') && !only.has('drain') && reference) {
      // The reference drain without the drain workload: Docket tuned beside it, at the first size.
      const pair = [...docket.filter((c) => c.variant === 'tuned'), reference];
      const n = SIZES.drainJobs[0]!;
      await alternate(pair, 'drain', { jobs: n, procs: 1 }, results, (c, round) =>
        drainRun(c, n, 1, { round, capMs: SIZES.drainCapMs }),
      );
    }
    if (only.has('backlog')) {
      await backlogDrains(drainContenders, results);
    }
    if (only.has('backfill')) {
      const { jobs, warm } = SIZES.backfill;
      // --backfill-analyze off: no ANALYZE between the warm-up's halves (the control run).
      const analyzeFlag = args['backfill-analyze'] ?? 'on';
      if (analyzeFlag !== 'on' && analyzeFlag !== 'off')
        throw new Error(`--backfill-analyze must be on or off, got ${JSON.stringify(analyzeFlag)}`);
      const analyze = analyzeFlag === 'on';
      await alternate(
        drainContenders.filter(drainsABacklog),
        'backfill',
        { jobs, warm, analyzed: analyze ? 'yes' : 'no' },
        results,
        (c, round) => backfillRun(c, jobs, warm, { round, capMs: SIZES.backlogCapMs, insertChunk: 10_000, analyze }),
      );
    }
    if (only.has('kinds')) {
      // Docket on SQLite too (the embedded default, which a service with many job kinds starts on).
      await kindsDrains([...drainContenders, ...sqliteContenders], results);
    }
    if (only.has('outage')) {
      // Docket only: its drivers alone can make a job's first attempt throw (OUTAGE_SYSTEMS).
      const n = SIZES.outageJobs;
      await alternate(
        contenders.filter((c) => OUTAGE_SYSTEMS.includes(c.module.name)),
        'outage',
        { jobs: n, procs: 1 },
        results,
        (c, round) => outageRun(c, n, { round, capMs: SIZES.backlogCapMs, insertChunk: 10_000 }),
      );
    }
    if (only.has('stream')) {
      for (const rate of SIZES.streamRates) {
        await alternate(
          contenders,
          'stream',
          { ratePerSec: rate, durationMs: SIZES.streamMs, procs: 1 },
          results,
          (c, round) => streamRun(c, rate, SIZES.streamMs, 1, { round, capMs: SIZES.streamMs }),
        );
      }
    }
    if (only.has('spike')) {
      await alternate(
        contenders,
        'spike',
        { jobs: SIZES.spikeJobs, leadMs: SIZES.spikeLeadMs, procs: 1, spikes: SIZES.spikesPerWorker },
        results,
        (c, round) =>
          spikeRun(c, SIZES.spikeJobs, SIZES.spikeLeadMs, 1, {
            round,
            spikes: SIZES.spikesPerWorker,
            capMs: SIZES.spikeCapMs,
            databaseNow: () => databaseNow(databaseUrl('postgres')),
          }),
      );
    }
    if (only.has('schedule-spike')) {
      // Docket only: one recurring schedule per job (SCHEDULE_SYSTEMS).
      const { jobs, leadMs } = SIZES.scheduleSpike;
      await alternate(
        contenders.filter((c) => SCHEDULE_SYSTEMS.includes(c.module.name)),
        'schedule-spike',
        { jobs, leadMs, procs: 1, spikes: SIZES.spikesPerWorker },
        results,
        (c, round) =>
          spikeRun(c, jobs, leadMs, 1, {
            round,
            spikes: SIZES.spikesPerWorker,
            capMs: SIZES.spikeCapMs,
            databaseNow: () => databaseNow(databaseUrl('postgres')),
            viaSchedules: true,
          }),
      );
    }
    // Submits are the same code whatever the retention: docket-lean measures only what runs jobs.
    const submitters = contenders.filter((c) => c.module.name !== 'docket-lean');
    if (only.has('submit')) {
      for (const { jobs, batch } of SIZES.submit) {
        await alternate(submitters, 'submit', { jobs, batchSize: batch }, results, (c, round) =>
          submitRun(c, jobs, batch, { round, capMs: 0 }),
        );
      }
    }
    // Users submit one job per request with default settings: each system's default variant,
    // beside the raw-SQL reference (one INSERT with its NOTIFY per call, a worker claiming on
    // each wake-up: a submit path without group commit).
    const defaults = [
      ...submitters.filter((c) => c.variant === 'default'),
      ...drainContenders.filter((c) => c.module.name === 'raw-sql'),
    ];
    if (only.has('single-submit')) {
      const { capacityJobs, inFlight, latencyRate, latencyMs } = SIZES.singleSubmit;
      // Each capacity run is followed by the same with a fresh caller's key per call (each
      // system's own deduplication option), so the two meet the machine in the same state. The
      // raw-SQL reference has no idempotency, so no keyed run.
      await alternate(
        defaults,
        'single-submit',
        [
          { jobs: capacityJobs, inFlight, mode: 'capacity' },
          { jobs: capacityJobs, inFlight, mode: 'capacity-keyed' },
        ],
        results,
        async (c, round) => {
          const plain = await singleSubmitCapacityRun(c, capacityJobs, inFlight, { round, capMs: 0 });
          if (c.module.name === 'raw-sql') return [plain];
          return [plain, await singleSubmitCapacityRun(c, capacityJobs, inFlight, { round, capMs: 0, keyed: true })];
        },
      );
      await alternate(
        defaults,
        'single-submit',
        {
          ratePerSec: latencyRate,
          durationMs: latencyMs,
          inFlight,
          jobs: (latencyRate * latencyMs) / 1000,
          mode: 'latency',
        },
        results,
        (c, round) => singleSubmitLatencyRun(c, latencyRate, latencyMs, inFlight, { round, capMs: latencyMs }),
      );
    }
    if (only.has('delayed')) {
      // The single-submit latency run's contenders (each system's default variant), each job due
      // delayMs after its call; only systems whose single submit takes a run time (DELAYED_SYSTEMS).
      const { rate, durationMs, delayMs, inFlight } = SIZES.delayed;
      const refused = defaults.filter((c) => !DELAYED_SYSTEMS.includes(c.module.name));
      for (const c of refused) log(`delayed: ${c.label} takes no run time on a single submit; skipped`);
      await alternate(
        defaults.filter((c) => DELAYED_SYSTEMS.includes(c.module.name)),
        'delayed',
        { ratePerSec: rate, durationMs, delayMs, inFlight, jobs: (rate * durationMs) / 1000 },
        results,
        (c, round) => delayedRun(c, rate, durationMs, delayMs, inFlight, { round, capMs: durationMs }),
      );
    }
    if (only.has('neighbours')) {
      // The single-submit latency run's contenders (each system's default variant), and Docket on
      // SQLite beside Docket (its neighbours: other processes on the same file, which another
      // process's submit wakes), each beside idle workers of its own system on another queue;
      // only systems whose driver makes such a worker (NEIGHBOUR_SYSTEMS).
      const { count, rate, durationMs, inFlight, statsFlushMs } = SIZES.neighbours;
      const candidates = [...defaults];
      for (const c of sqliteContenders) if (!candidates.some((other) => other.label === c.label)) candidates.push(c);
      for (const c of candidates.filter((c) => !NEIGHBOUR_SYSTEMS.includes(c.module.name)))
        log(`neighbours: ${c.label} has no queue but its own for a neighbour to claim; skipped`);
      await alternate(
        candidates.filter((c) => NEIGHBOUR_SYSTEMS.includes(c.module.name)),
        'neighbours',
        { ratePerSec: rate, durationMs, inFlight, jobs: (rate * durationMs) / 1000, neighbours: count, statsFlushMs },
        results,
        (c, round) =>
          singleSubmitLatencyRun(c, rate, durationMs, inFlight, {
            round,
            capMs: durationMs,
            neighbours: { count, statsFlushMs },
          }),
      );
    }
    // The Docket stores `docket serve` can open, one each (serve has no worker variants to compare).
    const served = new Map<string, Contender>();
    for (const c of [...contenders, ...sqliteContenders])
      if (c.variant === 'default' && SERVE_SYSTEMS.includes(c.module.name) && !served.has(c.module.name))
        served.set(c.module.name, c);
    if (only.has('http-submit')) {
      // `docket serve` with its defaults on each Docket store of the run, the baseline checkout's
      // beside this one's, and the bare node:http floor every row is divided by. Plain, then keyed, per server.
      const { jobs, inFlight } = SIZES.httpSubmit;
      const logDir = join(scratchDir, 'http-submit');
      mkdirSync(logDir, { recursive: true });
      if (served.size === 0) log('http-submit: no Docket system in --systems to serve; skipped');
      else
        await alternate(
          [...[...served.values()].map(docketServeTarget), httpFloorTarget()],
          'http-submit',
          [
            { jobs, inFlight, mode: 'plain' },
            { jobs, inFlight, mode: 'keyed' },
          ],
          results,
          async (target, round) => [
            await httpSubmitRun(target, jobs, inFlight, { round, capMs: 0, logDir }),
            await httpSubmitRun(target, jobs, inFlight, { round, capMs: 0, logDir, keyed: true }),
          ],
          (target) => target.unavailable,
        );
    }
    if (only.has('remote-workers')) {
      // Remote HTTP workers of `docket serve` (its defaults; each checkout's own CLI) on each
      // served store: a drain, a stream and a delayed stream per run, one record each.
      const logDir = join(scratchDir, 'remote-workers');
      mkdirSync(logDir, { recursive: true });
      if (served.size === 0) log('remote-workers: no Docket system in --systems to serve; skipped');
      else
        await alternate(
          [...served.values()].map(remoteServeTarget),
          'remote-workers',
          remoteWorkersParams(SIZES.remoteWorkers),
          results,
          (target, round) => remoteWorkersRun(target, SIZES.remoteWorkers, { round, capMs: 0, logDir }),
          (target) => target.unavailable,
        );
    }
    if (only.has('large')) {
      // Docket and the strongest PostgreSQL peer: inserting a million rows through each API costs
      // minutes. Smoke mode keeps Docket alone (or the first contender) to stay under a minute.
      const large = contenders.filter(
        (c) => c.module.name === 'docket' || (!smoke && c.module.name === 'graphile-worker' && c.variant === 'tuned'),
      );
      if (large.length === 0 && smoke && contenders[0]) large.push(contenders[0]);
      for (const contender of large) {
        if (hostNowMs() > deadlineMs) break;
        await contender.module.reset(contender.config);
        const store = await contender.module.openStore(contender.config);
        const fillMs = await insertFutureFiller(store, SIZES.fillerJobs);
        await store.close();
        log(`large: ${contender.label} holds ${SIZES.fillerJobs} future rows (inserted in ${Math.round(fillMs)} ms)`);
        await withAdmin((client) => client.query('VACUUM ANALYZE'), contender.config.databaseUrl);
        if (contender.module.name === 'docket') bench.explain.push(await explainClaim(contender, smoke ? 200 : 2_000));
        await alternate(
          [contender],
          'large-drain',
          { jobs: SIZES.largeDrainJobs, procs: 1, filler: SIZES.fillerJobs },
          results,
          (c, round) =>
            drainRun(c, SIZES.largeDrainJobs, 1, {
              round,
              capMs: SIZES.drainCapMs,
              fresh: false,
              workload: 'large-drain',
            }),
        );
        await alternate(
          [contender],
          'large-stream',
          { ratePerSec: SIZES.largeStreamRate, durationMs: SIZES.streamMs, procs: 1, filler: SIZES.fillerJobs },
          results,
          (c, round) =>
            streamRun(c, SIZES.largeStreamRate, SIZES.streamMs, 1, {
              round,
              capMs: SIZES.streamMs,
              fresh: false,
              workload: 'large-stream',
            }),
        );
      }
    }
    if (only.has('limit') && hostNowMs() < deadlineMs) {
      log('limit: pgbench');
      bench.pgbench = await pgbenchLimit(SIZES.pgbench);
      for (const result of bench.pgbench)
        log(`limit ${result.script}: ${Math.round(result.lifecyclesPerSec)} lifecycles/s`);
    }
    if (only.has('dashboard') && hostNowMs() < deadlineMs) {
      // The dashboard's API calls on 1M pending + 1M finished rows (a tiny table in smoke mode).
      const rows = smoke ? 1_000 : 1_000_000;
      log(`dashboard: every page's API calls over ${rows.toLocaleString('en')} + ${rows.toLocaleString('en')} rows`);
      bench.dashboard = await runDashboardBench({ pending: rows, finished: rows, stores: ['postgres', 'sqlite'], log });
    }
    if (only.has('sqlite') && sqliteContenders.length > 0) {
      for (const n of SIZES.drainJobs) {
        for (const procs of SIZES.drainProcs) {
          await alternate(sqliteContenders, 'drain', { jobs: n, procs }, results, (c, round) =>
            drainRun(c, n, procs, { round, capMs: SIZES.drainCapMs }),
          );
        }
      }
      for (const rate of SIZES.streamRates) {
        await alternate(
          sqliteContenders,
          'stream',
          { ratePerSec: rate, durationMs: SIZES.streamMs, procs: 1 },
          results,
          (c, round) => streamRun(c, rate, SIZES.streamMs, 1, { round, capMs: SIZES.streamMs }),
        );
      }
    }
    // Memory and the profile are measured on one Docket configuration: the tuned one when present.
    const judged = docket.find((c) => c.label.endsWith('(tuned)')) ?? docket[0];
    if (only.has('memory') && SIZES.memoryMs > 0 && judged) {
      for (const contender of [judged]) {
        log(`memory: ${contender.label} streams 1,000 jobs/s for ${SIZES.memoryMs / 60_000} min`);
        results.push(
          await streamRun(contender, 1_000, SIZES.memoryMs, 1, { round: 1, capMs: 30_000, workload: 'memory' }),
        );
      }
    }
    if (!args['no-profile'] && only.has('drain') && judged && hostNowMs() < deadlineMs) {
      const profileDir = join(scratchDir, 'profiles');
      mkdirSync(profileDir, { recursive: true });
      const n = smoke ? 300 : 20_000;
      log(`profile: ${judged.label} drain of ${n} jobs with --cpu-prof and pg_stat_activity sampling`);
      const contender = judged;
      const run = drainRun(contender, n, 1, {
        round: 0,
        capMs: SIZES.drainCapMs,
        cpuProfileDir: profileDir,
        workload: 'profile',
      });
      bench.waits = await sampleWaits(databaseNameOf(contender.config.databaseUrl), run);
      const profiled = await run;
      bench.profileRun = { jobsPerSec: profiled.metrics.jobsPerSec ?? Number.NaN, status: profiled.status };
      bench.profiles = summarizeProfiles(profileDir).map((summary) => ({
        ...summary,
        file: summary.file.replace(scratchDir, '$TMP'),
      }));
    }
  } finally {
    for (const contender of [...drainContenders, ...sqliteContenders]) {
      await contender.module
        .destroy(contender.config)
        .catch((error: Error) => log(`cleanup ${contender.label}: ${error.message}`));
    }
    rmSync(scratchDir, { recursive: true, force: true });
    if (args['peers-latest']) (await import('./peers-latest/remote-system.js')).closeRemoteHosts();
  }

  bench.finishedAt = new Date().toISOString();
  const written = writeReport(bench, outDir);
  log(`wrote ${written.join(', ')}`);
  const broken = results.filter(
    (run) => run.status === 'failed' || (smoke && (run.status === 'error' || run.status === 'timeout')),
  );
  if (broken.length > 0) {
    for (const run of broken)
      log(`NOT OK: ${run.workload} ${run.label} r${run.round}: ${run.status}: ${run.problems.join('; ')}`);
    process.exitCode = 1;
  }
  if (smoke && unavailable.size > 0) process.exitCode = 1;
}

/** `--soak`: the soak alone (it loads the machine for its whole length; see soak.ts). */
async function soakMain(): Promise<void> {
  const soakOnly = [
    'minutes',
    'rate',
    'retention-ms',
    'prune-interval-ms',
    'sample-seconds',
    'vacuum-seconds',
  ] as const;
  if (!args.soak) {
    const stray = soakOnly.filter((name) => args[name] !== undefined);
    if (stray.length > 0) throw new Error(`${stray.map((n) => `--${n}`).join(', ')} only apply with --soak`);
    return main();
  }
  const options = parseSoakOptions(args, concurrency);
  const out = args.out ?? BENCH_DIR;
  const stale = await dropAllScratchDatabases();
  if (stale.length > 0) log(`dropped stale scratch databases: ${stale.join(', ')}`);
  log(`soak: ${JSON.stringify(options)}; out ${out}`);
  try {
    const result = await runSoak(options, `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(), log);
    console.log(soakMarkdown(result));
    log(`wrote ${writeSoakReport(result, out).join(', ')}`);
    if (result.problems.length > 0) process.exitCode = 1;
  } finally {
    rmSync(scratchDir, { recursive: true, force: true });
  }
}

soakMain().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

/**
 * The command line, or a one-line refusal naming what was wrong (an unknown option, a missing
 * value) and pointing at --help, instead of parseArgs' stack trace.
 */
function parseCommandLine<const T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs<T>(config);
  } catch (error) {
    return refuse((error as Error).message);
  }
}

function refuse(message: string): never {
  console.error(`bench/run.ts: ${message}\nRun it with --help for the workloads and options.`);
  process.exit(2);
}

/** A count or duration option: a positive number, or a refusal naming the option. */
function positiveNumber(option: string, value: string | number): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0)
    refuse(`--${option} must be a positive number, got ${JSON.stringify(value)}`);
  return parsed;
}

/** The usage lines of this file's leading comment, so --help and the comment cannot disagree. */
function usage(): string {
  const source = readFileSync(fileURLToPath(import.meta.url), 'utf8');
  const header = source.slice(source.indexOf('/**') + 3, source.indexOf('*/'));
  return header
    .split('\n')
    .map((line) => line.replace(/^ \* ?/, ''))
    .join('\n')
    .trim();
}
