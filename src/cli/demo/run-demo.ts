/**
 * `docket demo`: the story of docs/design.md, live, with real worker processes on the real store.
 *
 *   1. Two jobs are submitted, one due now and one a few seconds ahead. Child A (a separate
 *      process) claims each under a lease with fencing token 1; the first job runs longer than one
 *      lease and survives only because heartbeats extend it.
 *   2. Child A is killed with SIGKILL while it runs the second job. Nobody heartbeats it, the lease
 *      lapses, the row is simply due again, and another worker completes it with token 2.
 *   3. Child B is frozen with SIGSTOP (a long GC pause) while it holds a third job. Its lease
 *      lapses, another worker completes the job with token 2, and when child B resumes its write
 *      with token 1 is refused. A completion carrying token 1 is then replayed through the Store:
 *      it answers `stale` and changes nothing.
 *   4. Meanwhile a handler that always throws backs off 2, 4, 8, 16 s and is parked in the
 *      dead-letter table, shown with every attempt's error.
 *
 * The demo checks its own story against the store (through Docket's admin operations) and
 * returns false if any step did not happen, so `docket demo` exits 1.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Docket } from '../../docket.js';
import type { Job } from '../../job/job.js';
import { inspectStore, parseStoreUrl } from '../../store/open-store.js';
import { usageError } from '../cli-error.js';
import { schemaFromUrl } from '../open-cli-docket.js';
import { DEMO_KINDS, DEMO_QUEUES, type DemoQueues, FLAKY_ERROR, registerDemoHandlers } from './demo-handlers.js';
import { type DemoSettings, demoRetryDelaysMs, demoSettings, describeDemoSettings } from './demo-settings.js';
import { DemoTimeline, formatSeconds, StoryError, type StoryEvent } from './demo-timeline.js';
import type { DemoWorkerConfig, DemoWorkerMessage } from './demo-worker.js';

/** The demo's default store: a fresh SQLite file in the working directory. */
export const DEMO_DEFAULT_URL = 'sqlite:./docket-demo.db';

/** What `docket demo` was asked for. */
export interface DemoOptions {
  db?: string | undefined;
  fast?: boolean | undefined;
  /** Use a store the demo did not create (SQLite: delete it; PostgreSQL: add the demo's jobs to it). */
  force?: boolean | undefined;
  /** Where lines go; stdout by default. */
  write?: ((line: string) => void) | undefined;
}

/** One story check and whether it held. */
interface Check {
  ok: boolean;
  text: string;
}

/** A child worker process and what it reported. */
interface ChildWorker {
  name: string;
  process: ChildProcess;
  pid: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr: string[];
}

/** Runs the demo; resolves true when every step of the story happened and checked out. */
export async function runDemo(options: DemoOptions = {}): Promise<boolean> {
  const settings = demoSettings(options.fast ?? false);
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const url = options.db ?? DEMO_DEFAULT_URL;
  const schema = schemaFromUrl(url);
  const { queues, fresh } = await prepareDemoDatabase(url, options.force ?? false);
  const timeline = new DemoTimeline(write, settings.maxAttempts);
  const children: ChildWorker[] = [];
  const stopOnSignal = () => {
    for (const child of children) killQuietly(child, 'SIGKILL');
    process.exit(130);
  };
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);

  printHeader(timeline, url, fresh, settings, queues);
  const docket = await Docket.open({ url, ...(schema ? { schema } : {}) });
  try {
    // The mark that lets the next run reuse this store without --force: only the demo creates it.
    await docket.pauseQueue(DEMO_MARKER_QUEUE);
    registerDemoHandlers(docket, settings);
    relayLocalEvents(docket, timeline);
    const checks = await playStory(docket, timeline, settings, queues, url, schema, children);
    return printVerdict(timeline, checks, url);
  } catch (error) {
    if (!(error instanceof StoryError)) throw error;
    timeline.note();
    timeline.note(`DEMO FAILED: ${error.message}`);
    for (const child of children) {
      if (child.stderr.length > 0) timeline.note(`${child.name} stderr:\n${child.stderr.join('')}`);
    }
    return false;
  } finally {
    process.off('SIGINT', stopOnSignal);
    process.off('SIGTERM', stopOnSignal);
    for (const child of children) killQuietly(child, 'SIGKILL');
    await docket.close();
  }
}

/**
 * A paused queue the demo creates in every store it sets up (nothing is ever submitted to it). A
 * store without it was not created by the demo, so the demo refuses it unless told `--force`.
 */
export const DEMO_MARKER_QUEUE = 'docket-demo.created-by-docket-demo';

/**
 * Makes sure the demo may use `url` and prepares it: a store that does not exist yet, or one an
 * earlier demo run created (it holds {@link DEMO_MARKER_QUEUE}), is used; anything else (a user's
 * jobs database, a file that is not Docket's) is refused with exit 2 unless `force`. A SQLite
 * file is then deleted so each run starts empty; a PostgreSQL schema is kept and the run gets
 * its own queue names. Reads only, until it has decided.
 */
export async function prepareDemoDatabase(
  url: string,
  force: boolean,
): Promise<{ queues: DemoQueues; fresh: boolean }> {
  const location = parseStoreUrl(url);
  if (location.kind === 'sqlite' && location.path === ':memory:') {
    throw usageError('--db: the demo runs several processes on one store; sqlite::memory: cannot be shared');
  }
  const schema = schemaFromUrl(url);
  if (!force) {
    const inspection = await inspectStore(url, { schema, connectTimeoutMs: 5000 }).catch((error: unknown) => {
      // SQLite answers "file is not a database" for someone else's file: refuse it like any other.
      if (location.kind === 'sqlite' && existsSync(location.path)) {
        throw usageError(
          `--db: ${url} exists and is not a Docket store (${(error as Error).message}); pass another --db, or --force to delete it anyway`,
        );
      }
      throw error;
    });
    if (inspection.exists) {
      const what =
        location.kind === 'sqlite' ? 'the demo deletes and recreates its store' : 'the demo adds its jobs to it';
      const refuse = (why: string) =>
        usageError(
          `--db: ${url} ${why}; ${what}, so it only reuses a store an earlier \`docket demo\` created. ` +
            'Pass another --db (a new file or schema), or --force to use this one anyway',
        );
      if (!inspection.hasDocketSchema) throw refuse('exists and is not a Docket store');
      if (inspection.pending.length > 0)
        throw refuse('is a Docket store the demo did not create (its schema is outdated)');
      const docket = await Docket.open({ url, ...(schema ? { schema } : {}) });
      try {
        const marked = (await docket.listQueues()).some((queue) => queue.name === DEMO_MARKER_QUEUE);
        if (!marked) throw refuse('is a Docket store the demo did not create');
      } finally {
        await docket.close();
      }
    }
  }
  if (location.kind === 'sqlite') {
    for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(`${location.path}${suffix}`, { force: true });
    return { queues: DEMO_QUEUES, fresh: true };
  }
  // A shared database may hold an earlier run's jobs; unique queue names keep this run's story its own.
  const run = Date.now().toString(36);
  return {
    queues: { main: `main-${run}`, stall: `stall-${run}`, poison: `poison-${run}` },
    fresh: false,
  };
}

function printHeader(
  timeline: DemoTimeline,
  url: string,
  fresh: boolean,
  settings: DemoSettings,
  queues: DemoQueues,
): void {
  const delays = demoRetryDelaysMs(settings).map((ms) => ms / 1000);
  timeline.note('Docket live demo: leases, fencing tokens, backoff and the dead-letter table, with real processes');
  timeline.note(`  store     ${url}${fresh ? ' (a fresh file, deleted and recreated for this run)' : ''}`);
  timeline.note(`  settings  ${describeDemoSettings(settings)}`);
  timeline.note(`  story     a job whose handler always throws backs off ${delays.join(', ')} s, then is parked;`);
  timeline.note('            meanwhile a job runs longer than one lease, kept alive by heartbeats;');
  timeline.note(
    `            a job due ${settings.aheadMs / 1000} s ahead loses its worker process to SIGKILL mid-job;`,
  );
  timeline.note('            a job whose worker process is frozen (SIGSTOP) past its lease is taken over.');
  timeline.note(
    `  workers   child-A and child-B are separate processes (queues ${queues.main} and ${queues.stall});` +
      ' local-* run inside this process',
  );
  timeline.note();
}

/** Prints the events of this process's workers on the timeline. */
function relayLocalEvents(docket: Docket, timeline: DemoTimeline): void {
  docket.events.on('claimed', ({ job, workerId }) =>
    timeline.record({
      event: 'claimed',
      workerId,
      jobId: job.id,
      token: job.token,
      attempt: job.attempts,
      leaseUntil: job.leaseUntil,
    }),
  );
  docket.events.on('completed', ({ job, workerId, durationMs }) =>
    timeline.record({ event: 'completed', workerId, jobId: job.id, token: job.token, durationMs }),
  );
  docket.events.on('failed', ({ job, workerId, error, retryAt }) =>
    timeline.record({
      event: 'failed',
      workerId,
      jobId: job.id,
      token: job.token,
      attempt: job.attempts,
      detail: error.message,
      retryAt,
    }),
  );
  docket.events.on('parked', ({ job, workerId }) =>
    timeline.record({ event: 'parked', workerId, jobId: job.id, token: job.token, attempt: job.attempts }),
  );
  docket.events.on('stale', ({ job, workerId, operation }) =>
    timeline.record({ event: 'stale', workerId, jobId: job.id, token: job.token, detail: operation }),
  );
  docket.events.on('leaseLost', ({ job, workerId, reason }) =>
    timeline.record({ event: 'leaseLost', workerId, jobId: job.id, token: job.token, detail: reason }),
  );
  docket.events.on('error', ({ error, operation, workerId }) =>
    timeline.record({
      event: 'error',
      workerId: workerId ?? 'docket',
      detail: `${operation}: ${error instanceof Error ? error.message : String(error)}`,
    }),
  );
}

async function playStory(
  docket: Docket,
  timeline: DemoTimeline,
  settings: DemoSettings,
  queues: DemoQueues,
  url: string,
  schema: string | undefined,
  children: ChildWorker[],
): Promise<Check[]> {
  const checks: Check[] = [];
  const check = (ok: boolean, text: string) => checks.push({ ok, text });
  const workerOptions = {
    leaseMs: settings.leaseMs,
    heartbeatIntervalMs: settings.heartbeatIntervalMs,
    pollIntervalMs: settings.pollIntervalMs,
    shutdownGraceMs: settings.reportJobMs * 2,
  };
  // Generous bounds: a child's start includes compiling TypeScript, slow on a busy 2-core machine.
  const startupMs = 30_000;
  const lapseMs = settings.leaseMs * 3 + 10_000;
  const is = (event: StoryEvent['event'], jobId: string, workerId?: string) => (e: StoryEvent) =>
    e.event === event && e.jobId === jobId && (workerId === undefined || e.workerId === workerId);

  const submit = async (kind: string, queue: string, extra: { delayMs?: number } = {}) => {
    const result = await docket.submit({
      kind,
      queue,
      payload: { demo: true },
      maxAttempts: settings.maxAttempts,
      retry: { baseDelayMs: settings.retryBaseDelayMs, factor: 2, jitterRatio: 0 },
      ...extra,
    });
    timeline.nameJob(result.id, kind);
    const due = extra.delayMs ? `due at ${timeline.at(result.runAt)}` : 'due now';
    timeline.line('submit', `job ${result.id} (${kind}) on queue ${queue}, ${due}`);
    return result;
  };

  // The poison job first: its 30 s of backoff plays out while the rest of the story runs.
  const job3 = await submit(DEMO_KINDS.flaky, queues.poison);
  const poisonWorker = docket.worker({ ...workerOptions, id: 'local-poison', queues: [queues.poison], concurrency: 1 });
  await poisonWorker.start();
  const spawnChild = (name: string, queue: string) => {
    const child = spawnDemoWorker({ url, schema, name, queue, settings }, timeline);
    children.push(child);
    timeline.line('spawn', `${name}: worker process pid ${child.pid} on queue ${queue}`);
    return child;
  };
  const childA = spawnChild('child-A', queues.main);
  const childB = spawnChild('child-B', queues.stall);
  // Submitting only once child-A polls keeps the story's timing independent of process start-up.
  await timeline.waitFor('child-A ready', (e) => e.event === 'ready' && e.workerId.startsWith('child-A'), startupMs);
  const job1 = await submit(DEMO_KINDS.long, queues.main);
  const job2 = await submit(DEMO_KINDS.report, queues.main, { delayMs: settings.aheadMs });

  // 1. Claimed under a lease, kept alive by heartbeats.
  const claim1 = await timeline.waitFor(`job ${job1.id} claimed by child-A`, is('claimed', job1.id), startupMs);
  const done1 = await timeline.waitFor(
    `job ${job1.id} completed`,
    is('completed', job1.id),
    settings.longJobMs + lapseMs,
  );
  timeline.line(
    'note',
    `job ${job1.id} ran ${formatSeconds(done1.durationMs ?? 0)} on a ${formatSeconds(settings.leaseMs)} lease: heartbeats every ${settings.heartbeatIntervalMs} ms kept it`,
  );
  check(
    claim1.workerId === done1.workerId && claim1.token === 1 && done1.token === 1,
    `job ${job1.id} was claimed under a lease with token 1 and completed by the worker that claimed it`,
  );
  check((done1.durationMs ?? 0) > settings.leaseMs, `job ${job1.id} outlived its lease because heartbeats extended it`);

  // 2. A worker dies mid-job; the lease lapses and another worker finishes with token 2.
  const started2 = await timeline.waitFor(
    `job ${job2.id} started on child-A`,
    (e) => e.event === 'started' && e.jobId === job2.id,
    settings.aheadMs + lapseMs,
  );
  await sleep(settings.killAfterMs);
  killQuietly(childA, 'SIGKILL');
  const exitA = await childA.exited;
  timeline.line(
    'kill -9',
    `child-A (pid ${childA.pid}) killed mid-job while running job ${job2.id} with token ${started2.token} (exit signal ${exitA.signal})`,
  );
  const orphan = await docket.getJob(job2.id);
  if (orphan?.leaseUntil) {
    timeline.line(
      'note',
      `job ${job2.id} is still '${orphan.state}' under token ${orphan.token}; nobody heartbeats it, its lease ends at ${timeline.at(orphan.leaseUntil)}`,
    );
  }
  const rescueWorker = docket.worker({ ...workerOptions, id: 'local-rescue', queues: [queues.main], concurrency: 2 });
  await rescueWorker.start();
  const reclaim2 = await timeline.waitFor(
    `job ${job2.id} claimed again after its lease lapsed`,
    (e) => e.event === 'claimed' && e.jobId === job2.id && e.workerId === 'local-rescue',
    lapseMs,
  );
  const done2 = await timeline.waitFor(
    `job ${job2.id} completed by local-rescue`,
    is('completed', job2.id, 'local-rescue'),
    settings.reportJobMs + lapseMs,
  );
  const final2 = await docket.getJob(job2.id);
  check(
    reclaim2.token === 2 && done2.token === 2 && final2?.state === 'done' && final2.token === 2,
    `job ${job2.id} came back after child-A was killed and completed on local-rescue with token 2`,
  );
  if (orphan?.leaseUntil) {
    check(
      reclaim2.atMs >= orphan.leaseUntil.getTime() - timeline.startedAtEpochMs - 50,
      `job ${job2.id} was not claimed again before its lease lapsed (lease ended ${timeline.at(orphan.leaseUntil)}, claimed at ${formatOffsetMs(reclaim2.atMs)})`,
    );
  }
  await rescueWorker.stop();

  // 3. A stalled worker comes back after its lease was taken: its writes are refused.
  await timeline.waitFor('child-B ready', (e) => e.event === 'ready' && e.workerId.startsWith('child-B'), startupMs);
  const job4 = await submit(DEMO_KINDS.report, queues.stall);
  const started4 = await timeline.waitFor(
    `job ${job4.id} started on child-B`,
    (e) => e.event === 'started' && e.jobId === job4.id,
    lapseMs,
  );
  await freezeOutsideWriteLock(childB, url);
  timeline.line(
    'SIGSTOP',
    `child-B (pid ${childB.pid}) frozen, like a long GC pause, while it holds job ${job4.id} with token ${started4.token}`,
  );
  const takeoverWorker = docket.worker({
    ...workerOptions,
    id: 'local-takeover',
    queues: [queues.stall],
    concurrency: 1,
  });
  await takeoverWorker.start();
  await timeline.waitFor(`job ${job4.id} claimed by local-takeover`, is('claimed', job4.id, 'local-takeover'), lapseMs);
  const done4 = await timeline.waitFor(
    `job ${job4.id} completed by local-takeover`,
    is('completed', job4.id, 'local-takeover'),
    settings.reportJobMs + lapseMs,
  );
  childB.process.kill('SIGCONT');
  timeline.line('SIGCONT', `child-B resumes, still believing it holds job ${job4.id} with token ${started4.token}`);
  const refused = await timeline.waitFor(
    `child-B's late write for job ${job4.id} refused`,
    (e) => (e.event === 'stale' || e.event === 'leaseLost') && e.jobId === job4.id && e.workerId.startsWith('child-B'),
    lapseMs,
  );
  check(
    refused.token === 1 && done4.token === 2,
    `child-B's late ${refused.event === 'stale' ? `${refused.detail}` : 'heartbeat'} with token 1 was refused after local-takeover completed job ${job4.id} with token 2`,
  );
  const replay = await docket.store.jobComplete({ id: job4.id, token: started4.token ?? 1 });
  const after4 = await docket.getJob(job4.id);
  timeline.line(
    'replay',
    `child-B's completion with token ${started4.token} sent through the Store: '${replay}'; job ${job4.id} stays ${after4?.state} with token ${after4?.token}`,
  );
  check(
    replay === 'stale' &&
      after4?.state === 'done' &&
      after4.token === 2 &&
      after4.leaseOwner?.startsWith('local-takeover/') === true,
    `a completion carrying the stale token 1 was refused and changed nothing`,
  );
  childB.process.kill('SIGTERM');
  const exitB = await withTimeout(childB.exited, lapseMs, 'child-B to stop after SIGTERM');
  check(exitB.code === 0, `child-B stopped gracefully on SIGTERM (exit code ${exitB.code})`);
  await takeoverWorker.stop();

  // 4. The poison job: backs off, then parked in the dead-letter table.
  const poison = await docket.getJob(job3.id);
  if (poison?.state === 'pending') {
    timeline.line(
      'wait',
      `job ${job3.id} is backing off: attempt ${poison.attempts + 1} is due at ${timeline.at(poison.runAt)}`,
    );
  }
  const totalBackoffMs = demoRetryDelaysMs(settings).reduce((sum, ms) => sum + ms, 0);
  await timeline.waitFor(`job ${job3.id} parked`, is('parked', job3.id), totalBackoffMs + lapseMs);
  await poisonWorker.stop();
  const dead = await docket.listDeadLetters({ queue: queues.poison });
  const parked = dead.find((job) => job.id === job3.id);
  printDeadLetter(timeline, parked);
  const gaps = parked ? attemptGapsMs(parked) : [];
  const nominal = demoRetryDelaysMs(settings);
  check(
    parked !== undefined &&
      parked.attempts === settings.maxAttempts &&
      parked.errors.length === settings.maxAttempts &&
      parked.errors.every((error) => error.message === FLAKY_ERROR),
    `job ${job3.id} is in the dead-letter table with ${settings.maxAttempts} attempts and each attempt's error`,
  );
  check(
    gaps.length === nominal.length && gaps.every((gap, i) => gap >= (nominal[i] ?? 0) - 50),
    `its retries waited at least ${nominal.map((ms) => ms / 1000).join(', ')} s (measured ${gaps.map((ms) => (ms / 1000).toFixed(2)).join(', ')} s)`,
  );

  const stats = await docket.queueStats();
  const leftover = stats
    .filter((row) => Object.values(queues).includes(row.queue))
    .reduce((sum, row) => sum + row.scheduled + row.available + row.running, 0);
  check(leftover === 0, 'nothing is left pending or leased: every job ended done or dead');
  return checks;
}

function printDeadLetter(timeline: DemoTimeline, job: Job | undefined): void {
  if (!job) return;
  timeline.note();
  timeline.note(
    `Dead letter: job ${job.id} (${job.kind}) on queue ${job.queue}, parked at ${job.finishedAt ? timeline.at(job.finishedAt) : '?'} after ${job.attempts} of ${job.maxAttempts} attempts`,
  );
  let previous: Date | undefined;
  for (const error of job.errors) {
    const gap = previous ? `  (${formatSeconds(error.at.getTime() - previous.getTime())} after the previous)` : '';
    timeline.note(
      `  attempt ${error.attempt}  ${timeline.at(error.at).padStart(7)}  ${error.kind}: ${error.message}${gap}`,
    );
    previous = error.at;
  }
  timeline.note(`  retry it with: docket dead retry ${job.id}    purge it with: docket dead purge --id ${job.id}`);
}

/** Time between consecutive attempt errors, by the database clock. */
function attemptGapsMs(job: Job): number[] {
  return job.errors.slice(1).map((error, i) => error.at.getTime() - (job.errors[i]?.at.getTime() ?? 0));
}

function printVerdict(timeline: DemoTimeline, checks: Check[], url: string): boolean {
  timeline.note();
  timeline.note('Story checks');
  for (const { ok, text } of checks) timeline.note(`  ${ok ? 'ok  ' : 'FAIL'}  ${text}`);
  const failed = checks.filter((entry) => !entry.ok).length;
  const seconds = (timeline.elapsedMs() / 1000).toFixed(1);
  timeline.note();
  timeline.note(
    failed === 0
      ? `Demo finished in ${seconds} s: all ${checks.length} checks passed.`
      : `Demo finished in ${seconds} s: ${failed} of ${checks.length} checks FAILED.`,
  );
  timeline.note(`The store is kept for a look around: docket jobs list --db ${url}   docket dead list --db ${url}`);
  return failed === 0;
}

/** How to start a child worker: the TypeScript source through tsx in a checkout, the built file otherwise. */
function demoWorkerCommand(): string[] {
  const self = import.meta.url;
  const fromSource = self.endsWith('.ts');
  const script = fileURLToPath(new URL(`./demo-worker.${fromSource ? 'ts' : 'js'}`, self));
  return fromSource ? ['--import', import.meta.resolve('tsx'), script] : [script];
}

function spawnDemoWorker(config: DemoWorkerConfig, timeline: DemoTimeline): ChildWorker {
  const child = spawn(process.execPath, [...demoWorkerCommand(), JSON.stringify(config)], {
    cwd: resolvePath('.'),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new StoryError(`could not start ${config.name}`);
  const stderr: string[] = [];
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => stderr.push(chunk));
  const lines = createInterface({ input: child.stdout! });
  lines.on('line', (line) => {
    let message: DemoWorkerMessage;
    try {
      message = JSON.parse(line) as DemoWorkerMessage;
    } catch {
      return;
    }
    timeline.record({
      event: message.event,
      workerId: message.workerId ?? config.name,
      jobId: message.jobId,
      token: message.token,
      attempt: message.attempt,
      leaseUntil: message.leaseUntil ? new Date(message.leaseUntil) : undefined,
      durationMs: message.durationMs,
      detail: message.detail,
    });
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { name: config.name, process: child, pid: child.pid, exited, stderr };
}

/**
 * Freezes `child` with SIGSTOP, but never while it holds SQLite's write lock. The story models a
 * long GC pause of a worker holding a job; a process frozen inside a write transaction would
 * instead hold the file's one write lock and stop every other process (SQLite's nature, see
 * docs/operations.md, "SQLite settings"). A worker that just claimed may at once send its next
 * claim or a heartbeat, so after each stop a probe asks for the write lock, waiting a little
 * longer than the parent's own short transactions take; while it stays taken, the child is let
 * run a moment and frozen again. On PostgreSQL row locks stop nobody else: a plain SIGSTOP.
 */
async function freezeOutsideWriteLock(child: ChildWorker, url: string): Promise<void> {
  child.process.kill('SIGSTOP');
  const location = parseStoreUrl(url);
  if (location.kind !== 'sqlite') return;
  // Loaded here, not at the top: a PostgreSQL-only install has no better-sqlite3, and the CLI
  // must still start there (test/package/optional-sqlite.test.ts).
  const { default: Database } = await import('better-sqlite3');
  const probe = new Database(location.path, { timeout: 250 });
  try {
    for (let attempt = 0; attempt < 40; attempt++) {
      try {
        probe.exec('BEGIN IMMEDIATE');
        probe.exec('ROLLBACK');
        return;
      } catch (error) {
        if ((error as { code?: string }).code !== 'SQLITE_BUSY') throw error;
        child.process.kill('SIGCONT');
        await sleep(10);
        child.process.kill('SIGSTOP');
      }
    }
    throw new StoryError('child-B could not be frozen outside a write transaction of the SQLite file');
  } finally {
    probe.close();
  }
}

function killQuietly(child: ChildWorker, signal: NodeJS.Signals): void {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  try {
    // A stopped process ignores SIGTERM until continued; SIGCONT first so cleanup never hangs.
    child.process.kill('SIGCONT');
    child.process.kill(signal);
  } catch {
    // Already gone: nothing to clean up.
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new StoryError(`${what} did not happen within ${ms / 1000} s`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function formatOffsetMs(ms: number): string {
  return `+${(ms / 1000).toFixed(2)}s`;
}
