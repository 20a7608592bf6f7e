/**
 * `npm run bench -- --shards`: does adding PostgreSQL clusters add throughput? Docket's sharded
 * store drains a backlog on 1, 2 and 4 throwaway clusters, each capped at the same CPU share with
 * the cgroup v1 `cpu` controller (bench/capped-clusters.ts), the shard counts alternating over
 * several rounds; then 100,000 jobs due at one instant across 4 shards.
 *
 *   npm run bench -- --shards                                 the full run; RESULTS.md section + results/shards.json
 *   npm run bench -- --shards --smoke                         1 and 2 tiny shards, results to a temp dir (CI)
 *   npm run bench -- --shards --shard-cpu 0.25 --shard-jobs 40000 --rounds 3 --shard-procs 2
 *   npm run bench -- --shards --shard-layout independent      one ordinary Docket per cluster (the reference)
 *
 * Fair to every shard count: the backlog grows with the shard count (jobs per shard fixed), so
 * every run lasts about as long; the workers are not capped and there are enough of them that
 * they are not the limit (each run reports the CPU the workers and each cluster used, and how
 * often each cluster's quota ran out, so a reader can see which one was). Every run checks that
 * each job ran exactly once.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import {
  type CapMeasurement,
  type CappedCluster,
  CpuGroup,
  destroyCappedClusters,
  measureCpuCap,
  processCpuMs,
  startCappedClusters,
} from './capped-clusters.js';
import { databaseNow, hostNowMs } from './pg-admin.js';
import { SHARD_SECTION_BEGIN, SHARD_SECTION_END, withShardSection } from './shard-section.js';
import { median, round } from './stats.js';
import { SHARD_DATABASE } from './systems/docket-sharded.js';
import { loadSystem, type SystemConfig, type SystemModule } from './systems/system.js';
import { StartRecorder, sleep, WorkerProcess } from './worker-process.js';
import { benchJobs, type Contender, type RunRecord, spikeRun } from './workloads.js';

/** The benchmark's ports: 5481-5484, never used by anything else here. */
export const SHARD_BENCH_PORTS = [5481, 5482, 5483, 5484] as const;

/** The uncapped group of the worker processes (same weight as the clusters' groups, no quota). */
const WORKER_GROUP = 'docket-shard-workers';

/** Settings of one shard benchmark. */
export interface ShardBenchOptions {
  smoke: boolean;
  /** Shard counts to compare, e.g. [1, 2, 4]; the first is the baseline of the ratios. */
  counts: number[];
  /** Cores each cluster may use. */
  cpuCores: number;
  /** Backlog per shard: a run on N shards drains N times this. */
  jobsPerShard: number;
  /** Uncapped worker processes, each claiming from every shard. */
  procs: number;
  concurrency: number;
  rounds: number;
  /** The spike: this many jobs due at one instant across the largest shard count (0: none). */
  spikeJobs: number;
  spikeLeadMs: number;
  layout: 'store' | 'independent';
  /** Longest wait for a drain, ms. */
  capMs: number;
  command: string;
  log: (line: string) => void;
}

/** One drain of the shard benchmark. */
export interface ShardDrainRecord {
  shards: number;
  round: number;
  status: 'ok' | 'failed' | 'timeout' | 'error';
  problems: string[];
  jobs: number;
  insertSeconds: number;
  seconds: number;
  jobsPerSec: number;
  /** Cores the worker processes used over the drain (their CPU time ÷ wall time), summed. */
  workerCores: number;
  /** The busiest worker process's cores. */
  busiestWorkerCores: number;
  /**
   * The largest share of the drain a worker's main thread spent runnable but waiting for a core
   * (/proc/<pid>/schedstat run_delay ÷ wall time): near 0 means the workers got the CPU they asked
   * for, so a worker that used little CPU was waiting on its shards, not starved.
   */
  workerRunQueueShare: number;
  /** Per cluster: cores it used over the drain (cpuacct), and the share of CFS periods it was throttled in. */
  clusterCores: number[];
  throttledShare: number[];
  /**
   * CPU the clusters spent per job drained, µs (their CPU time over the drain ÷ jobs): flat across
   * shard counts when a shard does the same work per job however many there are.
   */
  clusterUsPerJob: number;
  /**
   * From pg_stat_statements on every shard over the drain (workers' statements only, summed over
   * shards): claim and completion statements and the rows they touched, and all statements per
   * job drained. Rows per call is the batch size a shard actually saw.
   */
  statements: { claimCalls: number; claimRows: number; completeCalls: number; completeRows: number; perJob: number };
  /** Jobs each shard held (by its own count at the end), to show the spread of keyless submits. */
  jobsPerShardSeen: number[];
  /**
   * What Docket's sessions on the shards were doing, sampled every 100 ms during the drain:
   * `active:<wait event or CPU>` or `idle` (waiting for its client: the worker side is the
   * limit), summed over shards.
   */
  sessionSamples: Record<string, number>;
}

/** What `--shards` writes to results/shards.json. */
export interface ShardBenchResults {
  mode: 'smoke' | 'full';
  command: string;
  startedAt: string;
  finishedAt: string;
  machine: { cpu: string; node: string };
  options: Omit<ShardBenchOptions, 'log' | 'command'>;
  capCheck: CapMeasurement[];
  drains: ShardDrainRecord[];
  spike: RunRecord | null;
}

/** Starts the clusters, runs every drain and the spike, and returns the results; cleans up always. */
export async function runShardBench(options: ShardBenchOptions): Promise<ShardBenchResults> {
  const log = options.log;
  const maxShards = Math.max(...options.counts);
  if (maxShards > SHARD_BENCH_PORTS.length) throw new Error(`at most ${SHARD_BENCH_PORTS.length} shards`);
  const startedAt = new Date().toISOString();
  const clusters = await startCappedClusters({
    ports: SHARD_BENCH_PORTS.slice(0, maxShards),
    cpuCores: options.cpuCores,
    settings: STATEMENT_SETTINGS,
    log,
  });
  const results: ShardBenchResults = {
    mode: options.smoke ? 'smoke' : 'full',
    command: options.command,
    startedAt,
    finishedAt: '',
    machine: { cpu: `${cpus()[0]?.model ?? 'unknown'} × ${cpus().length}`, node: process.version },
    options: {
      smoke: options.smoke,
      counts: options.counts,
      cpuCores: options.cpuCores,
      jobsPerShard: options.jobsPerShard,
      procs: options.procs,
      concurrency: options.concurrency,
      rounds: options.rounds,
      spikeJobs: options.spikeJobs,
      spikeLeadMs: options.spikeLeadMs,
      layout: options.layout,
      capMs: options.capMs,
    },
    capCheck: [],
    drains: [],
    spike: null,
  };
  try {
    // The cap, checked on every cluster at once: one spinning backend each.
    results.capCheck = await Promise.all(
      clusters.map((cluster) => measureCpuCap(cluster, options.smoke ? 1_000 : 3_000)),
    );
    for (const cap of results.capCheck) {
      log(
        `cap check port ${cap.port}: ${Math.round(cap.cpuMs)} ms CPU in ${Math.round(cap.wallMs)} ms wall = ${round(cap.cpuShare)} core (cap ${cap.cpuCores}), throttled in ${cap.throttledPeriods} periods`,
      );
    }
    const system = await loadSystem('docket-sharded');
    for (let r = 1; r <= options.rounds; r += 1) {
      // Rotated each round, so no shard count always runs first (on a warmer or colder machine).
      const shift = (r - 1) % options.counts.length;
      const order = [...options.counts.slice(shift), ...options.counts.slice(0, shift)];
      for (const shards of order) {
        const drain = await shardDrain(system, clusters.slice(0, shards), r, options);
        results.drains.push(drain);
        log(
          `drain ${shards} shard(s) r${r}: ${drain.status} ${Math.round(drain.jobsPerSec)} jobs/s (${drain.jobs} jobs in ${round(drain.seconds)} s; ` +
            `workers ${round(drain.workerCores)} cores, busiest ${round(drain.busiestWorkerCores)}, run queue ${Math.round(drain.workerRunQueueShare * 100)}%; clusters ${drain.clusterCores.map(round).join('/')} cores, ` +
            `throttled ${drain.throttledShare.map((s) => `${Math.round(s * 100)}%`).join('/')}, ${round(drain.clusterUsPerJob)} µs CPU/job; claims ${drain.statements.claimCalls} × ${round(drain.statements.claimRows / Math.max(1, drain.statements.claimCalls))} rows, completions ${drain.statements.completeCalls} × ${round(drain.statements.completeRows / Math.max(1, drain.statements.completeCalls))} rows, ${round(drain.statements.perJob)} statements/job; spread ${drain.jobsPerShardSeen.join('/')}; sessions ${JSON.stringify(drain.sessionSamples)}) ${drain.problems.join('; ')}`,
        );
      }
    }
    if (options.spikeJobs > 0) {
      const config = configFor(clusters, options);
      const contender: Contender = { module: system, variant: 'tuned', config, label: `docket (${maxShards} shards)` };
      log(`spike: ${options.spikeJobs} jobs due at one instant across ${maxShards} shards`);
      results.spike = await spikeRun(contender, options.spikeJobs, options.spikeLeadMs, options.procs, {
        round: 1,
        capMs: options.capMs,
        databaseNow: () => databaseNow(clusters[0]!.url()),
      });
      const m = results.spike.metrics;
      log(
        `spike: ${results.spike.status} last start ${Math.round(m.lastStartAfterDueMs ?? Number.NaN)} ms after the instant, ` +
          `p99 ${Math.round(m.latenessP99Ms ?? Number.NaN)} ms, ${m.early ?? '?'} early ${results.spike.problems.join('; ')}`,
      );
    }
  } finally {
    await destroyCappedClusters(clusters);
  }
  results.finishedAt = new Date().toISOString();
  return results;
}

function configFor(clusters: readonly CappedCluster[], options: ShardBenchOptions): SystemConfig {
  const shards = clusters.map((cluster) => cluster.url(SHARD_DATABASE));
  return {
    system: 'docket-sharded',
    variant: 'tuned',
    concurrency: options.concurrency,
    databaseUrl: shards[0]!,
    redisUrl: '',
    redisPrefix: '',
    shards,
    shardLayout: options.layout,
  };
}

/** CPU readings at one instant, to difference over a drain. */
interface Reading {
  atMs: number;
  workerMs: number[];
  workerWaitMs: number[];
  clusterMs: number[];
  periods: number[];
  throttled: number[];
}

function read(workers: readonly WorkerProcess[], clusters: readonly CappedCluster[]): Reading {
  return {
    atMs: hostNowMs(),
    workerMs: workers.map((worker) => {
      try {
        return processCpuMs(worker.pid);
      } catch {
        return Number.NaN;
      }
    }),
    workerWaitMs: workers.map((worker) => runQueueWaitMs(worker.pid)),
    clusterMs: clusters.map((cluster) => cluster.cpuUsedMs()),
    periods: clusters.map((cluster) => cluster.cpuStat().periods),
    throttled: clusters.map((cluster) => cluster.cpuStat().throttledPeriods),
  };
}

/** How long a process's main thread has waited runnable for a core, ms (NaN once it is gone). */
function runQueueWaitMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
  } catch {
    return Number.NaN;
  }
}

/**
 * One drain on the first `clusters.length` clusters: fresh databases, the backlog inserted (one
 * insert in flight per shard, so filling 4 shards takes no longer than filling 1), then the
 * workers started together; throughput is the backlog over the time from the first handler start
 * until no shard holds a due, unfinished job.
 */
async function shardDrain(
  system: SystemModule,
  clusters: readonly CappedCluster[],
  round: number,
  options: ShardBenchOptions,
): Promise<ShardDrainRecord> {
  const jobs = options.jobsPerShard * clusters.length;
  const drain: ShardDrainRecord = {
    shards: clusters.length,
    round,
    status: 'ok',
    problems: [],
    jobs,
    insertSeconds: Number.NaN,
    seconds: Number.NaN,
    jobsPerSec: Number.NaN,
    workerCores: Number.NaN,
    busiestWorkerCores: Number.NaN,
    workerRunQueueShare: Number.NaN,
    clusterCores: [],
    clusterUsPerJob: Number.NaN,
    statements: { claimCalls: 0, claimRows: 0, completeCalls: 0, completeRows: 0, perJob: Number.NaN },
    throttledShare: [],
    jobsPerShardSeen: [],
    sessionSamples: {},
  };
  const fail = (problem: string, status: ShardDrainRecord['status'] = 'failed') => {
    drain.problems.push(problem);
    if (drain.status === 'ok' || (drain.status === 'timeout' && status === 'failed')) drain.status = status;
  };
  const config = configFor(clusters, options);
  let workers: WorkerProcess[] = [];
  const workerGroup = new CpuGroup(WORKER_GROUP);
  await system.reset(config);
  const store = await system.openStore(config);
  try {
    const all = benchJobs(jobs);
    const chunk = 5_000;
    let next = 0;
    const insertStart = hostNowMs();
    await Promise.all(
      clusters.map(async () => {
        for (let k = next; k < jobs; k = next) {
          next += chunk;
          await store.insert(all.slice(k, k + chunk));
        }
      }),
    );
    drain.insertSeconds = (hostNowMs() - insertStart) / 1000;
    await Promise.all(clusters.map((cluster) => resetStatements(cluster)));
    const recorder = new StartRecorder(jobs);
    workers = await WorkerProcess.startMany(options.procs, config, recorder, {
      onForked: (pid) => workerGroup.add(pid),
    });
    const before = read(workers, clusters);
    const sampling = sampleSessions(clusters, drain.sessionSamples);
    const allStarted = await recorder.waitFor(jobs, options.capMs).finally(() => sampling.stop());
    let endMs = hostNowMs();
    if (allStarted) {
      const deadline = hostNowMs() + 15_000;
      let left = await store.remainingDue();
      while (left > 0 && hostNowMs() < deadline) {
        await sleep(5);
        left = await store.remainingDue();
      }
      endMs = hostNowMs();
      if (left > 0) fail(`${left} jobs still unfinished 15 s after every handler ran`);
    } else {
      fail(`only ${recorder.distinct} of ${jobs} jobs started within ${options.capMs} ms`, 'timeout');
    }
    const after = read(workers, clusters);
    const wall = after.atMs - before.atMs;
    const workerCores = after.workerMs.map((ms, k) => (ms - before.workerMs[k]!) / wall);
    drain.workerCores = workerCores.reduce((sum, cores) => sum + cores, 0);
    drain.busiestWorkerCores = Math.max(...workerCores);
    drain.workerRunQueueShare = Math.max(...after.workerWaitMs.map((ms, k) => (ms - before.workerWaitMs[k]!) / wall));
    drain.clusterCores = after.clusterMs.map((ms, k) => (ms - before.clusterMs[k]!) / wall);
    drain.clusterUsPerJob =
      (after.clusterMs.reduce((sum, ms, k) => sum + ms - before.clusterMs[k]!, 0) * 1000) /
      Math.max(1, recorder.distinct);
    drain.throttledShare = after.throttled.map(
      (t, k) => (t - before.throttled[k]!) / Math.max(1, after.periods[k]! - before.periods[k]!),
    );
    const counted = await Promise.all(clusters.map((cluster) => readStatements(cluster)));
    for (const c of counted) {
      drain.statements.claimCalls += c.claimCalls;
      drain.statements.claimRows += c.claimRows;
      drain.statements.completeCalls += c.completeCalls;
      drain.statements.completeRows += c.completeRows;
    }
    drain.statements.perJob = counted.reduce((sum, c) => sum + c.allCalls, 0) / Math.max(1, recorder.distinct);
    await Promise.all(workers.map((worker) => worker.stop()));
    for (const worker of workers) if (worker.error) fail(`worker ${worker.pid}: ${worker.error}`, 'error');
    workers = [];
    if (recorder.duplicates > 0) fail(`${recorder.duplicates} duplicate handler starts (jobs ran twice)`);
    if (recorder.strays > 0) fail(`${recorder.strays} starts of jobs outside this run`);
    drain.seconds = (endMs - recorder.firstStartMs) / 1000;
    drain.jobsPerSec = recorder.distinct / drain.seconds;
    drain.jobsPerShardSeen = await Promise.all(clusters.map((cluster) => jobsOnShard(cluster)));
  } catch (error) {
    fail((error as Error).message, 'error');
  } finally {
    for (const worker of workers) worker.kill();
    await store.close().catch(() => {});
    workerGroup.remove();
  }
  return drain;
}

/**
 * Samples pg_stat_activity of each cluster every 100 ms into `counts` until stopped: for each
 * session of application `docket`, its state and, when active, what it waits on. One connection per
 * cluster, opened before and kept, so the sampling itself costs a query a tenth of a second.
 */
function sampleSessions(
  clusters: readonly CappedCluster[],
  counts: Record<string, number>,
): { stop: () => Promise<void> } {
  let running = true;
  const loops = clusters.map(async (cluster) => {
    const pg = (await import('pg')).default;
    const client = new pg.Client({ connectionString: cluster.url(SHARD_DATABASE) });
    await client.connect();
    try {
      while (running) {
        const { rows } = await client.query<{ what: string; n: string }>(
          `SELECT CASE WHEN state = 'active' THEN 'active:' || coalesce(wait_event_type || ':' || wait_event, 'CPU')
                       ELSE coalesce(state, 'none') END AS what, count(*) AS n
             FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
            GROUP BY 1`,
        );
        for (const row of rows) counts[row.what] = (counts[row.what] ?? 0) + Number(row.n);
        await sleep(100);
      }
    } finally {
      await client.end().catch(() => {});
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(loops).catch(() => {});
    },
  };
}

/** pg_stat_statements, loaded by every shard cluster (see runShardBench), so batch sizes can be read. */
export const STATEMENT_SETTINGS: Readonly<Record<string, string>> = {
  shared_preload_libraries: "'pg_stat_statements'",
  'pg_stat_statements.track': "'top'",
};

async function onShard<T>(cluster: CappedCluster, fn: (client: import('pg').Client) => Promise<T>): Promise<T> {
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: cluster.url(SHARD_DATABASE) });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

function resetStatements(cluster: CappedCluster): Promise<void> {
  return onShard(cluster, async (client) => {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await client.query('SELECT pg_stat_statements_reset()');
  });
}

/**
 * The drain's statements on one shard: the claim is the statement that raises the token
 * (`token = j.token + 1`), a completion the batch that sets `state = 'done'` over `unnest(...)`.
 */
function readStatements(
  cluster: CappedCluster,
): Promise<{ claimCalls: number; claimRows: number; completeCalls: number; completeRows: number; allCalls: number }> {
  return onShard(cluster, async (client) => {
    const { rows } = await client.query<{ query: string; calls: string; rows: string }>(
      `SELECT query, calls, rows FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND query NOT ILIKE '%pg_stat_%'`,
    );
    const sum = (match: (query: string) => boolean, field: 'calls' | 'rows') =>
      rows.filter((row) => match(row.query)).reduce((total, row) => total + Number(row[field]), 0);
    // pg_stat_statements shows constants as $n, so match on the statements' shapes.
    const claim = (query: string) => /token = j\.token \+/.test(query);
    const complete = (query: string) => /SET state = \S+, finished_at/.test(query) && query.includes('unnest(');
    return {
      claimCalls: sum(claim, 'calls'),
      claimRows: sum(claim, 'rows'),
      completeCalls: sum(complete, 'calls'),
      completeRows: sum(complete, 'rows'),
      allCalls: sum(() => true, 'calls'),
    };
  });
}

async function jobsOnShard(cluster: CappedCluster): Promise<number> {
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: cluster.url(SHARD_DATABASE) });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM docket.jobs');
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

/** Median drain rate per shard count over the ok rounds, and each one's ratio to the first count. */
export interface ShardSummaryRow {
  shards: number;
  okRounds: number;
  rounds: number;
  jobsPerSec: number;
  ratio: number;
  workerCores: number;
  clusterCores: number;
  clusterUsPerJob: number;
  throttledShare: number;
}

/** The table's rows: medians of ok rounds; the ratio is to the first shard count's median. */
export function summarize(results: ShardBenchResults): ShardSummaryRow[] {
  const rows = results.options.counts.map((shards) => {
    const runs = results.drains.filter((drain) => drain.shards === shards);
    const ok = runs.filter((drain) => drain.status === 'ok');
    return {
      shards,
      okRounds: ok.length,
      rounds: runs.length,
      jobsPerSec: median(ok.map((drain) => drain.jobsPerSec)),
      ratio: Number.NaN,
      workerCores: median(ok.map((drain) => drain.workerCores)),
      clusterCores: median(ok.map((drain) => median(drain.clusterCores))),
      clusterUsPerJob: median(ok.map((drain) => drain.clusterUsPerJob)),
      throttledShare: median(ok.map((drain) => median(drain.throttledShare))),
    };
  });
  const base = rows[0]?.jobsPerSec ?? Number.NaN;
  for (const row of rows) row.ratio = row.jobsPerSec / base;
  return rows;
}

/** The targets of issue 15, by shard count. */
export const SHARD_TARGETS: Readonly<Record<number, number>> = { 2: 1.8, 4: 3.4 };

function fmt(value: number, digits = 0): string {
  if (!Number.isFinite(value)) return '—';
  return value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

/** The Markdown section (between markers, so the main report keeps it; see report.ts). */
export function shardSection(results: ShardBenchResults): string {
  const rows = summarize(results);
  const o = results.options;
  const lines: string[] = [
    SHARD_SECTION_BEGIN,
    `## Shards: drain throughput on 1, 2 and 4 capped PostgreSQL clusters${results.mode === 'smoke' ? ' (SMOKE: tiny sizes, not a measurement)' : ''}`,
    '',
    `Generated by \`${results.command}\` from ${results.startedAt} to ${results.finishedAt} on ${results.machine.cpu}, Node ${results.machine.node}. Raw data: [results/shards.json](results/shards.json).`,
    '',
    `Each shard is its own throwaway PostgreSQL 15 cluster (initdb, fsync and synchronous_commit on, small-box settings; bench/capped-clusters.ts), ` +
      `its postmaster and every backend in a cgroup v1 \`cpu\` group capped at **${o.cpuCores} core** (cfs_quota_us ${Math.round(o.cpuCores * 100_000)} / cfs_period_us 100000). ` +
      `${o.procs} uncapped worker process(es), each \`docket.worker({ concurrency: ${o.concurrency}, prefetch: 500 })\` on ${o.layout === 'store' ? '`Docket.open({ shards: [url, …] })`' : 'one ordinary Docket per cluster (the independent reference layout)'}, ` +
      `drain a backlog of ${fmt(o.jobsPerShard)} no-op jobs per shard (submitted keyless through the same store). ` +
      `Medians of ${o.rounds} rounds, the shard counts rotating each round; every run checks that each job ran exactly once.`,
    '',
    '**Cap check** (one backend spinning in PL/pgSQL on every cluster at once; CPU time from /proc ÷ wall time):',
    '',
    '| port | CPU ms | wall ms | share of a core | cap | throttled periods |',
    '|---|---|---|---|---|---|',
    ...results.capCheck.map(
      (cap) =>
        `| ${cap.port} | ${fmt(cap.cpuMs)} | ${fmt(cap.wallMs)} | ${fmt(cap.cpuShare, 3)} | ${cap.cpuCores} | ${cap.throttledPeriods} |`,
    ),
    '',
    '| shards | drain jobs/s (median) | × 1 shard | target | rounds ok | workers used (cores) | each cluster used (cores) | periods throttled | cluster CPU per job |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows.map((row) => {
      const target = SHARD_TARGETS[row.shards];
      const verdict =
        target === undefined
          ? ''
          : Number.isFinite(row.ratio) && row.ratio >= target
            ? `≥ ${target}×: met`
            : `≥ ${target}×: **MISSED**`;
      return `| ${row.shards} | ${fmt(row.jobsPerSec)} | ${fmt(row.ratio, 2)}× | ${verdict} | ${row.okRounds}/${row.rounds} | ${fmt(row.workerCores, 2)} | ${fmt(row.clusterCores, 3)} | ${fmt(row.throttledShare * 100)} % | ${fmt(row.clusterUsPerJob, 1)} µs |`;
    }),
    '',
    'Every round:',
    '',
    '| shards | round | status | jobs | insert s | drain s | jobs/s | workers (cores) | busiest worker | worker run-queue wait | clusters (cores) | throttled | CPU per job | claim rows per call | completion rows per call | statements per job | jobs per shard |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...results.drains.map(
      (d) =>
        `| ${d.shards} | ${d.round} | ${d.status}${d.problems.length ? `: ${d.problems.join('; ')}` : ''} | ${fmt(d.jobs)} | ${fmt(d.insertSeconds, 1)} | ${fmt(d.seconds, 1)} | ${fmt(d.jobsPerSec)} | ${fmt(d.workerCores, 2)} | ${fmt(d.busiestWorkerCores, 2)} | ${fmt(d.workerRunQueueShare * 100)} % | ${d.clusterCores.map((c) => fmt(c, 3)).join(' / ')} | ${d.throttledShare.map((s) => `${fmt(s * 100)} %`).join(' / ')} | ${fmt(d.clusterUsPerJob, 1)} µs | ${fmt(d.statements.claimRows / d.statements.claimCalls, 1)} | ${fmt(d.statements.completeRows / d.statements.completeCalls, 1)} | ${fmt(d.statements.perJob, 3)} | ${d.jobsPerShardSeen.map((n) => fmt(n)).join(' / ')} |`,
    ),
    '',
  ];
  const spike = results.spike;
  if (spike) {
    const m = spike.metrics;
    lines.push(
      `**Spike**: ${fmt(Number(spike.params.jobs))} jobs due at one instant across ${Math.max(...o.counts)} shards (inserted ${fmt(Number(spike.params.leadMs))} ms ahead, ${o.procs} worker process(es)): ` +
        `${spike.status}${spike.problems.length ? ` (${spike.problems.join('; ')})` : ''}; first start ${fmt(m.firstStartAfterDueMs ?? Number.NaN)} ms after the instant, ` +
        `p50 ${fmt(m.latenessP50Ms ?? Number.NaN)} ms, p99 ${fmt(m.latenessP99Ms ?? Number.NaN)} ms, last start ${fmt(m.lastStartAfterDueMs ?? Number.NaN)} ms after; ${m.early ?? '—'} early.`,
      '',
    );
  }
  lines.push(SHARD_SECTION_END);
  return lines.join('\n');
}

/** Writes results/shards.json and puts the section into RESULTS.md (replacing an older one). */
export function writeShardReport(results: ShardBenchResults, outDir: string): string[] {
  mkdirSync(join(outDir, 'results'), { recursive: true });
  const jsonPath = join(outDir, 'results', 'shards.json');
  writeFileSync(jsonPath, `${JSON.stringify(results, null, 2)}\n`);
  const mdPath = join(outDir, 'RESULTS.md');
  let md = '';
  try {
    md = readFileSync(mdPath, 'utf8');
  } catch {
    md = '# Docket benchmark results\n';
  }
  writeFileSync(mdPath, withShardSection(md, shardSection(results)));
  return [mdPath, jsonPath];
}
