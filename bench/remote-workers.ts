/**
 * The `remote-workers` workload: remote HTTP workers (docs/http-api.md, "Remote workers in any
 * language") against `docket serve` with its defaults (only `--db`, `--port 0` and `--log-level
 * warn`), each Docket system from its own checkout's CLI (`docket-baseline`: DOCKET_BASELINE's, as
 * in the http-submit workload), on a fresh store each run.
 *
 * The workers run in one child process (bench/remote-worker-clients.ts), not in the harness, whose
 * event loop submits: each a loop claiming with `limit`, `waitMs: 5000` and `kinds: ["bench.noop"]`,
 * then completing each claimed job by its own request, all of one claim's at once. One run has
 * three phases on the same server, each its own record (`params.phase`):
 *
 * - `drain`: `jobs` submitted before any worker runs (library `submitMany`, {@link SUBMIT_BATCH} a
 *   call), then `workers` workers claiming up to `limit`; jobs/s from the first claim to the last
 *   completion.
 * - `stream`: `workers` workers waiting first, then the harness submits `ratePerSec` jobs a second
 *   for `durationMs`, each due now, one library `submit()` each, open loop (a submit starts on
 *   schedule whether or not earlier ones returned); lateness is the claim answer's `Date.now()`
 *   minus the job's `runAt` (the database's clock, which is this host's).
 * - `delayed-stream`: the same, each submit with `delayMs`: lateness against the run time asked for.
 *
 * A phase ends when every one of its jobs was completed once (cap: `capMs` from its start). Per
 * phase: the server process's CPU (user + system, /proc) over the phase per job; PostgreSQL's
 * committed transactions in the scratch database (`pg_stat_database.xact_commit`, the harness's
 * submits included) per job, read `statsFlushMs` after the phase ended, since a backend that
 * flushed its counters less than a second before keeps the rest up to 10 s (PostgreSQL 15); claim
 * requests per job; the client process's CPU per job. A job completed twice or never, a stray, a
 * stale completion or a failed request fails the phase; the phases after a phase that did not end
 * ok are not run (their jobs would meet its leftovers). The server is stopped (SIGTERM, its exit
 * awaited) and the store must hold no due job afterwards.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Docket } from '../src/docket.js';
import { importDocket } from './checkouts.js';
import { docketServeTarget, type HttpSubmitTarget, ServerChild, STOP_TIMEOUT_MS, tsxCommand } from './http-submit.js';
import { databaseNameOf, hostNowMs, xactCommits } from './pg-admin.js';
import type { FromClients, PhaseReport, PhaseSpec, ToClients } from './remote-worker-clients.js';
import { distribution } from './stats.js';
import { DOCKET_BENCH_KIND, DOCKET_BENCH_SCHEMA } from './systems/docket.js';
import { processCpuMs, sleep, withTimeout } from './worker-process.js';
import { type Contender, fail, prefixed, type RunOptions, type RunRecord, record } from './workloads.js';

const CLIENTS_ENTRY = fileURLToPath(new URL('./remote-worker-clients.ts', import.meta.url));

/** Jobs per `submitMany` call of the drain's backlog. */
const SUBMIT_BATCH = 1_000;
/** Every claim's long poll, ms. */
const WAIT_MS = 5_000;
/** After the stream's workers sent their first claims, before the phase starts: their claims park. */
const PARK_MS = 1_000;
/** How long the client process may take to start its workers, or to stop them. */
const CLIENT_TIMEOUT_MS = 30_000;

/** The workload's sizes (run.ts SIZES.remoteWorkers). */
export interface RemoteWorkersSizes {
  drain: { jobs: number; workers: number; limit: number; capMs: number };
  stream: { ratePerSec: number; durationMs: number; workers: number; limit: number; capMs: number };
  /** The delayed stream's `delayMs` on each submit. */
  delayMs: number;
  /**
   * PostgreSQL 15 flushes a backend's counters when it goes idle, but at most once a second; what
   * it held back then waits for its idle timer, 10 s. A phase's transaction count ends this long
   * after the phase (its workers stopped; an idle server commits nothing): 11 s in a full run. 0:
   * no count (a smoke run, which measures nothing, does not wait; a shorter wait would count short).
   */
  statsFlushMs: number;
}

/** The phases of a run, in order; each run's records come in this order. */
export const REMOTE_WORKER_PHASES = ['drain', 'stream', 'delayed-stream'] as const;
type PhaseName = (typeof REMOTE_WORKER_PHASES)[number];

/** The jobs of one stream phase. */
function streamJobs(sizes: RemoteWorkersSizes): number {
  return Math.max(1, Math.round((sizes.stream.ratePerSec * sizes.stream.durationMs) / 1000));
}

/** Each phase's params, in {@link REMOTE_WORKER_PHASES} order (for the harness's `alternate`). */
export function remoteWorkersParams(sizes: RemoteWorkersSizes): RunRecord['params'][] {
  const { ratePerSec, durationMs, workers, limit } = sizes.stream;
  const stream = { jobs: streamJobs(sizes), ratePerSec, durationMs, workers, limit, waitMs: WAIT_MS };
  return [
    {
      phase: 'drain',
      jobs: sizes.drain.jobs,
      workers: sizes.drain.workers,
      limit: sizes.drain.limit,
      waitMs: WAIT_MS,
      statsFlushMs: sizes.statsFlushMs,
    },
    { phase: 'stream', ...stream, statsFlushMs: sizes.statsFlushMs },
    { phase: 'delayed-stream', ...stream, delayMs: sizes.delayMs, statsFlushMs: sizes.statsFlushMs },
  ];
}

/**
 * `docket serve --db <store> --port 0 --log-level warn` from the Docket driver's checkout (on its
 * Node), the schema its default (`docket`, the drivers' {@link DOCKET_BENCH_SCHEMA}).
 */
export function remoteServeTarget(contender: Contender): HttpSubmitTarget {
  const base = docketServeTarget(contender);
  const { cwd, node } = base.command;
  return {
    ...base,
    command: tsxCommand(cwd, node, 'src/cli/main.ts', [
      'serve',
      '--db',
      contender.config.databaseUrl,
      '--port',
      '0',
      '--log-level',
      'warn',
    ]),
  };
}

/** The client process: one phase of workers at a time. */
class ClientProcess {
  private readonly child: ChildProcess;
  private waiters = new Map<FromClients['type'], (message: FromClients) => void>();
  private failure: string | null = null;
  private exited = false;

  constructor() {
    this.child = fork(CLIENTS_ENTRY, [], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (message: FromClients) => {
      if (message.type === 'error') this.failure ??= message.message;
      const waiter = this.waiters.get(message.type);
      this.waiters.delete(message.type);
      waiter?.(message);
    });
    this.child.on('exit', (code, signal) => {
      this.exited = true;
      this.failure ??= `the client process exited (code ${code}, signal ${signal})`;
      for (const waiter of this.waiters.values()) waiter({ type: 'error', message: this.failure });
      this.waiters.clear();
    });
  }

  /** An error the client process reported, or its unexpected exit. */
  get error(): string | null {
    return this.failure;
  }

  /** Resolves with the next message of `type` (or an error), rejecting after `timeoutMs`. */
  private next(type: FromClients['type'], timeoutMs: number): Promise<FromClients> {
    let waiter: ((message: FromClients) => void) | undefined;
    const answer = new Promise<FromClients>((resolve) => {
      waiter = resolve;
      if (this.exited) resolve({ type: 'error', message: this.failure ?? 'the client process exited' });
      else this.waiters.set(type, resolve);
    });
    return withTimeout(answer, timeoutMs, `the client process did not send ${type}`).finally(() => {
      // Only its own: a later wait for the same message may have replaced it.
      if (this.waiters.get(type) === waiter) this.waiters.delete(type);
    });
  }

  private send(message: ToClients): void {
    if (this.child.connected) this.child.send(message);
  }

  /** Starts a phase's workers; with `untilWaiting`, resolves once each sent its first claim. */
  async start(spec: PhaseSpec, untilWaiting: boolean): Promise<void> {
    const waiting = this.next('waiting', CLIENT_TIMEOUT_MS);
    this.send({ type: 'start', spec });
    if (!untilWaiting) {
      waiting.catch(() => {});
      return;
    }
    const message = await waiting;
    if (message.type === 'error') throw new Error(message.message);
  }

  /** Whether the phase's workers completed all its jobs within `timeoutMs`. */
  async done(timeoutMs: number): Promise<boolean> {
    try {
      const message = await this.next('done', timeoutMs);
      if (message.type === 'error') throw new Error(message.message);
      return true;
    } catch (error) {
      if (this.failure) throw error;
      return false;
    }
  }

  /** Stops the phase's workers; resolves with what they did. */
  async stop(): Promise<PhaseReport> {
    const stopped = this.next('stopped', CLIENT_TIMEOUT_MS);
    this.send({ type: 'stop' });
    const message = await stopped;
    if (message.type !== 'stopped') throw new Error(message.type === 'error' ? message.message : 'no report');
    return message.report;
  }

  /** Asks the process to exit; kills it if it has not within 5 s. */
  async close(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.send({ type: 'exit' });
    await withTimeout(exited, 5_000, 'the client process did not exit').catch(() => this.child.kill('SIGKILL'));
  }
}

/**
 * Starts `total` calls at `ratePerSec`, open loop: call `i` at `t0 + i / rate` whether or not the
 * ones before returned. Resolves when all settled, with the offered rate and the calls' errors.
 */
async function offerSubmits(
  total: number,
  ratePerSec: number,
  call: (i: number) => Promise<unknown>,
): Promise<{ offeredPerSec: number; errors: string[] }> {
  const errors: string[] = [];
  const calls: Promise<void>[] = [];
  const t0 = hostNowMs();
  for (let i = 0; i < total; i += 1) {
    const wait = t0 + (i * 1000) / ratePerSec - hostNowMs();
    if (wait > 0) await sleep(wait);
    calls.push(
      call(i).then(
        () => {},
        (error: Error) => {
          errors.push(error.message);
        },
      ),
    );
  }
  const offeredMs = hostNowMs() - t0;
  await Promise.all(calls);
  return { offeredPerSec: total > 1 ? ((total - 1) * 1000) / offeredMs : Number.NaN, errors };
}

/** The library a phase submits through: the server's checkout's Docket. */
type Submitter = Docket;

interface RunContext {
  url: URL;
  server: ServerChild;
  clients: ClientProcess;
  docket: Submitter;
  /** The scratch database's name (PostgreSQL), or null (SQLite: no transaction count). */
  database: string | null;
}

/** One phase on a running server; fills `run`. */
async function runPhase(ctx: RunContext, run: RunRecord, phase: PhaseName, sizes: RemoteWorkersSizes): Promise<void> {
  const drain = phase === 'drain';
  const jobs = drain ? sizes.drain.jobs : streamJobs(sizes);
  const { workers, limit, capMs } = drain ? sizes.drain : sizes.stream;
  const spec: PhaseSpec = {
    phase,
    url: ctx.url.origin,
    workers,
    limit,
    waitMs: WAIT_MS,
    kinds: [DOCKET_BENCH_KIND],
    expected: jobs,
  };
  const payload = (i: number) => ({ i, phase });
  if (drain) {
    for (let k = 0; k < jobs; k += SUBMIT_BATCH) {
      const batch = Array.from({ length: Math.min(SUBMIT_BATCH, jobs - k) }, (_, j) => ({
        kind: DOCKET_BENCH_KIND,
        payload: payload(k + j),
      }));
      await ctx.docket.submitMany(batch);
    }
  } else {
    // The workers wait (long poll) before the first submit.
    await ctx.clients.start(spec, true);
    await sleep(PARK_MS);
  }
  const database = sizes.statsFlushMs > 0 ? ctx.database : null;
  const xactBefore = database ? await xactCommits(database) : Number.NaN;
  const cpuBeforeMs = processCpuMs(ctx.server.pid);
  const t0 = hostNowMs();
  if (drain) await ctx.clients.start(spec, false);
  else {
    const delay = phase === 'delayed-stream' ? { delayMs: sizes.delayMs } : {};
    const offered = await offerSubmits(jobs, sizes.stream.ratePerSec, (i) =>
      ctx.docket.submit({ kind: DOCKET_BENCH_KIND, payload: payload(i), ...delay }),
    );
    run.metrics.offeredPerSec = offered.offeredPerSec;
    if (offered.errors.length > 0) fail(run, `${offered.errors.length} submits failed: ${offered.errors[0]}`, 'error');
  }
  const allDone = await ctx.clients.done(Math.max(0, t0 + capMs - hostNowMs()));
  const endedAt = hostNowMs();
  const serverCpuMs = processCpuMs(ctx.server.pid) - cpuBeforeMs;
  const report = await ctx.clients.stop();
  if (database) await sleep(Math.max(0, endedAt + sizes.statsFlushMs - hostNowMs()));
  const xact = database ? (await xactCommits(database)) - xactBefore : Number.NaN;

  if (!allDone)
    fail(run, `${jobs - report.completed} of ${jobs} jobs never completed within the ${capMs / 1000} s cap`);
  if (report.duplicates > 0) fail(run, `${report.duplicates} jobs completed twice`);
  if (report.strays > 0) fail(run, `${report.strays} completed jobs outside this phase`);
  if (report.stale > 0) fail(run, `${report.stale} completions answered 409 stale`);
  if (report.errorCount > 0) fail(run, `${report.errorCount} requests failed: ${report.errors.join('; ')}`, 'error');
  if (ctx.server.crashed) fail(run, `the server exited during the phase: ${ctx.server.diagnostics()}`, 'error');
  Object.assign(run.metrics, {
    completed: report.completed,
    duplicates: report.duplicates,
    strays: report.strays,
    stale: report.stale,
    claims: report.claims,
    emptyClaims: report.emptyClaims,
    claimsPerJob: report.claims / jobs,
    completeRetries: report.completeRetries,
    seconds: (endedAt - t0) / 1000,
    clientCpuMsPerJob: report.clientCpuMs / jobs,
    ...(Number.isFinite(serverCpuMs) ? { serverCpuMsPerJob: serverCpuMs / jobs } : {}),
    ...(Number.isFinite(xact) ? { xactPerJob: xact / jobs, xactCommits: xact } : {}),
  });
  if (drain) {
    if (allDone) run.metrics.jobsPerSec = report.completed / (report.elapsedMs / 1000);
  } else Object.assign(run.metrics, prefixed('lateness', distribution(report.lateness)));
}

/**
 * One run of the three phases on one server: the store reset, the server and the client process
 * started, each phase in turn, everything stopped (also when a phase failed), and the store
 * checked to hold no due job. Returns one record per phase, in {@link REMOTE_WORKER_PHASES} order.
 */
export async function remoteWorkersRun(
  target: HttpSubmitTarget,
  sizes: RemoteWorkersSizes,
  options: RunOptions & { logDir: string },
): Promise<RunRecord[]> {
  const params = remoteWorkersParams(sizes);
  const runs = REMOTE_WORKER_PHASES.map((_, k) => record(target, 'remote-workers', options, params[k]!));
  const store = target.store;
  let server: ServerChild | undefined;
  let clients: ClientProcess | undefined;
  let docket: Submitter | undefined;
  let wallStart = hostNowMs();
  let phase = 0;
  try {
    if (!store) throw new Error('the remote-workers workload needs a Docket store');
    await store.module.reset(store.config);
    const logPath = join(options.logDir, `${target.module.name}-r${options.round}-remote-workers.log`);
    const started = await ServerChild.start(target.command, logPath);
    server = started.server;
    clients = new ClientProcess();
    docket = await (await importDocket(target.command.cwd)).open({
      url: store.config.databaseUrl,
      schema: DOCKET_BENCH_SCHEMA,
    });
    const url = store.config.databaseUrl;
    const ctx: RunContext = {
      url: started.url,
      server,
      clients,
      docket,
      database: url.startsWith('postgres') ? databaseNameOf(url) : null,
    };
    for (; phase < REMOTE_WORKER_PHASES.length; phase += 1) {
      const run = runs[phase]!;
      wallStart = hostNowMs();
      try {
        await runPhase(ctx, run, REMOTE_WORKER_PHASES[phase]!, sizes);
      } finally {
        run.wallMs = hostNowMs() - wallStart;
      }
      if (run.status !== 'ok') {
        for (const later of runs.slice(phase + 1))
          fail(later, `not run: the ${REMOTE_WORKER_PHASES[phase]} phase ended ${run.status}`, 'error');
        phase = REMOTE_WORKER_PHASES.length;
      }
    }
  } catch (error) {
    const message = (error as Error).message;
    const run = runs[Math.min(phase, runs.length - 1)]!;
    fail(run, message, 'error');
    run.wallMs = hostNowMs() - wallStart;
    for (const later of runs.slice(phase + 1)) fail(later, `not run: ${message}`, 'error');
  } finally {
    await docket?.close().catch(() => {});
    await clients?.close();
    if (clients?.error && !clients.error.startsWith('the client process exited'))
      for (const run of runs) fail(run, `the client process: ${clients.error}`, 'error');
  }
  if (server) {
    const stopped = await server.stop();
    const problem = stopped.killed
      ? `the server did not exit within ${STOP_TIMEOUT_MS} ms of SIGTERM`
      : stopped.code !== 0
        ? `the server exited with code ${stopped.code} (signal ${stopped.signal}): ${server.diagnostics()}`
        : null;
    if (problem) for (const run of runs) fail(run, problem, 'error');
  }
  // Counted once the server is gone: every job of every phase that ran was completed.
  if (store && server && runs.every((run) => run.status === 'ok')) {
    const handle = await store.module.openStore(store.config);
    try {
      const left = await handle.remainingDue();
      if (left !== 0) for (const run of runs) fail(run, `${left} jobs still due or running after the run`);
    } finally {
      await handle.close();
    }
  }
  return runs;
}
