/**
 * The soak: `npm run bench -- --soak [--minutes 30] [--rate 1000] [--retention-ms N]
 * [--prune-interval-ms N] [--sample-seconds 30] [--vacuum-seconds N]`.
 *
 * A web app's steady life: jobs submitted one `submit()` call each (Docket's defaults, at most
 * {@link IN_FLIGHT} calls in flight, open loop at `rate` per second) into one worker process with
 * default settings, for `minutes`. Finished rows are kept for the retention (Docket's default,
 * 7 days, unless `--retention-ms`) and pruned by the worker's Docket every prune interval (default
 * 10 minutes), exactly as a deployment would. Every `sample-seconds` the soak records: the jobs
 * table's total, heap and index sizes, live and dead tuples, autovacuum runs, the backlog (due or
 * running rows), the worker's claim time (p50/p99, timed inside the worker), its RSS, the prunes
 * that ran and what they deleted, the achieved submit rate and enqueue-to-start latency.
 *
 * With the default 7-day retention nothing in a 30-minute soak is old enough to prune: the table
 * grows for a week before pruning has anything to do, so the table-size flatness cannot be judged
 * and is reported as such. A retention shorter than the soak (e.g. `--retention-ms 300000
 * --prune-interval-ms 60000`) shows pruning keeping up; `--retention-ms 0` keeps no done records at
 * all (each job's row deleted as it completes, decision 0022).
 *
 * Flatness (the issue's "± 20 % after the first prune cycle"): over the samples taken after the
 * first prune cycle ended (first prune at one prune interval after the worker started, plus one
 * sample), every sample of a metric lies within ± 20 % of that period's median. Claim p99 is judged
 * on a rolling median of 3 samples, so one slow window is not a trend.
 *
 * Every job is checked to run exactly once, like every other workload.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { DEFAULT_PRUNE_INTERVAL_MS, DEFAULT_RETENTION_MS, Docket } from '../src/docket.js';
import { hostCpuShares, hostCpuTimes, postgresCpuByPid, postgresCpuSinceMs } from './host-cpu.js';
import { dropDatabase, hostNowMs, postgresSettings, recreateDatabase, scratchName } from './pg-admin.js';
import type { FromSoakWorker, SoakWorkerConfig, SoakWorkerSample, ToSoakWorker } from './soak-worker.js';
import { correlation, distribution, median, round } from './stats.js';
import { timeSeriesChart } from './svg-charts.js';
import { sleep, withTimeout } from './worker-process.js';

const WORKER_ENTRY = fileURLToPath(new URL('./soak-worker.ts', import.meta.url));
const SCHEMA = 'docket';
const KIND = 'bench.noop';
/** Concurrent submit calls at most, as in the single-submit workload (a web app's requests). */
export const IN_FLIGHT = 100;
const MIB = 1024 * 1024;
/** How far any sample may stray from the judged period's median and still count as flat. */
export const FLAT_TOLERANCE = 0.2;

/** The soak's knobs, validated. */
export interface SoakOptions {
  minutes: number;
  ratePerSec: number;
  retentionMs: number;
  pruneIntervalMs: number;
  sampleSeconds: number;
  /**
   * Every this many seconds the harness runs `VACUUM (ANALYZE)` on the jobs table, standing in for
   * autovacuum on a server that has it off (this machine's CI configuration does); 0 = never.
   */
  vacuumSeconds: number;
  concurrency: number;
}

/** Raw flag values (strings or absent) as parseArgs gives them. */
export interface SoakFlags {
  minutes?: string | undefined;
  rate?: string | undefined;
  'retention-ms'?: string | undefined;
  'prune-interval-ms'?: string | undefined;
  'sample-seconds'?: string | undefined;
  'vacuum-seconds'?: string | undefined;
}

function positive(name: string, text: string | undefined, fallback: number, integer: boolean): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new Error(`--${name} must be a positive ${integer ? 'integer' : 'number'}, got ${JSON.stringify(text)}`);
  }
  return value;
}

/** Parses and checks the soak flags; a bad value throws a message naming the flag. */
export function parseSoakOptions(flags: SoakFlags, concurrency: number): SoakOptions {
  const options: SoakOptions = {
    minutes: positive('minutes', flags.minutes, 30, false),
    ratePerSec: positive('rate', flags.rate, 1_000, true),
    // 0: no done records, each job deleted as it completes (decision 0022).
    retentionMs:
      flags['retention-ms'] === '0' ? 0 : positive('retention-ms', flags['retention-ms'], DEFAULT_RETENTION_MS, true),
    pruneIntervalMs: positive('prune-interval-ms', flags['prune-interval-ms'], DEFAULT_PRUNE_INTERVAL_MS, true),
    sampleSeconds: positive('sample-seconds', flags['sample-seconds'], 30, false),
    vacuumSeconds: flags['vacuum-seconds'] === '0' ? 0 : positive('vacuum-seconds', flags['vacuum-seconds'], 0, false),
    concurrency,
  };
  if (options.sampleSeconds * 1000 > options.minutes * 60_000) {
    throw new Error(`--sample-seconds ${options.sampleSeconds} is longer than the soak (${options.minutes} min)`);
  }
  return options;
}

/** One sample of the soak. */
export interface SoakSample {
  atS: number;
  submitted: number;
  submittedPerSec: number;
  submitCallP50Ms: number;
  submitCallP99Ms: number;
  started: number;
  startedPerSec: number;
  startLatencyP50Ms: number;
  startLatencyP99Ms: number;
  backlog: number;
  claims: number;
  rowsPerClaim: number;
  claimP50Ms: number;
  claimP99Ms: number;
  claimMaxMs: number;
  prunes: number;
  prunedRows: number;
  workerRssMb: number;
  workerHeapMb: number;
  tableMb: number;
  heapMb: number;
  indexesMb: number;
  liveTuples: number;
  deadTuples: number;
  autovacuums: number;
  /** Harness VACUUMs finished so far (--vacuum-seconds). */
  vacuums: number;
  /**
   * Where the window's time went, per job started in it (µs of CPU): the worker process, every
   * `postgres` process on the host (the submits', claims', completions' and vacuums' backends
   * alike), and the harness (its submits). With the host's busy and stolen shares, these tell a
   * claim-time swing the machine caused from one the code or the table caused. Absent in soaks
   * recorded before they were measured.
   */
  workerCpuUsPerJob?: number;
  databaseCpuUsPerJob?: number;
  harnessCpuUsPerJob?: number;
  /** Share of the host's cores busy (anything, the benchmark included) and stolen by the hypervisor, %. */
  hostBusyPct?: number;
  hostStealPct?: number;
  /**
   * Share of the host's cores (%) busy with anything but the soak's three parts (the worker, the
   * database's processes, the harness): another program on the machine, or the kernel's own work.
   * Reads high by what a database process that exited in the window spent in it.
   */
  outsideCpuPct?: number;
  /**
   * Index entries the scans of the pending claim index returned per scan in the window: dead
   * entries at the index's head, which claims walk until VACUUM or a scan marks them killed, show
   * here first.
   */
  pendingIndexEntriesPerScan?: number;
  /**
   * Server sessions started on the soak's database in the window: pooled connections pg-pool closed
   * after 10 s idle and opened again (each new one starts a server process and plans every stored
   * statement afresh at its first call), and the harness's own.
   */
  sessionsStarted?: number;
  /**
   * Taken after the offer ended, once the last jobs started: the soak's end state, from a window
   * of a few claims with no load behind them. Shown, never judged.
   */
  afterOffer?: boolean;
}

/** A flatness verdict for one metric. */
export interface Flatness {
  metric: string;
  judged: boolean;
  flat: boolean | null;
  median: number;
  minPct: number;
  maxPct: number;
  note: string;
}

/** Everything one soak measured. */
export interface SoakResult {
  command: string;
  startedAt: string;
  finishedAt: string;
  options: SoakOptions;
  /** The server's settings (autovacuum above all), as pg_settings reports them. */
  postgresSettings: Record<string, string>;
  samples: SoakSample[];
  prunes: { atS: number; deleted: number; ms: number }[];
  flatness: Flatness[];
  /**
   * The database's time by statement over the whole soak, when the server loads
   * pg_stat_statements (BENCH_PG_URL naming such a cluster); null when it does not. Absent in soaks
   * recorded before it was read.
   */
  statements?: SoakStatement[] | null;
  totals: {
    offered: number;
    submitted: number;
    submitErrors: number;
    started: number;
    duplicates: number;
    strays: number;
    unfinished: number;
    achievedRatePerSec: number;
  };
  problems: string[];
}

/** One statement's share of the soak's database time (pg_stat_statements, this soak's database only). */
export interface SoakStatement {
  /** The statement's first words, whitespace folded (constants are $n). */
  query: string;
  calls: number;
  /** Execution time a call (a function's time includes the statements it runs, listed on their own too). */
  usPerCall: number;
  rowsPerCall: number;
  /** Shared buffers hit or read a call. */
  buffersPerCall: number;
  /** Execution time per job started over the soak. */
  usPerJob: number;
}

/**
 * Starts counting this database's statements afresh, if the server loads pg_stat_statements;
 * false when it does not (the soak then reports none).
 */
async function resetStatements(client: pg.Client): Promise<boolean> {
  try {
    const { rows } = await client.query<{ loaded: boolean }>(
      "SELECT 'pg_stat_statements' = ANY(string_to_array(current_setting('shared_preload_libraries'), ',')) AS loaded",
    );
    if (!rows[0]?.loaded) return false;
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await client.query(
      'SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)',
    );
    return true;
  } catch {
    return false;
  }
}

/** The most expensive statements of this database since {@link resetStatements}, by total execution time. */
async function readStatements(client: pg.Client, startedJobs: number, limit = 12): Promise<SoakStatement[]> {
  const { rows } = await client.query<{ query: string; calls: string; ms: number; rows: string; buffers: string }>(
    `SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 100) AS query, calls::text AS calls,
            total_exec_time AS ms, rows::text AS rows, (shared_blks_hit + shared_blks_read)::text AS buffers
       FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND query NOT ILIKE '%pg_stat_%'
      ORDER BY total_exec_time DESC LIMIT $1`,
    [limit],
  );
  return rows.map((row) => {
    const calls = Number(row.calls);
    return {
      query: row.query,
      calls,
      usPerCall: calls > 0 ? (1000 * row.ms) / calls : Number.NaN,
      rowsPerCall: calls > 0 ? Number(row.rows) / calls : Number.NaN,
      buffersPerCall: calls > 0 ? Number(row.buffers) / calls : Number.NaN,
      usPerJob: startedJobs > 0 ? (1000 * row.ms) / startedJobs : Number.NaN,
    };
  });
}

/** The forked worker process, spoken to by messages. */
class SoakWorker {
  private readonly child: ChildProcess;
  private waiting = new Map<string, (message: FromSoakWorker) => void>();
  failure: string | null = null;

  constructor(onStarts: (pairs: number[]) => void) {
    this.child = fork(WORKER_ENTRY, [], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (message: FromSoakWorker) => {
      if (message.type === 'starts') onStarts(message.pairs);
      else if (message.type === 'error') {
        this.failure ??= message.message;
        for (const resolve of this.waiting.values()) resolve(message);
      } else this.waiting.get(message.type)?.(message);
    });
    this.child.on('exit', (code, signal) => {
      if (!this.waiting.has('stopped')) this.failure ??= `soak worker exited (code ${code}, signal ${signal})`;
      this.waiting.get('stopped')?.({ type: 'stopped' });
    });
  }

  private ask<T extends FromSoakWorker['type']>(
    message: ToSoakWorker,
    reply: T,
    timeoutMs: number,
  ): Promise<FromSoakWorker> {
    const answered = new Promise<FromSoakWorker>((resolve) => this.waiting.set(reply, resolve));
    if (this.child.connected) this.child.send(message);
    return withTimeout(answered, timeoutMs, `soak worker did not answer ${message.type}`).finally(() =>
      this.waiting.delete(reply),
    );
  }

  async start(config: SoakWorkerConfig): Promise<void> {
    await this.ask({ type: 'start', config }, 'ready', 60_000);
    if (this.failure) throw new Error(this.failure);
  }

  async sample(): Promise<SoakWorkerSample | null> {
    const message = await this.ask({ type: 'sample' }, 'sample', 10_000).catch(() => null);
    return message?.type === 'sample' ? message.sample : null;
  }

  async stop(): Promise<void> {
    await this.ask({ type: 'stop' }, 'stopped', 60_000).catch((error: Error) => {
      this.failure ??= error.message;
      this.child.kill('SIGKILL');
    });
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

async function tableStats(
  client: pg.Client,
): Promise<
  Pick<SoakSample, 'tableMb' | 'heapMb' | 'indexesMb' | 'liveTuples' | 'deadTuples' | 'autovacuums' | 'backlog'>
> {
  const { rows } = await client.query<{
    total: string;
    heap: string;
    indexes: string;
    live: string;
    dead: string;
    autovacuums: string;
    backlog: string;
  }>(
    `SELECT pg_total_relation_size('${SCHEMA}.jobs')::text AS total,
            pg_relation_size('${SCHEMA}.jobs')::text AS heap,
            pg_indexes_size('${SCHEMA}.jobs')::text AS indexes,
            s.n_live_tup::text AS live, s.n_dead_tup::text AS dead, s.autovacuum_count::text AS autovacuums,
            ((SELECT count(*) FROM ${SCHEMA}.jobs WHERE state = 'running')
             + (SELECT count(*) FROM ${SCHEMA}.jobs WHERE state = 'pending' AND run_at <= now()))::text AS backlog
       FROM pg_stat_user_tables s WHERE s.schemaname = '${SCHEMA}' AND s.relname = 'jobs'`,
  );
  const row = rows[0];
  if (!row) throw new Error(`no statistics for ${SCHEMA}.jobs`);
  return {
    tableMb: Number(row.total) / MIB,
    heapMb: Number(row.heap) / MIB,
    indexesMb: Number(row.indexes) / MIB,
    liveTuples: Number(row.live),
    deadTuples: Number(row.dead),
    autovacuums: Number(row.autovacuums),
    backlog: Number(row.backlog),
  };
}

/**
 * Cumulative counters the soak reads as differences between samples: the pending claim index's
 * scans and the entries they returned, and the server sessions this database has seen started.
 */
async function counterReadings(client: pg.Client): Promise<{ scans: number; entries: number; sessions: number }> {
  const { rows } = await client.query<{ scans: string | null; entries: string | null; sessions: string | null }>(
    `SELECT i.idx_scan::text AS scans, i.idx_tup_read::text AS entries, d.sessions::text AS sessions
       FROM pg_stat_database d
       LEFT JOIN pg_stat_user_indexes i
         ON i.schemaname = '${SCHEMA}' AND i.indexrelname = 'jobs_pending_kind_claim_idx'
      WHERE d.datname = current_database()`,
  );
  const row = rows[0];
  const number = (text: string | null | undefined) => (text == null ? Number.NaN : Number(text));
  return { scans: number(row?.scans), entries: number(row?.entries), sessions: number(row?.sessions) };
}

/** ± tolerance around the median of the values (NaN dropped). */
function flatness(metric: string, values: number[], note: string): Flatness {
  const finite = values.filter(Number.isFinite);
  const mid = median(finite);
  if (finite.length < 2 || !(mid > 0)) {
    return {
      metric,
      judged: false,
      flat: null,
      median: mid,
      minPct: Number.NaN,
      maxPct: Number.NaN,
      note: `${note}; too few samples`,
    };
  }
  const minPct = (100 * (Math.min(...finite) - mid)) / mid;
  const maxPct = (100 * (Math.max(...finite) - mid)) / mid;
  const flat = Math.max(-minPct, maxPct) <= FLAT_TOLERANCE * 100;
  return { metric, judged: true, flat, median: mid, minPct, maxPct, note };
}

/**
 * The median of every run of `width` consecutive values (of all of them when there are fewer).
 * Only whole windows: a window cut short at the period's start would be one sample, or the median
 * of two, and one slow window there would read as a trend (a soak's first judged sample did).
 */
export function rollingMedian(values: readonly number[], width: number): number[] {
  if (values.length <= width) return [median([...values])];
  const medians: number[] = [];
  for (let end = width; end <= values.length; end += 1) medians.push(median(values.slice(end - width, end)));
  return medians;
}

/** The samples flatness is judged over (those after the first prune cycle), and how to name them. */
function judgedPeriod(samples: readonly SoakSample[], options: SoakOptions): { judged: SoakSample[]; period: string } {
  const firstPruneS = options.pruneIntervalMs / 1000;
  // The sample after the offer ended is the end state, not the steady life being judged.
  const judged = samples.filter((s) => !s.afterOffer && s.atS > firstPruneS + options.sampleSeconds);
  return { judged, period: `${judged.length} samples after the first prune cycle (${round(firstPruneS / 60)} min)` };
}

/** Claim p50's and p99's flatness over `samples` (p99 on a rolling median of 3, so one slow window is not a trend). */
function claimTimeFlatness(samples: readonly SoakSample[], period: string): Flatness[] {
  return [
    flatness(
      'claim p50',
      samples.map((s) => s.claimP50Ms),
      period,
    ),
    flatness(
      'claim p99',
      rollingMedian(
        samples.map((s) => s.claimP99Ms),
        3,
      ),
      `${period}, rolling median of 3`,
    ),
  ];
}

/** The flatness verdicts over the samples after the first prune cycle. */
export function judgeFlatness(samples: readonly SoakSample[], options: SoakOptions): Flatness[] {
  const { judged, period } = judgedPeriod(samples, options);
  if (judged.length < 2) {
    return ['claim p50', 'claim p99', 'worker RSS', 'table size'].map((metric) => ({
      metric,
      judged: false,
      flat: null,
      median: Number.NaN,
      minPct: Number.NaN,
      maxPct: Number.NaN,
      note: `the soak ended before a prune cycle and two samples more (${period})`,
    }));
  }
  const verdicts = [
    ...claimTimeFlatness(judged, period),
    flatness(
      'worker RSS',
      judged.map((s) => s.workerRssMb),
      period,
    ),
  ];
  const soakMs = options.minutes * 60_000;
  if (options.retentionMs + options.pruneIntervalMs >= soakMs) {
    verdicts.push({
      metric: 'table size',
      judged: false,
      flat: null,
      median: median(judged.map((s) => s.tableMb)),
      minPct: Number.NaN,
      maxPct: Number.NaN,
      note: `not judged: with ${round(options.retentionMs / 60_000)} min retention nothing finished in a ${options.minutes}-min soak is old enough to prune, so the table grows by design (pass --retention-ms below the soak length to watch pruning keep up)`,
    });
  } else {
    // Steady state only once the first rows aged out and a prune removed them.
    const steady = judged.filter((s) => s.atS * 1000 > options.retentionMs + options.pruneIntervalMs);
    verdicts.push(
      flatness(
        'table size',
        steady.map((s) => s.tableMb),
        `${steady.length} samples after retention + one prune interval (${round((options.retentionMs + options.pruneIntervalMs) / 60_000)} min)`,
      ),
    );
  }
  return verdicts;
}

/** A window the hypervisor stole this share (%) of the host's cores from is not one the machine left alone. */
export const QUIET_STEAL_PCT = 2;
/** Nor one where anything but the soak kept this share (%) of the cores busy. */
export const QUIET_OUTSIDE_PCT = 5;

/**
 * Claim time's flatness by the same rule, over the judged windows the machine left alone (host
 * steal and CPU outside the soak under {@link QUIET_STEAL_PCT} and {@link QUIET_OUTSIDE_PCT}), or
 * null when the soak did not measure them. Shown beside the verdicts, never instead of them: it
 * says whether the swings the verdict saw came from the machine.
 */
export function quietWindowFlatness(
  samples: readonly SoakSample[],
  options: SoakOptions,
): { quiet: number; judged: number; verdicts: Flatness[] } | null {
  const { judged } = judgedPeriod(samples, options);
  if (judged.some((s) => s.hostStealPct === undefined || s.outsideCpuPct === undefined)) return null;
  const quiet = judged.filter(
    (s) => (s.hostStealPct ?? 100) < QUIET_STEAL_PCT && (s.outsideCpuPct ?? 100) < QUIET_OUTSIDE_PCT,
  );
  const period = `${quiet.length} of the ${judged.length} judged samples`;
  return {
    quiet: quiet.length,
    judged: judged.length,
    verdicts: claimTimeFlatness(quiet, period),
  };
}

/** One measure shown beside claim time: its spread over the judged period and how it moved with claim p50. */
export interface ClaimTimeCompanion {
  metric: string;
  unit: string;
  median: number;
  min: number;
  max: number;
  /** Pearson's correlation with claim p50 over the judged samples (NaN where not measured). */
  withClaimP50: number;
}

/**
 * What moved with claim time over the judged period: the worker's, the database's and the
 * harness's CPU per job, the host's busy and stolen shares, the entries a pending-index scan
 * returned, the rows per claim. Shown, never judged: a claim-time swing that follows the host's
 * load (or steal) with the per-job costs flat is the machine's; one that follows the database's
 * CPU per job or the index's entries per scan is the table's or the code's.
 */
export function claimTimeCompanions(samples: readonly SoakSample[], options: SoakOptions): ClaimTimeCompanion[] {
  const { judged } = judgedPeriod(samples, options);
  const claimP50 = judged.map((s) => s.claimP50Ms);
  const measures: [string, string, (s: SoakSample) => number | undefined][] = [
    ['worker CPU per job', 'µs', (s) => s.workerCpuUsPerJob],
    ['database CPU per job', 'µs', (s) => s.databaseCpuUsPerJob],
    ['harness CPU per job', 'µs', (s) => s.harnessCpuUsPerJob],
    ['host busy', '%', (s) => s.hostBusyPct],
    ['host steal', '%', (s) => s.hostStealPct],
    ['CPU outside the soak', '%', (s) => s.outsideCpuPct],
    ['pending-index entries per scan', '', (s) => s.pendingIndexEntriesPerScan],
    ['rows per claim', '', (s) => s.rowsPerClaim],
    ['dead rows', '', (s) => s.deadTuples],
    ['sessions started', '', (s) => s.sessionsStarted],
  ];
  return measures.map(([metric, unit, pick]) => {
    const values = judged.map((s) => pick(s) ?? Number.NaN);
    const finite = values.filter(Number.isFinite);
    return {
      metric,
      unit,
      median: median(finite),
      min: finite.length > 0 ? Math.min(...finite) : Number.NaN,
      max: finite.length > 0 ? Math.max(...finite) : Number.NaN,
      withClaimP50: correlation(values, claimP50),
    };
  });
}

/** Runs the soak against a scratch database of its own and drops it afterwards. */
export async function runSoak(
  options: SoakOptions,
  command: string,
  log: (message: string) => void,
): Promise<SoakResult> {
  const database = scratchName('soak');
  const url = await recreateDatabase(database);
  const startedAt = new Date().toISOString();
  const total = Math.round(options.minutes * 60 * options.ratePerSec);
  const scheduledAt = new Float64Array(total);
  const startCounts = new Uint8Array(total);
  const samples: SoakSample[] = [];
  const prunes: SoakResult['prunes'] = [];
  const problems: string[] = [];
  let started = 0;
  let duplicates = 0;
  let strays = 0;
  let windowStartLatency: number[] = [];
  const onStarts = (pairs: number[]) => {
    for (let k = 0; k + 1 < pairs.length; k += 2) {
      const i = pairs[k]!;
      if (!(i >= 0 && i < total)) {
        strays += 1;
        continue;
      }
      if (startCounts[i]! > 0) {
        duplicates += 1;
        continue;
      }
      startCounts[i] = 1;
      started += 1;
      windowStartLatency.push(pairs[k + 1]! - scheduledAt[i]!);
    }
  };

  const submitter = await Docket.open({ url, schema: SCHEMA });
  const stats = new pg.Client({ connectionString: url });
  // The scratch database is dropped WITH (FORCE) at the end: a client still open then gets a
  // FATAL 57P01, which without a listener is an unhandled 'error' event that kills the harness.
  stats.on('error', () => {});
  await stats.connect();
  const worker = new SoakWorker(onStarts);
  let submitted = 0;
  let submitErrors = 0;
  let offered = 0;
  let windowCallMs: number[] = [];
  let unfinished = Number.NaN;
  let vacuums = 0;
  let vacuumTimer: NodeJS.Timeout | undefined;
  let statements: SoakStatement[] | null = null;
  const settings = await postgresSettings();
  const countingStatements = await resetStatements(stats);
  try {
    await worker.start({
      url,
      schema: SCHEMA,
      kind: KIND,
      concurrency: options.concurrency,
      retentionMs: options.retentionMs,
      pruneIntervalMs: options.pruneIntervalMs,
    });
    if (options.vacuumSeconds > 0) {
      const vacuumClient = new pg.Client({ connectionString: url });
      vacuumClient.on('error', () => {});
      await vacuumClient.connect();
      const vacuum = () => {
        vacuumTimer = setTimeout(() => {
          vacuumClient
            .query(`VACUUM (ANALYZE) ${SCHEMA}.jobs`)
            .then(
              () => {
                vacuums += 1;
              },
              (error: Error) => problems.push(`VACUUM failed: ${error.message}`),
            )
            .finally(() => {
              if (vacuumTimer) vacuum();
              else void vacuumClient.end();
            });
        }, options.vacuumSeconds * 1000);
      };
      vacuum();
    }
    const t0 = hostNowMs();
    const endAt = t0 + options.minutes * 60_000;
    let lastSampleAt = t0;
    let lastSubmitted = 0;
    let lastStarted = 0;
    let nextSampleAt = t0 + options.sampleSeconds * 1000;
    let lastDatabaseCpu = postgresCpuByPid();
    let lastHarnessCpu = process.cpuUsage();
    let lastHostCpu = hostCpuTimes();
    let lastCounters = await counterReadings(stats);

    const takeSample = async (afterOffer = false) => {
      const now = hostNowMs();
      const seconds = (now - lastSampleAt) / 1000;
      const databaseCpu = postgresCpuByPid();
      const harnessCpu = process.cpuUsage(lastHarnessCpu);
      lastHarnessCpu = process.cpuUsage();
      const hostCpu = hostCpuTimes();
      const host = hostCpuShares(lastHostCpu, hostCpu);
      const [fromWorker, table, counters] = await Promise.all([
        worker.sample(),
        tableStats(stats),
        counterReadings(stats),
      ]);
      const databaseMs = postgresCpuSinceMs(lastDatabaseCpu, databaseCpu);
      const workerMs = fromWorker?.cpuMs ?? Number.NaN;
      const harnessMs = (harnessCpu.user + harnessCpu.system) / 1000;
      const startedInWindow = started - lastStarted;
      const perJobUs = (ms: number) => (startedInWindow > 0 ? (1000 * ms) / startedInWindow : Number.NaN);
      const indexScans = counters.scans - lastCounters.scans;
      for (const prune of fromWorker?.prunes ?? []) {
        prunes.push({ atS: (prune.atMs - t0) / 1000, deleted: prune.deleted, ms: prune.ms });
      }
      const calls = distribution(windowCallMs);
      const latency = distribution(windowStartLatency);
      const sample: SoakSample = {
        atS: (now - t0) / 1000,
        submitted,
        submittedPerSec: (submitted - lastSubmitted) / seconds,
        submitCallP50Ms: calls.p50,
        submitCallP99Ms: calls.p99,
        started,
        startedPerSec: (started - lastStarted) / seconds,
        startLatencyP50Ms: latency.p50,
        startLatencyP99Ms: latency.p99,
        claims: fromWorker?.claims ?? Number.NaN,
        rowsPerClaim: fromWorker ? fromWorker.claimedRows / Math.max(1, fromWorker.claims) : Number.NaN,
        claimP50Ms: fromWorker?.claimP50Ms ?? Number.NaN,
        claimP99Ms: fromWorker?.claimP99Ms ?? Number.NaN,
        claimMaxMs: fromWorker?.claimMaxMs ?? Number.NaN,
        prunes: prunes.length,
        prunedRows: prunes.reduce((sum, p) => sum + p.deleted, 0),
        workerRssMb: (fromWorker?.rssBytes ?? Number.NaN) / MIB,
        workerHeapMb: (fromWorker?.heapUsedBytes ?? Number.NaN) / MIB,
        vacuums,
        ...table,
        workerCpuUsPerJob: perJobUs(workerMs),
        databaseCpuUsPerJob: perJobUs(databaseMs),
        harnessCpuUsPerJob: perJobUs(harnessMs),
        hostBusyPct: 100 * host.busy,
        hostStealPct: 100 * host.steal,
        outsideCpuPct:
          host.totalMs > 0 ? (100 * (host.busyMs - workerMs - databaseMs - harnessMs)) / host.totalMs : Number.NaN,
        pendingIndexEntriesPerScan:
          indexScans > 0 ? (counters.entries - lastCounters.entries) / indexScans : Number.NaN,
        sessionsStarted: counters.sessions - lastCounters.sessions,
        ...(afterOffer ? { afterOffer } : {}),
      };
      samples.push(sample);
      lastDatabaseCpu = databaseCpu;
      lastHostCpu = hostCpu;
      lastCounters = counters;
      windowCallMs = [];
      windowStartLatency = [];
      lastSampleAt = now;
      lastSubmitted = submitted;
      lastStarted = started;
      log(
        `soak ${afterOffer ? 'end' : fmtMin(sample.atS)}: submitted ${Math.round(sample.submittedPerSec)}/s, started ${Math.round(sample.startedPerSec)}/s, backlog ${sample.backlog}, claim p50 ${round(sample.claimP50Ms)} ms p99 ${round(sample.claimP99Ms)} ms, table ${round(sample.tableMb)} MiB (indexes ${round(sample.indexesMb)}), dead ${sample.deadTuples}, RSS ${round(sample.workerRssMb)} MiB, pruned ${sample.prunedRows}; CPU per job: worker ${round(sample.workerCpuUsPerJob ?? Number.NaN)} µs, database ${round(sample.databaseCpuUsPerJob ?? Number.NaN)} µs; host busy ${round(sample.hostBusyPct ?? Number.NaN)} %, steal ${round(sample.hostStealPct ?? Number.NaN)} %`,
      );
    };

    // Open loop: job i is due at t0 + i / rate; an arrival that finds every slot busy waits.
    const calls = new Set<Promise<void>>();
    let sampling: Promise<void> | null = null;
    for (let i = 0; i < total; ) {
      const now = hostNowMs();
      if (now >= nextSampleAt && !sampling) {
        nextSampleAt += options.sampleSeconds * 1000;
        sampling = takeSample().finally(() => {
          sampling = null;
        });
      }
      if (now >= endAt) break;
      const due = Math.min(total, Math.floor(((now - t0) * options.ratePerSec) / 1000) + 1);
      if (i >= due) {
        await sleep(1);
        continue;
      }
      if (calls.size >= IN_FLIGHT) {
        await Promise.race(calls);
        continue;
      }
      scheduledAt[i] = t0 + (i * 1000) / options.ratePerSec;
      const callStart = hostNowMs();
      offered += 1;
      const call = submitter
        .submit({ kind: KIND, payload: { i } })
        .then(
          () => {
            submitted += 1;
            windowCallMs.push(hostNowMs() - callStart);
          },
          (error: Error) => {
            submitErrors += 1;
            if (submitErrors <= 3) problems.push(`submit failed: ${error.message}`);
          },
        )
        .finally(() => calls.delete(call));
      calls.add(call);
      i += 1;
    }
    await Promise.all(calls);
    await sampling;
    // The last jobs: every submitted one must start; then nothing may stay due.
    const tailDeadline = hostNowMs() + 120_000;
    while (started < submitted && hostNowMs() < tailDeadline) await sleep(50);
    await takeSample(true);
    if (countingStatements) statements = await readStatements(stats, started);
    if (started < submitted)
      problems.push(`${submitted - started} submitted jobs never started within 120 s of the last submit`);
    if (worker.failure) problems.push(`worker: ${worker.failure}`);
  } finally {
    clearTimeout(vacuumTimer);
    vacuumTimer = undefined;
    await worker.stop();
    worker.kill();
    await submitter.close().catch(() => {});
    unfinished = await tableStats(stats)
      .then((t) => t.backlog)
      .catch(() => Number.NaN);
    await stats.end().catch(() => {});
    await dropDatabase(database).catch(() => {});
    if (unfinished > 0) problems.push(`${unfinished} jobs still due or running after the worker stopped`);
    if (duplicates > 0) problems.push(`${duplicates} duplicate handler starts (jobs ran twice)`);
    if (strays > 0) problems.push(`${strays} starts of jobs outside this soak`);
  }
  const totals = {
    offered,
    submitted,
    submitErrors,
    started,
    duplicates,
    strays,
    unfinished,
    achievedRatePerSec: submitted / (options.minutes * 60),
  };
  return {
    command,
    startedAt,
    finishedAt: new Date().toISOString(),
    options,
    postgresSettings: settings,
    samples,
    prunes,
    flatness: judgeFlatness(samples, options),
    statements,
    totals,
    problems,
  };
}

function fmtMin(seconds: number): string {
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, '0')}`;
}

function fmt(value: number): string {
  return Number.isFinite(value) ? round(value).toLocaleString('en-US') : '—';
}

/** The soak's table, as markdown (printed and written). */
export function soakMarkdown(result: SoakResult): string {
  const o = result.options;
  const lines = [
    '# Docket soak',
    '',
    `Generated by \`${result.command}\` from ${result.startedAt} to ${result.finishedAt}. Raw data: soak.json; charts in results/.`,
    '',
    `${o.ratePerSec.toLocaleString('en-US')} jobs/s offered for ${o.minutes} min as single \`submit()\` calls (Docket defaults, at most ${IN_FLIGHT} in flight, open loop) into one worker process: \`docket.worker({ concurrency: ${o.concurrency} })\`, every other option default. ${o.retentionMs === 0 ? 'No finished rows kept (retentionMs 0: each job deleted as it completes)' : `Retention of finished rows ${fmt(o.retentionMs / 60_000)} min${o.retentionMs === DEFAULT_RETENTION_MS ? ' (Docket default, 7 days)' : ''}`}; the worker's Docket prunes every ${fmt(o.pruneIntervalMs / 60_000)} min${o.pruneIntervalMs === DEFAULT_PRUNE_INTERVAL_MS ? ' (default)' : ''}. Sampled every ${o.sampleSeconds} s. PostgreSQL: ${Object.entries(
      result.postgresSettings,
    )
      .map(([k, v]) => `${k} = ${v}`)
      .join(
        ', ',
      )}${result.postgresSettings.autovacuum === 'off' ? ' (**autovacuum off**: dead rows are never reclaimed unless the harness vacuums)' : ''}; harness VACUUM (ANALYZE) of the jobs table: ${o.vacuumSeconds > 0 ? `every ${o.vacuumSeconds} s` : 'never'}. Claim times are measured inside the worker around each claim call (pool wait included); backlog = rows due or running; table = pg_total_relation_size (heap + indexes + TOAST).`,
    '',
    '| t | submitted/s | started/s | backlog | start p50 / p99 ms | claims | rows/claim | claim p50 / p99 / max ms | table MiB | heap MiB | indexes MiB | live rows | dead rows | autovacuums | harness vacuums | pruned rows (total) | worker RSS MiB | CPU µs per job: worker / database / harness | host busy / steal / outside the soak % | pending-index entries per scan | sessions started |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...result.samples.map(
      (s) =>
        `| ${s.afterOffer ? `end (${fmtMin(s.atS)})` : fmtMin(s.atS)} | ${fmt(s.submittedPerSec)} | ${fmt(s.startedPerSec)} | ${fmt(s.backlog)} | ${fmt(s.startLatencyP50Ms)} / ${fmt(s.startLatencyP99Ms)} | ${fmt(s.claims)} | ${fmt(s.rowsPerClaim)} | ${fmt(s.claimP50Ms)} / ${fmt(s.claimP99Ms)} / ${fmt(s.claimMaxMs)} | ${fmt(s.tableMb)} | ${fmt(s.heapMb)} | ${fmt(s.indexesMb)} | ${fmt(s.liveTuples)} | ${fmt(s.deadTuples)} | ${fmt(s.autovacuums)} | ${fmt(s.vacuums)} | ${fmt(s.prunedRows)} | ${fmt(s.workerRssMb)} | ${fmt(s.workerCpuUsPerJob ?? Number.NaN)} / ${fmt(s.databaseCpuUsPerJob ?? Number.NaN)} / ${fmt(s.harnessCpuUsPerJob ?? Number.NaN)} | ${fmt(s.hostBusyPct ?? Number.NaN)} / ${fmt(s.hostStealPct ?? Number.NaN)} / ${fmt(s.outsideCpuPct ?? Number.NaN)} | ${fmt(s.pendingIndexEntriesPerScan ?? Number.NaN)} | ${fmt(s.sessionsStarted ?? Number.NaN)} |`,
    ),
    '',
    `Prunes: ${result.prunes.length === 0 ? 'none ran' : result.prunes.map((p) => `${fmtMin(p.atS)} deleted ${fmt(p.deleted)} in ${fmt(p.ms)} ms`).join('; ')}.`,
    '',
    `Totals: ${fmt(result.totals.offered)} offered, ${fmt(result.totals.submitted)} submitted (${fmt(result.totals.achievedRatePerSec)}/s over the soak; ${result.totals.submitErrors} errors), ${fmt(result.totals.started)} started, ${result.totals.duplicates} duplicates, ${result.totals.strays} strays, ${fmt(result.totals.unfinished)} unfinished at the end.`,
    '',
    `Flatness (every sample within ± ${FLAT_TOLERANCE * 100} % of the period's median):`,
    '',
    '| metric | verdict | median | range around the median | period |',
    '|---|---|---|---|---|',
    ...result.flatness.map(
      (f) =>
        `| ${f.metric} | ${f.flat === null ? 'not judged' : f.flat ? 'flat' : '**not flat**'} | ${fmt(f.median)} | ${f.judged ? `${fmt(f.minPct)} % … +${fmt(f.maxPct)} %` : '—'} | ${f.note} |`,
    ),
    '',
    ...quietWindowLines(result),
    "What moved with claim time over the same period (shown, not judged; correlation is Pearson's r with claim p50 across the samples: a swing that follows the host's load or steal while the CPU per job holds still is the machine's, one that follows the database's CPU per job or the entries per scan is the table's or the code's):",
    '',
    '| measure | median | range | correlation with claim p50 |',
    '|---|---|---|---|',
    ...claimTimeCompanions(result.samples, o).map((c) => {
      const unit = c.unit === '' ? '' : ` ${c.unit}`;
      return Number.isFinite(c.median)
        ? `| ${c.metric} | ${fmt(c.median)}${unit} | ${fmt(c.min)} … ${fmt(c.max)}${unit} | ${Number.isFinite(c.withClaimP50) ? c.withClaimP50.toFixed(2) : '—'} |`
        : `| ${c.metric} | not measured in this soak | — | — |`;
    }),
    '',
    ...statementLines(result),
    `Backlog: ${backlogVerdict(result)}.`,
    '',
    result.problems.length > 0
      ? `Problems: ${result.problems.join('; ')}`
      : 'Problems: none; every job ran exactly once.',
    '',
  ];
  return lines.join('\n');
}

/** The report's line on claim time over the windows the machine left alone, if the soak measured them. */
function quietWindowLines(result: SoakResult): string[] {
  const quiet = quietWindowFlatness(result.samples, result.options);
  if (quiet === null) return [];
  const shown = quiet.verdicts.map((f) =>
    f.judged
      ? `${f.metric} median ${fmt(f.median)} ms, ${fmt(f.minPct)} % … +${fmt(f.maxPct)} %: ${f.flat ? 'flat' : 'not flat'}`
      : `${f.metric}: too few samples`,
  );
  return [
    `Over the ${quiet.quiet} of ${quiet.judged} judged windows the machine left alone (host steal under ${QUIET_STEAL_PCT} %, CPU outside the soak under ${QUIET_OUTSIDE_PCT} %), by the same rule: ${shown.join('; ')}. Shown beside the verdicts above, not instead of them.`,
    '',
  ];
}

/** The report's statements section: the database's time by statement, or why there is none. */
function statementLines(result: SoakResult): string[] {
  if (result.statements === undefined) return [];
  if (result.statements === null) {
    return [
      "The database's time by statement: not read (the server does not load pg_stat_statements, or its counters could not be reset for this database; point BENCH_PG_URL at a server that loads it).",
      '',
    ];
  }
  return [
    "The database's time by statement over the whole soak (pg_stat_statements, this soak's database; execution time only, not parsing, planning or commits; a stored statement's function call includes the statement it runs, listed on its own as well):",
    '',
    '| statement | calls | µs a call | rows a call | buffers a call | µs per job started |',
    '|---|---|---|---|---|---|',
    ...result.statements.map(
      (st) =>
        `| \`${st.query.replace(/\|/g, '\\|')}\` | ${fmt(st.calls)} | ${fmt(st.usPerCall)} | ${fmt(st.rowsPerCall)} | ${fmt(st.buffersPerCall)} | ${fmt(st.usPerJob)} |`,
    ),
    '',
  ];
}

/** "No backlog": every sample's backlog under one second of the offered rate, and the offer met. */
export function backlogVerdict(result: SoakResult): string {
  const limit = result.options.ratePerSec;
  const worst = Math.max(0, ...result.samples.map((s) => s.backlog));
  const offeredShare = result.totals.achievedRatePerSec / result.options.ratePerSec;
  const kept = worst <= limit && offeredShare >= 0.95;
  return `${kept ? 'none' : '**kept up: no**'} — largest sampled backlog ${fmt(worst)} rows (limit ${fmt(limit)}, one second of the offered rate); submits achieved ${fmt(100 * offeredShare)} % of the offered ${fmt(limit)}/s`;
}

/** Writes SOAK.md, soak.json and the charts into `outDir`; returns the paths written. */
export function writeSoakReport(result: SoakResult, outDir: string): string[] {
  mkdirSync(join(outDir, 'results'), { recursive: true });
  const at = (pick: (s: SoakSample) => number): [number, number][] => result.samples.map((s) => [s.atS, pick(s)]);
  const charts: [string, string][] = [
    [
      'soak-sizes.svg',
      timeSeriesChart('Soak: jobs table size', 'MiB', [
        { label: 'total', points: at((s) => s.tableMb) },
        { label: 'heap', points: at((s) => s.heapMb) },
        { label: 'indexes', points: at((s) => s.indexesMb) },
      ]),
    ],
    [
      'soak-claim.svg',
      timeSeriesChart('Soak: claim time (inside the worker)', 'ms', [
        { label: 'p50', points: at((s) => s.claimP50Ms) },
        { label: 'p99', points: at((s) => s.claimP99Ms) },
      ]),
    ],
    ['soak-rss.svg', timeSeriesChart('Soak: worker RSS', 'MiB', [{ label: 'RSS', points: at((s) => s.workerRssMb) }])],
    [
      'soak-rate.svg',
      timeSeriesChart('Soak: submits, starts and backlog', 'jobs/s, rows', [
        { label: 'submitted/s', points: at((s) => s.submittedPerSec) },
        { label: 'started/s', points: at((s) => s.startedPerSec) },
        { label: 'backlog rows', points: at((s) => s.backlog) },
      ]),
    ],
  ];
  const written: string[] = [];
  for (const [name, svg] of charts) {
    const path = join(outDir, 'results', name);
    writeFileSync(path, svg);
    written.push(path);
  }
  const md = join(outDir, 'SOAK.md');
  writeFileSync(md, `${soakMarkdown(result)}\n${charts.map(([name]) => `![${name}](results/${name})`).join('\n')}\n`);
  const json = join(outDir, 'soak.json');
  writeFileSync(json, `${JSON.stringify(result, null, 1)}\n`);
  return [md, json, ...written];
}
