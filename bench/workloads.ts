/**
 * The benchmark workloads. Each function performs one run of one contender and returns a
 * {@link RunRecord}; the harness (run.ts) decides sizes, rounds and order.
 *
 * Exactly once: every run counts handler starts per job. A duplicate start, a start of a job that
 * is not part of the run, or a job still unfinished after every handler ran fails the run, whatever
 * its speed. A run that does not finish within its time cap is reported as `timeout` with the rate
 * it reached, never as a fast result.
 */
import { randomUUID } from 'node:crypto';
import { analyzeDatabase, databaseNameOf, hostNowMs, waitForNoSessions, xactCommits } from './pg-admin.js';
import { cdfPoints, type Distribution, distribution, histogram } from './stats.js';
import {
  type BenchJob,
  type BenchStore,
  DELAYED_SYSTEMS,
  NEIGHBOUR_SYSTEMS,
  OUTAGE_SYSTEMS,
  SCHEDULE_SYSTEMS,
  type SystemConfig,
  type SystemModule,
  type Variant,
} from './systems/system.js';
import { processCpuMs, type RssSummary, StartRecorder, sleep, WorkerProcess } from './worker-process.js';

/** One system in one configuration, as the workloads see it. */
export interface Contender {
  module: SystemModule;
  variant: Variant;
  config: SystemConfig;
  /** e.g. `graphile-worker (tuned)`. */
  label: string;
}

/**
 * What a run record is of: a contender, or a reference that is no system's driver (the HTTP
 * workload's bare node:http floor).
 */
export interface RunSubject {
  label: string;
  variant: Variant;
  module: { readonly name: string };
}

/** How a run ended. */
export type RunStatus = 'ok' | 'failed' | 'timeout' | 'error' | 'skipped';

/** Per-process memory of a run, in MiB. */
export interface RssRecord {
  startMb: number;
  peakMb: number;
  endMb: number;
}

/** Everything one run measured; the raw JSON holds a list of these. */
export interface RunRecord {
  workload: string;
  system: string;
  variant: Variant;
  label: string;
  round: number;
  params: Record<string, number | string>;
  status: RunStatus;
  /** Why the run failed or what to watch (lost, doubled, stray jobs; timeouts; errors). */
  problems: string[];
  metrics: Record<string, number>;
  rss: RssRecord[];
  /** Latency CDF points (ms), for charts. */
  latencyCdf?: [number, number][];
  /** Spike start-time histogram (10 ms bins from -100 ms). */
  spikeHistogram?: number[];
  /** RSS samples over a long run: [seconds since start, MiB] per process. */
  rssTimeline?: [number, number][][];
  /** The Node version(s) the worker processes ran on. */
  workerNode?: string;
  wallMs: number;
}

/** Knobs shared by every run. */
export interface RunOptions {
  round: number;
  /** Give up waiting for the jobs after this long (the run is then `timeout`). */
  capMs: number;
  cpuProfileDir?: string | undefined;
}

const MIB = 1024 * 1024;
const INSERT_CHUNK = 5_000;
/** Offset of future-dated filler rows' indices, so a filler that ever ran would show as a stray. */
export const FILLER_INDEX_BASE = 100_000_000;

/** Spike histogram: 10 ms bins from -100 ms to +5000 ms (later starts land in the last bin). */
export const SPIKE_BINS = { fromMs: -100, toMs: 5_000, bins: 510 } as const;

/** A fresh, ok record of one run. */
export function record(
  contender: RunSubject,
  workload: string,
  options: RunOptions,
  params: RunRecord['params'],
): RunRecord {
  return {
    workload,
    system: contender.module.name,
    variant: contender.variant,
    label: contender.label,
    round: options.round,
    params,
    status: 'ok',
    problems: [],
    metrics: {},
    rss: [],
    wallMs: 0,
  };
}

function rssRecord(summary: RssSummary): RssRecord {
  return {
    startMb: summary.startBytes / MIB,
    peakMb: summary.peakBytes / MIB,
    endMb: summary.endBytes / MIB,
  };
}

/** Adds a problem to a run; `status` replaces ok (and a timeout, when it is a failure). */
export function fail(run: RunRecord, problem: string, status: RunStatus = 'failed'): void {
  run.problems.push(problem);
  // A failure outranks a timeout: a run that doubled a job is wrong, not merely slow.
  if (run.status === 'ok' || (run.status === 'timeout' && status === 'failed')) run.status = status;
}

/** Inserts jobs in chunks; returns the elapsed ms. */
export async function insertAll(store: BenchStore, jobs: readonly BenchJob[], chunk = INSERT_CHUNK): Promise<number> {
  const started = hostNowMs();
  for (let k = 0; k < jobs.length; k += chunk) await store.insert(jobs.slice(k, k + chunk));
  return hostNowMs() - started;
}

/** Jobs 0..n-1, due now (or at `runAt`). */
export function benchJobs(n: number, runAt?: Date): BenchJob[] {
  return Array.from({ length: n }, (_, i) => (runAt ? { i, runAt } : { i }));
}

async function waitUntilNothingDue(store: BenchStore, capMs: number): Promise<number> {
  const deadline = hostNowMs() + capMs;
  let left = await store.remainingDue();
  while (left > 0 && hostNowMs() < deadline) {
    await sleep(5);
    left = await store.remainingDue();
  }
  return left;
}

function checkExactlyOnce(run: RunRecord, recorder: StartRecorder): void {
  if (recorder.duplicates > 0) fail(run, `${recorder.duplicates} duplicate handler starts (jobs ran twice)`);
  if (recorder.strays > 0) fail(run, `${recorder.strays} starts of jobs outside this run`);
}

/**
 * The tail of a workload that submits over time: waits (up to `tailCapMs` after the last submit)
 * for every job to start, then for none to be due, stops the workers, checks that each job ran
 * once, and returns each job's start latency from `fromMs[i]`. A job that never started counts at
 * the cap, so a timeout cannot look like low latency.
 *
 * `clock` names the clock of `submitEnd` and `fromMs`, and so which start is read: `host` (the
 * default) the bench's cross-process clock (hostNowMs, {@link StartRecorder.startMs}); `date` the
 * wall clock (`Date.now()`, {@link StartRecorder.startDateMs}), for lateness against run times.
 */
async function finishTimedSubmits(
  run: RunRecord,
  workers: WorkerProcess[],
  recorder: StartRecorder,
  store: BenchStore,
  times: { submitEnd: number; tailCapMs: number; fromMs: ArrayLike<number>; clock?: 'host' | 'date' },
): Promise<number[]> {
  const total = times.fromMs.length;
  if (await recorder.waitFor(total, times.tailCapMs)) {
    const left = await waitUntilNothingDue(store, 15_000);
    if (left > 0) fail(run, `${left} jobs still unfinished 15 s after every handler ran`);
  } else {
    fail(
      run,
      `only ${recorder.distinct} of ${total} jobs started within ${times.tailCapMs} ms of the last submit`,
      'timeout',
    );
  }
  await stopAll(run, workers);
  checkExactlyOnce(run, recorder);
  const starts = times.clock === 'date' ? recorder.startDateMs : recorder.startMs;
  const latencies: number[] = [];
  for (let i = 0; i < total; i += 1) {
    const start = starts[i]!;
    const from = times.fromMs[i]!;
    latencies.push(Number.isNaN(start) ? times.submitEnd + times.tailCapMs - from : start - from);
  }
  return latencies;
}

async function stopAll(run: RunRecord, workers: WorkerProcess[]): Promise<void> {
  run.workerNode = [...new Set(workers.map((worker) => worker.node))].join(', ');
  const summaries = await Promise.all(workers.map((worker) => worker.stop()));
  run.rss = summaries.map(rssRecord);
  for (const worker of workers) if (worker.error) fail(run, `worker ${worker.pid}: ${worker.error}`, 'error');
  run.rssTimeline = summaries.map((summary) => {
    const t0 = summary.samples[0]?.atMs ?? 0;
    return summary.samples.map((sample) => [(sample.atMs - t0) / 1000, sample.rssBytes / MIB] as [number, number]);
  });
}

/**
 * The tail of a drain: waits (up to `capMs`) for every job the recorder expects to start, then for
 * none to be due, stops the workers, checks each job ran once, and records the rate of the jobs
 * from index `from` on (the ones being drained), timed from the first of their starts.
 */
async function finishDrain(
  run: RunRecord,
  workers: WorkerProcess[],
  recorder: StartRecorder,
  store: BenchStore,
  capMs: number,
  from: number,
  what: string,
  more: {
    /** The drain measured ends at this job (exclusive); the recorder may count more after it. */
    to?: number;
    /** Runs after the drain measured and before the workers stop (the backlog's second drain). */
    beforeStop?: (drained: { allStarted: boolean }) => Promise<void>;
  } = {},
): Promise<void> {
  const drained = await measureDrain(run, recorder, store, capMs, from, more.to ?? recorder.total, what);
  run.metrics.started = drained.started;
  run.metrics.seconds = drained.seconds;
  run.metrics.jobsPerSec = drained.started / drained.seconds;
  if (more.beforeStop) await more.beforeStop(drained);
  await stopAll(run, workers);
  checkExactlyOnce(run, recorder);
  run.metrics.peakRssMb = Math.max(0, ...run.rss.map((rss) => rss.peakMb));
}

/**
 * Waits until jobs `from`..`to`-1 have started (within `capMs`) and nothing is due, and returns
 * how many of them started and the seconds from the first of their starts to that moment.
 */
async function measureDrain(
  run: RunRecord,
  recorder: StartRecorder,
  store: BenchStore,
  capMs: number,
  from: number,
  to: number,
  what: string,
): Promise<{ started: number; seconds: number; allStarted: boolean }> {
  const allStarted = await recorder.waitFor(to, capMs);
  let endMs = hostNowMs();
  if (allStarted) {
    const left = await waitUntilNothingDue(store, 15_000);
    endMs = hostNowMs();
    if (left > 0) fail(run, `${left} jobs still unfinished 15 s after every handler ran`);
  } else {
    fail(run, `only ${startedIn(recorder, from, to)} of ${to - from} ${what} started within ${capMs} ms`, 'timeout');
  }
  let firstStartMs = Number.POSITIVE_INFINITY;
  for (let i = from; i < to; i += 1) if (recorder.startMs[i]! < firstStartMs) firstStartMs = recorder.startMs[i]!;
  return { started: startedIn(recorder, from, to), seconds: (endMs - firstStartMs) / 1000, allStarted };
}

/** How many of jobs `from`..`to`-1 have started. */
function startedIn(recorder: StartRecorder, from: number, to: number): number {
  let started = 0;
  for (let i = from; i < to; i += 1) if (!Number.isNaN(recorder.startMs[i]!)) started += 1;
  return started;
}

/**
 * The backlog workload's second drain: once the first backlog is drained, `n` more jobs are
 * inserted while the same worker processes idle, all due at one instant after the last insert,
 * so the workers meet them as one backlog. A worker that has run a drain has its hot code
 * compiled by the JIT, as a long-running worker has when a backfill arrives; the first drain's
 * rate includes the compiling (bench/warm-up.ts measures it). The lead: 3 s, or the time to
 * insert n at 25,000 jobs/s if longer, so the insert (about 100,000 jobs/s) never overruns it.
 * A second drain that overruns or does not finish within the cap marks the whole run (its first
 * drain's rate is then left out of the medians too): a worker that stalls on its second backlog
 * is a finding, not a footnote.
 */
async function secondDrain(
  run: RunRecord,
  recorder: StartRecorder,
  store: BenchStore,
  n: number,
  options: { capMs: number; insertChunk?: number | undefined; databaseNow: () => Promise<Date> },
): Promise<void> {
  const leadMs = Math.max(3_000, Math.ceil(n / 25));
  const dueAtMs = Math.ceil(((await options.databaseNow()).getTime() + leadMs) / 100) * 100;
  const jobs = benchJobs(n, new Date(dueAtMs)).map((job) => ({ ...job, i: n + job.i }));
  await insertAll(store, jobs, options.insertChunk);
  if (Date.now() >= dueAtMs) {
    fail(run, `inserting the second backlog overran its due instant (${leadMs} ms lead)`);
    return;
  }
  const drained = await measureDrain(
    run,
    recorder,
    store,
    dueAtMs - Date.now() + options.capMs,
    n,
    2 * n,
    'jobs of the second backlog',
  );
  run.metrics.secondStarted = drained.started;
  run.metrics.secondSeconds = drained.seconds;
  run.metrics.secondJobsPerSec = drained.started / drained.seconds;
}

/**
 * Drain: `n` no-op jobs inserted first, then `procs` worker processes started together; throughput
 * is n over the time from the first handler start until the store holds no due, unfinished job.
 */
export async function drainRun(
  contender: Contender,
  n: number,
  procs: number,
  options: RunOptions & {
    workload?: string;
    fresh?: boolean;
    insertChunk?: number;
    failFirstAttempt?: boolean;
    /** The `kinds` workload: jobs spread round-robin over this many kinds, each worker handling all. */
    kinds?: number;
    /**
     * The `backlog` workload: the same workers then drain a second backlog of `n` (see
     * {@link secondDrain}); its rate is `secondJobsPerSec`, the run's own rate the first's.
     */
    secondDrain?: { databaseNow: () => Promise<Date> };
  },
): Promise<RunRecord> {
  const kinds = options.kinds ?? 1;
  const run = record(contender, options.workload ?? 'drain', options, {
    jobs: n,
    procs,
    ...(kinds > 1 ? { kinds } : {}),
  });
  const wallStart = hostNowMs();
  const config = kinds > 1 ? { ...contender.config, kinds } : contender.config;
  if (options.fresh !== false) await contender.module.reset(config);
  const store = await contender.module.openStore(config);
  let workers: WorkerProcess[] = [];
  try {
    const jobs = benchJobs(n).map((job) => ({
      ...job,
      ...(options.failFirstAttempt ? { failFirstAttempt: true } : {}),
      ...(kinds > 1 ? { kind: job.i % kinds } : {}),
    }));
    const insertMs = await insertAll(store, jobs, options.insertChunk);
    run.metrics.insertJobsPerSec = n / (insertMs / 1000);
    const second = options.secondDrain;
    const recorder = new StartRecorder(second ? 2 * n : n);
    workers = await WorkerProcess.startMany(procs, config, recorder, {
      cpuProfileDir: options.cpuProfileDir,
    });
    await finishDrain(
      run,
      workers,
      recorder,
      store,
      options.capMs,
      0,
      'jobs',
      second
        ? {
            to: n,
            beforeStop: async (first) => {
              if (first.allStarted && run.status === 'ok')
                await secondDrain(run, recorder, store, n, { ...options, databaseNow: second.databaseNow });
            },
          }
        : {},
    );
    workers = [];
  } catch (error) {
    fail(run, (error as Error).message, 'error');
  } finally {
    for (const worker of workers) worker.kill();
    await store.close().catch(() => {});
  }
  run.wallMs = hostNowMs() - wallStart;
  return run;
}

/**
 * A downstream outage: `n` jobs queued, then one worker process started, and every job's first
 * attempt throws (its retry an hour away). Jobs/s from the first start until nothing is due: until
 * every failed attempt is recorded and its job pending again. Beside the drain of the same size it
 * shows what a failure costs over a success (decision 0024). Docket's drivers only.
 */
export async function outageRun(
  contender: Contender,
  n: number,
  options: RunOptions & { insertChunk?: number },
): Promise<RunRecord> {
  if (!OUTAGE_SYSTEMS.includes(contender.module.name))
    throw new Error(`the outage workload runs on ${OUTAGE_SYSTEMS.join(', ')} only, not ${contender.module.name}`);
  return drainRun(contender, n, 1, { ...options, workload: 'outage', failFirstAttempt: true });
}

/**
 * A backfill into a running worker, the way most backlogs arrive: one worker process starts on an
 * empty store and runs `warm` jobs (a fresh install's first traffic: half of them, then the
 * store's tables analysed as autovacuum analyses a new table after its first fifty or so changes,
 * then the rest), and only then are `n` jobs inserted through the batch API while
 * that worker runs. Jobs/s from the first backfill job's start until nothing is due. Unlike
 * `backlog` (worker started after the insert), every plan the worker's connections keep was made
 * while the table was small (decision 0023).
 * `analyze: false` leaves the analysis out (a table autovacuum has not reached yet), the control
 * that tells a cached plan's cost from a running worker's. BullMQ has no table to analyse.
 */
export async function backfillRun(
  contender: Contender,
  n: number,
  warm: number,
  options: RunOptions & { insertChunk?: number; analyze?: boolean },
): Promise<RunRecord> {
  const analyze = options.analyze !== false;
  const run = record(contender, 'backfill', options, { jobs: n, warm, analyzed: analyze ? 'yes' : 'no' });
  const wallStart = hostNowMs();
  await contender.module.reset(contender.config);
  const store = await contender.module.openStore(contender.config);
  let workers: WorkerProcess[] = [];
  try {
    const recorder = new StartRecorder(warm + n);
    workers = await WorkerProcess.startMany(1, contender.config, recorder, { cpuProfileDir: options.cpuProfileDir });
    // Half of the warm-up, the analysis, then the other half: the worker's claims and completions
    // after the analysis are planned on the small table it describes.
    const runWarm = async (from: number, to: number) => {
      await store.insert(benchJobs(to).slice(from));
      if (!(await recorder.waitFor(to, options.capMs)))
        throw new Error(`only ${recorder.distinct} of ${to} warm-up jobs started`);
      const left = await waitUntilNothingDue(store, 15_000);
      if (left > 0) throw new Error(`${left} warm-up jobs still unfinished 15 s after they started`);
    };
    const half = Math.ceil(warm / 2);
    await runWarm(0, half);
    if (analyze && contender.config.databaseUrl.startsWith('postgres'))
      await analyzeDatabase(contender.config.databaseUrl);
    await runWarm(half, warm);
    const backfill = benchJobs(n).map((job) => ({ i: job.i + warm }));
    const insertMs = await insertAll(store, backfill, options.insertChunk);
    run.metrics.insertJobsPerSec = n / (insertMs / 1000);
    await finishDrain(run, workers, recorder, store, options.capMs, warm, 'backfill jobs');
    workers = [];
  } catch (error) {
    fail(run, (error as Error).message, 'error');
  } finally {
    for (const worker of workers) worker.kill();
    await store.close().catch(() => {});
  }
  run.wallMs = hostNowMs() - wallStart;
  return run;
}

/**
 * Steady stream: workers running first, then immediate jobs submitted at `ratePerSec` for
 * `durationMs` (each due batch in one insert, one insert in flight). Start latency is handler start
 * minus the start of the insert call that carried the job. A backlog that grows shows as latency
 * rising from the first tenth of the jobs to the last.
 */
export async function streamRun(
  contender: Contender,
  ratePerSec: number,
  durationMs: number,
  procs: number,
  options: RunOptions & { workload?: string; fresh?: boolean },
): Promise<RunRecord> {
  const total = Math.max(1, Math.round((ratePerSec * durationMs) / 1000));
  const run = record(contender, options.workload ?? 'stream', options, { ratePerSec, durationMs, procs, jobs: total });
  const wallStart = hostNowMs();
  if (options.fresh !== false) await contender.module.reset(contender.config);
  const store = await contender.module.openStore(contender.config);
  let workers: WorkerProcess[] = [];
  try {
    const recorder = new StartRecorder(total);
    workers = await WorkerProcess.startMany(procs, contender.config, recorder, {
      cpuProfileDir: options.cpuProfileDir,
    });
    const submitAt = new Float64Array(total);
    let submitted = 0;
    let inserts = 0;
    const t0 = hostNowMs();
    while (submitted < total) {
      const due = Math.min(total, Math.floor(((hostNowMs() - t0) * ratePerSec) / 1000) + 1);
      if (due > submitted) {
        const at = hostNowMs();
        const batch: BenchJob[] = [];
        for (let i = submitted; i < due; i += 1) {
          submitAt[i] = at;
          batch.push({ i });
        }
        await store.insert(batch);
        inserts += 1;
        submitted = due;
      } else {
        await sleep(1);
      }
    }
    const submitEnd = hostNowMs();
    run.metrics.submitOverrunMs = submitEnd - t0 - durationMs;
    run.metrics.meanBatch = total / inserts;
    const tailCapMs = Math.max(5_000, Math.min(options.capMs, durationMs));
    const latencies = await finishTimedSubmits(run, workers, recorder, store, {
      submitEnd,
      tailCapMs,
      fromMs: submitAt,
    });
    workers = [];
    const all = distribution(latencies);
    const tenth = Math.max(1, Math.floor(total / 10));
    const first = distribution(latencies.slice(0, tenth));
    const last = distribution(latencies.slice(total - tenth));
    Object.assign(run.metrics, prefixed('latency', all), {
      firstTenthP50Ms: first.p50,
      lastTenthP50Ms: last.p50,
      started: recorder.distinct,
      // Growing backlog: the last tenth waits clearly longer than the first (x3 and +50 ms).
      backlogGrew: last.p50 > first.p50 * 3 && last.p50 - first.p50 > 50 ? 1 : 0,
      peakRssMb: Math.max(0, ...run.rss.map((rss) => rss.peakMb)),
    });
    run.latencyCdf = cdfPoints(latencies);
  } catch (error) {
    fail(run, (error as Error).message, 'error');
  } finally {
    for (const worker of workers) worker.kill();
    await store.close().catch(() => {});
  }
  run.wallMs = hostNowMs() - wallStart;
  return run;
}

/** A distribution's fields as metrics named `<prefix>P50Ms` … `<prefix>MeanMs`. */
export function prefixed(prefix: string, d: Distribution): Record<string, number> {
  return {
    [`${prefix}P50Ms`]: d.p50,
    [`${prefix}P90Ms`]: d.p90,
    [`${prefix}P99Ms`]: d.p99,
    [`${prefix}MaxMs`]: d.max,
    [`${prefix}MeanMs`]: d.mean,
  };
}

/**
 * The spike: `n` jobs due at one instant `leadMs` ahead (by the database clock, read just before),
 * inserted while the workers idle. Lateness is a start's integer `Date.now()` minus the due instant,
 * and an early start one whose is below it (this host's clock is also the database's).
 *
 * With `spikes` above 1 the same worker processes take that many spikes in a row, each of `n` new
 * jobs due `leadMs` after the one before finished: the first measures a freshly started worker
 * (its code not yet compiled by the JIT, as after a deploy), the last one that has been running
 * (as in production, where a spike rarely meets a worker seconds old). The run's lateness metrics
 * are the first spike's; the last one's are reported beside them as `warm…`, and early starts are
 * counted over all of them.
 *
 * With `viaSchedules` (workload `schedule-spike`, {@link SCHEDULE_SYSTEMS} only) the `n` jobs are
 * the runs of `n` recurring schedules all due at the instant (a whole second), as when every tenant's
 * nightly report falls due at 00:00: each run's claim also plans its schedule's next run, in the
 * same transaction. Each spike creates `n` new schedules.
 */
export async function spikeRun(
  contender: Contender,
  n: number,
  leadMs: number,
  procs: number,
  options: RunOptions & { databaseNow: () => Promise<Date>; spikes?: number; viaSchedules?: boolean },
): Promise<RunRecord> {
  const spikes = options.spikes ?? 1;
  const viaSchedules = options.viaSchedules === true;
  if (viaSchedules && !SCHEDULE_SYSTEMS.includes(contender.module.name))
    throw new Error(
      `the schedule-spike workload runs on ${SCHEDULE_SYSTEMS.join(', ')} only, not ${contender.module.name}`,
    );
  const workload = viaSchedules ? 'schedule-spike' : 'spike';
  const run = record(contender, workload, options, { jobs: n, leadMs, procs, ...(spikes > 1 ? { spikes } : {}) });
  const wallStart = hostNowMs();
  await contender.module.reset(contender.config);
  const store = await contender.module.openStore(contender.config);
  let workers: WorkerProcess[] = [];
  try {
    const recorder = new StartRecorder(n * spikes);
    workers = await WorkerProcess.startMany(procs, contender.config, recorder, {
      cpuProfileDir: options.cpuProfileDir,
    });
    const outcomes: SpikeLateness[] = [];
    for (let spike = 0; spike < spikes && run.status === 'ok'; spike += 1) {
      const dbNow = (await options.databaseNow()).getTime();
      // A whole 100 ms, so the due instant has no sub-millisecond part in any store; a whole
      // second for schedules, whose cron names seconds.
      const grainMs = viaSchedules ? 1000 : 100;
      const dueAtMs = Math.ceil((dbNow + leadMs) / grainMs) * grainMs;
      const firstIndex = spike * n;
      const jobs = benchJobs(n, new Date(dueAtMs)).map((job) => ({ ...job, i: firstIndex + job.i }));
      const insertMs = viaSchedules
        ? await scheduleAll(store, jobs, new Date(dueAtMs))
        : await insertAll(store, jobs, 2_000);
      const insertedAt = Date.now();
      if (spike === 0) {
        run.metrics.insertMs = insertMs;
        run.metrics.insertMarginMs = dueAtMs - insertedAt;
      }
      if (insertedAt >= dueAtMs)
        fail(
          run,
          `${viaSchedules ? 'creating the schedules of' : 'inserting'} spike ${spike + 1} took ${Math.round(insertMs)} ms and overran the due instant`,
        );
      const allStarted = await recorder.waitFor(firstIndex + n, dueAtMs - Date.now() + options.capMs);
      const outcome = spikeLateness(recorder.startDateMs, firstIndex, firstIndex + n, dueAtMs);
      outcomes.push(outcome);
      if (!allStarted) {
        fail(
          run,
          `spike ${spike + 1}: only ${outcome.lateness.length} of ${n} jobs started within ${options.capMs} ms of the due instant`,
          'timeout',
        );
        break;
      }
      const left = await waitUntilNothingDue(store, 15_000);
      if (left > 0) fail(run, `${left} jobs still unfinished 15 s after every handler of spike ${spike + 1} ran`);
    }
    await stopAll(run, workers);
    workers = [];
    checkExactlyOnce(run, recorder);
    const early = outcomes.reduce((sum, outcome) => sum + outcome.early, 0);
    if (early > 0) fail(run, `${early} jobs started before their run time`);
    const first = outcomes[0];
    if (first) {
      const d = distribution(first.lateness);
      Object.assign(run.metrics, prefixed('lateness', d), {
        early,
        started: d.count,
        lastStartAfterDueMs: d.max,
        firstStartAfterDueMs: d.min,
      });
      run.spikeHistogram = histogram(first.lateness, SPIKE_BINS.fromMs, SPIKE_BINS.toMs, SPIKE_BINS.bins);
    }
    // The last spike's `warmLatenessMaxMs` is its last start after the instant.
    const last = outcomes.at(-1);
    if (spikes > 1 && last && outcomes.length === spikes)
      Object.assign(run.metrics, prefixed('warmLateness', distribution(last.lateness)));
  } catch (error) {
    fail(run, (error as Error).message, 'error');
  } finally {
    for (const worker of workers) worker.kill();
    await store.close().catch(() => {});
  }
  run.wallMs = hostNowMs() - wallStart;
  return run;
}

/** Creates one schedule per job, all due at `dueAt`; the time it took, ms. */
async function scheduleAll(store: BenchStore, jobs: readonly BenchJob[], dueAt: Date): Promise<number> {
  if (!store.scheduleAt) throw new Error('this system does not take recurring schedules (SCHEDULE_SYSTEMS)');
  const started = hostNowMs();
  await store.scheduleAt(
    jobs.map((job) => job.i),
    dueAt,
  );
  return hostNowMs() - started;
}

/** One spike's starts, against its due instant. */
export interface SpikeLateness {
  /** Start minus due instant, ms, per started job (its min and max: the first and last start). */
  lateness: number[];
  /** Starts before the due instant. */
  early: number;
}

/**
 * The lateness of the jobs with indices `from` … `to` − 1 (one spike) from their first starts'
 * `Date.now()` (NaN: not started). Lateness is about the database's clock, which is this host's
 * wall clock: each start's `Date.now()` in its worker (whole ms, so a lateness reads up to 1 ms
 * short), not the bench's cross-process clock, which follows the monotonic clock and parts from
 * the wall clock whenever the host's clock is slewed or stepped.
 */
export function spikeLateness(startDateMs: Float64Array, from: number, to: number, dueAtMs: number): SpikeLateness {
  const lateness: number[] = [];
  let early = 0;
  for (let i = from; i < to; i += 1) {
    const startedAt = startDateMs[i]!;
    if (Number.isNaN(startedAt)) continue;
    if (startedAt < dueAtMs) early += 1;
    lateness.push(startedAt - dueAtMs);
  }
  return { lateness, early };
}

/** Submit: `n` jobs inserted `batchSize` at a time, one insert in flight, no workers. */
export async function submitRun(
  contender: Contender,
  n: number,
  batchSize: number,
  options: RunOptions,
): Promise<RunRecord> {
  const run = record(contender, 'submit', options, { jobs: n, batchSize });
  const wallStart = hostNowMs();
  await contender.module.reset(contender.config);
  const store = await contender.module.openStore(contender.config);
  try {
    const elapsedMs = await insertAll(store, benchJobs(n), batchSize);
    run.metrics.jobsPerSec = n / (elapsedMs / 1000);
    run.metrics.seconds = elapsedMs / 1000;
  } catch (error) {
    fail(run, (error as Error).message, 'error');
  } finally {
    await store.close().catch(() => {});
  }
  run.wallMs = hostNowMs() - wallStart;
  return run;
}

/** Inserts `n` filler jobs due a day from now (indices from {@link FILLER_INDEX_BASE}); returns ms. */
export async function insertFutureFiller(store: BenchStore, n: number, chunk = 10_000): Promise<number> {
  const runAt = new Date(Date.now() + 24 * 3600_000);
  const started = hostNowMs();
  for (let k = 0; k < n; k += chunk) {
    const jobs: BenchJob[] = [];
    for (let i = k; i < Math.min(n, k + chunk); i += 1) jobs.push({ i: FILLER_INDEX_BASE + i, runAt });
    await store.insert(jobs);
  }
  return hostNowMs() - started;
}

/** Marks a run as skipped (deadline reached, or an earlier round timed out). */
export function skippedRun(
  contender: RunSubject,
  workload: string,
  round: number,
  params: RunRecord['params'],
  reason: string,
): RunRecord {
  const run = record(contender, workload, { round, capMs: 0 }, params);
  run.status = 'skipped';
  run.problems.push(reason);
  return run;
}

/**
 * Single-submit capacity: `n` jobs, each its own `submitOne` call (the system's single-job API),
 * from `inFlight` concurrent callers that each submit again as soon as their call returns (a web
 * app submitting as it serves requests), no workers. Capacity is n over the elapsed time; call
 * time is from a call's start to its return.
 *
 * `keyed` (mode `capacity-keyed`): each call carries a caller's key never used before
 * (`job-<run>-<i>`), through the system's own deduplication option, as an API that passes on its
 * client's request id would. The store's answer is the same (one job per call); what changes is
 * the system's work to honour a key (a look-up, a unique index, a conflict clause).
 */
export async function singleSubmitCapacityRun(
  contender: Contender,
  n: number,
  inFlight: number,
  options: RunOptions & { keyed?: boolean },
): Promise<RunRecord> {
  const keyed = options.keyed === true;
  const run = record(contender, 'single-submit', options, {
    jobs: n,
    inFlight,
    mode: keyed ? 'capacity-keyed' : 'capacity',
  });
  const wallStart = hostNowMs();
  await contender.module.reset(contender.config);
  const store = await contender.module.openStore(contender.config);
  try {
    // Made before the clock starts: the keys are the caller's, not the system's work.
    const runId = randomUUID().slice(0, 8);
    const keys = keyed ? Array.from({ length: n }, (_, i) => `job-${runId}-${i}`) : undefined;
    const callMs = new Float64Array(n);
    let next = 0;
    const started = hostNowMs();
    await Promise.all(
      Array.from({ length: Math.min(inFlight, n) }, async () => {
        for (let i = next++; i < n; i = next++) {
          const at = hostNowMs();
          await store.submitOne(i, keys?.[i]);
          callMs[i] = hostNowMs() - at;
        }
      }),
    );
    const elapsedMs = hostNowMs() - started;
    const left = await store.remainingDue();
    if (left !== n) fail(run, `${left} jobs due after ${n} single submits (each submit must leave one job)`);
    Object.assign(run.metrics, prefixed('call', distribution([...callMs])), {
      jobsPerSec: n / (elapsedMs / 1000),
      seconds: elapsedMs / 1000,
    });
  } catch (error) {
    fail(run, (error as Error).message, 'error');
  } finally {
    await store.close().catch(() => {});
  }
  run.wallMs = hostNowMs() - wallStart;
  return run;
}

/**
 * Offers `total` calls open loop at `ratePerSec` (a call starts on schedule whether or not earlier
 * ones returned) but never more than `inFlight` at once: an arrival that finds every slot busy
 * waits for one. `call(i, t0)` starts call `i` (`t0`: the offer's start, hostNowMs); a call that
 * rejects is recorded in `errors`, never thrown. Resolves when every call has settled.
 */
async function offerOpenLoop(
  total: number,
  ratePerSec: number,
  inFlight: number,
  call: (i: number, t0: number) => Promise<void>,
): Promise<{ t0: number; errors: string[] }> {
  const calls = new Set<Promise<void>>();
  const errors: string[] = [];
  const t0 = hostNowMs();
  for (let i = 0; i < total; ) {
    const due = Math.min(total, Math.floor(((hostNowMs() - t0) * ratePerSec) / 1000) + 1);
    if (i >= due) {
      await sleep(1);
      continue;
    }
    if (calls.size >= inFlight) {
      await Promise.race(calls);
      continue;
    }
    const started = call(i, t0)
      .catch((error: Error) => {
        errors.push(error.message);
      })
      .finally(() => calls.delete(started));
    calls.add(started);
    i += 1;
  }
  await Promise.all(calls);
  return { t0, errors };
}

/** The `neighbours` workload's additions to the single-submit latency run. */
export interface NeighbourOptions {
  /** Worker processes of the contender's system and configuration claiming another queue ({@link SystemConfig.neighbour}). */
  count: number;
  /**
   * How long after the workers started the transaction count begins, ms: PostgreSQL 15 may hold
   * a backend's counters up to 10 s, so what the workers committed starting up is counted before
   * the stream, not in it. 0: no count (a smoke run does not wait; a shorter wait would count the
   * start-ups in), as the remote-workers workload's `statsFlushMs`.
   */
  statsFlushMs: number;
}

/**
 * How long a run's database may keep sessions after its workers exited and its store closed (each
 * backend exits a little after its client hung up); past it, the transaction count is noted as
 * possibly short, since a backend still there has not published its last counters.
 */
const SESSIONS_GONE_TIMEOUT_MS = 10_000;

/**
 * Single-submit latency: a worker (the contender's configuration) running first, then one
 * `submitOne` call per job offered at `ratePerSec` for `durationMs`, open loop (a call starts on
 * schedule whether or not earlier ones returned) but never more than `inFlight` at once; an
 * arrival that finds all slots busy waits for one, and the achieved offer is reported. Latency is
 * handler start minus the instant the job's call was scheduled (enqueue to start).
 *
 * With `neighbours` (workload `neighbours`, {@link NEIGHBOUR_SYSTEMS} only) the same run beside
 * `count` more worker processes of the same system and configuration, started before the stream,
 * that claim another queue the stream never feeds: other services sharing the database. A
 * neighbour that starts any job fails the run. Also measured: each neighbour's CPU over the offer
 * (/proc, as a share of one core, their mean) and, on PostgreSQL, the scratch database's committed
 * transactions per job (`xact_commit`) from `statsFlushMs` after the workers started until every
 * worker process had exited and the harness's store was closed (a backend publishes its counters
 * as it exits): the stream's submits, claims and completions, the neighbours' wake-ups and polls,
 * and the workers' stops.
 */
export async function singleSubmitLatencyRun(
  contender: Contender,
  ratePerSec: number,
  durationMs: number,
  inFlight: number,
  options: RunOptions & { neighbours?: NeighbourOptions },
): Promise<RunRecord> {
  const neighbours = options.neighbours;
  if (neighbours && !NEIGHBOUR_SYSTEMS.includes(contender.module.name))
    throw new Error(
      `the neighbours workload runs on ${NEIGHBOUR_SYSTEMS.join(', ')} only, not ${contender.module.name}`,
    );
  const total = Math.max(1, Math.round((ratePerSec * durationMs) / 1000));
  const run = neighbours
    ? record(contender, 'neighbours', options, {
        ratePerSec,
        durationMs,
        inFlight,
        jobs: total,
        neighbours: neighbours.count,
        statsFlushMs: neighbours.statsFlushMs,
      })
    : record(contender, 'single-submit', options, { ratePerSec, durationMs, inFlight, jobs: total, mode: 'latency' });
  const wallStart = hostNowMs();
  await contender.module.reset(contender.config);
  const store = await contender.module.openStore(contender.config);
  let storeOpen = true;
  let workers: WorkerProcess[] = [];
  let neighbourWorkers: WorkerProcess[] = [];
  const url = contender.config.databaseUrl;
  const countedDatabase =
    neighbours && neighbours.statsFlushMs > 0 && url.startsWith('postgres') ? databaseNameOf(url) : null;
  try {
    const recorder = new StartRecorder(total);
    workers = await WorkerProcess.startMany(1, contender.config, recorder, { cpuProfileDir: options.cpuProfileDir });
    // A recorder of no jobs: every start a neighbour reports is a stray, a job of the stream it took.
    const neighbourRecorder = new StartRecorder(0);
    if (neighbours)
      neighbourWorkers = await WorkerProcess.startMany(
        neighbours.count,
        { ...contender.config, neighbour: true },
        neighbourRecorder,
      );
    if (countedDatabase) await sleep(neighbours!.statsFlushMs);
    const xactBefore = countedDatabase ? await xactCommits(countedDatabase) : Number.NaN;
    const scheduledAt = new Float64Array(total);
    const neighbourCpuBeforeMs = neighbourWorkers.map((worker) => processCpuMs(worker.pid));
    const { t0, errors } = await offerOpenLoop(total, ratePerSec, inFlight, (i, t0) => {
      // The job was due at its slot in the offered schedule, even if it waited for a free slot.
      scheduledAt[i] = t0 + (i * 1000) / ratePerSec;
      return store.submitOne(i);
    });
    const submitEnd = hostNowMs();
    const neighbourCpuMs = neighbourWorkers.map((worker, k) => processCpuMs(worker.pid) - neighbourCpuBeforeMs[k]!);
    if (errors.length > 0) fail(run, `${errors.length} submits failed: ${errors[0]}`, 'error');
    run.metrics.offeredPerSec = total / ((submitEnd - t0) / 1000);
    const tailCapMs = Math.max(5_000, Math.min(options.capMs, durationMs));
    const latencies = await finishTimedSubmits(run, workers, recorder, store, {
      submitEnd,
      tailCapMs,
      fromMs: scheduledAt,
    });
    workers = [];
    Object.assign(run.metrics, prefixed('latency', distribution(latencies)), {
      started: recorder.distinct,
      peakRssMb: Math.max(0, ...run.rss.map((rss) => rss.peakMb)),
    });
    run.latencyCdf = cdfPoints(latencies);
    if (neighbours) {
      await stopNeighbours(run, neighbourWorkers, neighbourRecorder);
      neighbourWorkers = [];
      const offerSeconds = (submitEnd - t0) / 1000;
      const cpuShares = neighbourCpuMs.map((ms) => ms / 1000 / offerSeconds);
      if (cpuShares.length > 0 && cpuShares.every(Number.isFinite))
        run.metrics.neighbourCpuPercent = (100 * cpuShares.reduce((sum, share) => sum + share, 0)) / cpuShares.length;
    }
    if (countedDatabase) {
      storeOpen = false;
      await store.close();
      if (!(await waitForNoSessions(countedDatabase, SESSIONS_GONE_TIMEOUT_MS)))
        run.problems.push(
          `sessions still connected to the database ${SESSIONS_GONE_TIMEOUT_MS / 1000} s after the run: its transaction count may be short`,
        );
      const xact = (await xactCommits(countedDatabase)) - xactBefore;
      Object.assign(run.metrics, { xactCommits: xact, xactPerJob: xact / total });
    }
  } catch (error) {
    fail(run, (error as Error).message, 'error');
  } finally {
    for (const worker of [...workers, ...neighbourWorkers]) worker.kill();
    if (storeOpen) await store.close().catch(() => {});
  }
  run.wallMs = hostNowMs() - wallStart;
  return run;
}

/** Stops the neighbour workers of a run; any job one of them started, or an error it reported, fails the run. */
async function stopNeighbours(run: RunRecord, neighbours: WorkerProcess[], recorder: StartRecorder): Promise<void> {
  await Promise.all(neighbours.map((worker) => worker.stop()));
  for (const worker of neighbours)
    if (worker.error) fail(run, `neighbour worker ${worker.pid}: ${worker.error}`, 'error');
  if (recorder.strays > 0) fail(run, `the neighbour workers started ${recorder.strays} jobs of the stream`);
}

/**
 * Delayed single submits, the reminder case ("send this at 9:00"): as the single-submit latency
 * run (one worker process in the contender's configuration running first, then one call per job
 * offered open loop at `ratePerSec` for `durationMs`, never more than `inFlight` at once), but each
 * call is `submitOneAt` with a run time `delayMs` ahead, `Date.now() + delayMs` read just before the
 * call, through the system's own run-time option ({@link DELAYED_SYSTEMS} only).
 *
 * Lateness is a start's `Date.now()` in its worker minus the job's run time, both whole ms on this
 * host's wall clock, which is also the database's and Redis's (as in the spike); an early start is
 * one below its run time. Every job must start once within `delayMs` plus the tail cap of the
 * single-submit latency run after the last call returned (a job that never started counts at that
 * cap). Early starts fail a run of Docket's drivers, whose run time is a guarantee; a peer's are
 * counted and noted.
 */
export async function delayedRun(
  contender: Contender,
  ratePerSec: number,
  durationMs: number,
  delayMs: number,
  inFlight: number,
  options: RunOptions,
): Promise<RunRecord> {
  if (!DELAYED_SYSTEMS.includes(contender.module.name))
    throw new Error(`the delayed workload runs on ${DELAYED_SYSTEMS.join(', ')} only, not ${contender.module.name}`);
  const total = Math.max(1, Math.round((ratePerSec * durationMs) / 1000));
  const run = record(contender, 'delayed', options, { ratePerSec, durationMs, delayMs, inFlight, jobs: total });
  const wallStart = hostNowMs();
  await contender.module.reset(contender.config);
  const store = await contender.module.openStore(contender.config);
  let workers: WorkerProcess[] = [];
  try {
    const recorder = new StartRecorder(total);
    workers = await WorkerProcess.startMany(1, contender.config, recorder, { cpuProfileDir: options.cpuProfileDir });
    const runAtMs = new Float64Array(total);
    const { t0, errors } = await offerOpenLoop(total, ratePerSec, inFlight, (i) => {
      // The run time a caller asks for: a delay from the moment it calls (its wall clock, whole ms).
      runAtMs[i] = Date.now() + delayMs;
      return store.submitOneAt(i, runAtMs[i]!);
    });
    const submitEnd = hostNowMs();
    const submitEndDate = Date.now();
    if (errors.length > 0) fail(run, `${errors.length} submits failed: ${errors[0]}`, 'error');
    run.metrics.offeredPerSec = total / ((submitEnd - t0) / 1000);
    const tailCapMs = delayMs + Math.max(5_000, Math.min(options.capMs, durationMs));
    const lateness = await finishTimedSubmits(run, workers, recorder, store, {
      submitEnd: submitEndDate,
      tailCapMs,
      fromMs: runAtMs,
      clock: 'date',
    });
    workers = [];
    // Early starts among the jobs that started (a job never started is late, at the cap).
    let early = 0;
    for (let i = 0; i < total; i += 1) if (recorder.startDateMs[i]! < runAtMs[i]!) early += 1;
    if (early > 0) {
      const problem = `${early} jobs started before their run time`;
      if (contender.module.name.startsWith('docket')) fail(run, problem);
      else run.problems.push(`${problem} (counted; a peer's run is not failed for it)`);
    }
    Object.assign(run.metrics, prefixed('lateness', distribution(lateness)), {
      early,
      started: recorder.distinct,
      duplicates: recorder.duplicates,
      peakRssMb: Math.max(0, ...run.rss.map((rss) => rss.peakMb)),
    });
    run.latencyCdf = cdfPoints(lateness);
  } catch (error) {
    fail(run, (error as Error).message, 'error');
  } finally {
    for (const worker of workers) worker.kill();
    await store.close().catch(() => {});
  }
  run.wallMs = hostNowMs() - wallStart;
  return run;
}
