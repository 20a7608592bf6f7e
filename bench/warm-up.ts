/**
 * What a fresh worker process pays for its first drain: one worker, started once and kept
 * running, drains several backlogs in turn, and each drain's rate and the worker process's CPU per
 * job are printed side by side. The bench's `backlog` workload starts a fresh worker process for
 * every drain, so its rates are all first drains; a long-running worker meeting a backlog drains it
 * as the later ones here do.
 *
 *   npx tsx bench/warm-up.ts [--jobs 20000] [--drains 3] [--rounds 3] [--node 24] [--prefetch 500|auto]
 *     [--compiles] [--node-flags=--trace-deopt]
 *
 * Each round starts a new child process (on `--node`'s line, else this one) that opens Docket on
 * a scratch database and starts `docket.worker({ concurrency: 24, prefetch })`. For each drain this
 * process queues `--jobs` no-op jobs with `submitMany`, all due at one instant after the last insert
 * (so the worker finds them as one backlog, as a fresh worker finds one queued before it starts).
 * Per drain the child reports jobs/s from the first handler start to the last, its
 * `process.cpuUsage()` per job over that span, and its garbage collections (`gc` performance
 * entries) in it. Printed: every drain of every round, then each drain's medians over the rounds
 * and the last drain ÷ the first. `--compiles` adds what V8 spent compiling optimized code
 * (Maglev, Turbofan; summed from `--trace-opt`) during each drain; `--node-flags` are passed to
 * the worker's Node as they are. Needs PostgreSQL at BENCH_PG_URL's host.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Docket } from '../src/docket.js';
import { nodePathOfLine, pinnedNodeMajor } from './peers-latest/latest.js';
import { databaseUrl, dropDatabase, recreateDatabase, scratchName } from './pg-admin.js';
import { median } from './stats.js';

const KIND = 'bench.noop';
const CONCURRENCY = 24;
const CHILD = 'child';
const SUBMIT_CHUNK = 5000;
/** The backlog falls due this long after its first insert. */
const DUE_AFTER_MS = 3000;

/** One drain as the child measured it. */
interface DrainReport {
  jobsPerSec: number;
  cpuUsPerJob: number;
  gcCount: number;
  gcMs: number;
  /** With `--compiles`: what V8 spent compiling optimized code during the drain, by tier. */
  maglevMs?: number;
  turbofanMs?: number;
}

/** Printed by the child (with `--compiles`) around each drain, between V8's --trace-opt lines. */
const FIRST_START_MARK = '@@warm-up first start';
const LAST_START_MARK = '@@warm-up last start';

/** Parent → child: drain this many jobs (already queued); child → parent: ready, or a drain's report. */
type ToChild = { drain: number };
type FromChild = { ready: true } | { report: DrainReport };

if (process.argv[2] === CHILD)
  await runChild(process.argv[3] ?? '', process.argv[4] ?? 'auto', process.argv[5] === 'true');
else await runParent();

async function runParent(): Promise<void> {
  const { values } = parseArgs({
    options: {
      jobs: { type: 'string', default: '20000' },
      drains: { type: 'string', default: '3' },
      rounds: { type: 'string', default: '3' },
      node: { type: 'string' },
      prefetch: { type: 'string', default: '500' },
      'node-flags': { type: 'string', default: '' },
      compiles: { type: 'boolean', default: false },
    },
  });
  const jobs = positiveInteger('--jobs', values.jobs);
  const drains = positiveInteger('--drains', values.drains);
  const rounds = positiveInteger('--rounds', values.rounds);
  if (drains < 2) throw new Error('--drains must be at least 2: the first drain is compared with the later ones');
  if (values.prefetch !== 'auto') positiveInteger('--prefetch', values.prefetch);
  const nodeFlags = values['node-flags'].split(' ').filter((flag) => flag !== '');
  if (values.compiles) nodeFlags.push('--trace-opt');
  const execPath = values.node === undefined ? process.execPath : nodePathOfLine(pinnedNodeMajor('node', values.node));

  const reports: DrainReport[][] = [];
  for (let round = 0; round < rounds; round += 1) {
    const database = scratchName('warmup');
    await recreateDatabase(database);
    const url = databaseUrl(database);
    const submitter = await Docket.open({ url });
    const child = fork(fileURLToPath(import.meta.url), [CHILD, url, values.prefetch, String(values.compiles)], {
      execPath,
      execArgv: [...nodeFlags, '--import', 'tsx'],
      stdio: ['ignore', values.compiles ? 'pipe' : 'inherit', 'inherit', 'ipc'],
    });
    const compiles = values.compiles && child.stdout ? compileTimesOf(child.stdout) : undefined;
    try {
      const messages = messagesOf(child);
      await messages.next(); // ready: the child opened Docket and its worker runs
      const roundReports: DrainReport[] = [];
      for (let drain = 0; drain < drains; drain += 1) {
        child.send({ drain: jobs } satisfies ToChild);
        // Due together once all are queued: inserting them takes well under a second.
        const runAt = new Date((await submitter.store.now()).getTime() + DUE_AFTER_MS);
        for (let i = 0; i < jobs; i += SUBMIT_CHUNK) {
          const count = Math.min(SUBMIT_CHUNK, jobs - i);
          await submitter.submitMany(
            Array.from({ length: count }, (_, j) => ({ kind: KIND, payload: { i: i + j }, runAt })),
          );
        }
        if ((await submitter.store.now()).getTime() >= runAt.getTime())
          throw new Error(
            `queueing ${jobs} jobs took longer than ${DUE_AFTER_MS} ms: they did not wait as one backlog`,
          );
        const message = await messages.next();
        if (!('report' in message)) throw new Error('the worker process answered a drain with no report');
        if (compiles) Object.assign(message.report, await compiles.ofDrain(drain));
        roundReports.push(message.report);
        console.log(
          `round ${round + 1} drain ${drain + 1}: ${Math.round(message.report.jobsPerSec)} jobs/s, ` +
            `worker CPU ${message.report.cpuUsPerJob.toFixed(1)} µs a job, ` +
            `${message.report.gcCount} GCs (${message.report.gcMs.toFixed(0)} ms)` +
            (compiles ? `, compiled ${compiledText(message.report)}` : ''),
        );
      }
      reports.push(roundReports);
    } finally {
      child.kill();
      await submitter.close();
      await dropDatabase(database);
    }
  }

  console.log(
    `\n${jobs.toLocaleString('en-US')} jobs a drain, docket.worker({ concurrency: ${CONCURRENCY}` +
      `${values.prefetch === 'auto' ? '' : `, prefetch: ${values.prefetch}`} }) on Node ${nodeVersionOf(execPath)}; medians of ${rounds} process${rounds === 1 ? '' : 'es'}:`,
  );
  for (let drain = 0; drain < drains; drain += 1) {
    const of = (pick: (report: DrainReport) => number) => median(reports.map((round) => pick(round[drain]!)));
    console.log(
      `drain ${drain + 1}: ${Math.round(of((r) => r.jobsPerSec))} jobs/s, worker CPU ${of((r) => r.cpuUsPerJob).toFixed(1)} µs a job, ` +
        `GC ${of((r) => r.gcMs).toFixed(0)} ms` +
        (values.compiles
          ? `, compiled ${compiledText({ maglevMs: of((r) => r.maglevMs ?? 0), turbofanMs: of((r) => r.turbofanMs ?? 0) })}`
          : ''),
    );
  }
  const rate = (drain: number) => median(reports.map((round) => round[drain]!.jobsPerSec));
  const cpu = (drain: number) => median(reports.map((round) => round[drain]!.cpuUsPerJob));
  console.log(
    `last drain ÷ first: rate ${(rate(drains - 1) / rate(0)).toFixed(2)}, worker CPU a job ${(cpu(drains - 1) / cpu(0)).toFixed(2)}`,
  );
}

async function runChild(url: string, prefetch: string, markDrains: boolean): Promise<void> {
  const { PerformanceObserver } = await import('node:perf_hooks');
  const docket = await Docket.open({ url });
  const send = (message: FromChild) => process.send?.(message);
  let started = 0;
  let target = 0;
  let firstStartMs = 0;
  let cpuAtFirstStart = process.cpuUsage();
  let gcCount = 0;
  let gcMs = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcCount += 1;
      gcMs += entry.duration;
    }
  }).observe({ entryTypes: ['gc'] });
  docket.handle(KIND, async () => {
    started += 1;
    if (started === 1) {
      firstStartMs = performance.now();
      cpuAtFirstStart = process.cpuUsage();
      if (markDrains) console.log(FIRST_START_MARK);
      gcCount = 0;
      gcMs = 0;
    }
    if (started !== target) return;
    const cpu = process.cpuUsage(cpuAtFirstStart);
    if (markDrains) console.log(LAST_START_MARK);
    send({
      report: {
        jobsPerSec: target / ((performance.now() - firstStartMs) / 1000),
        cpuUsPerJob: (cpu.user + cpu.system) / target,
        gcCount,
        gcMs,
      },
    });
  });
  process.on('message', (message: ToChild) => {
    started = 0;
    target = message.drain;
  });
  await docket
    .worker({ concurrency: CONCURRENCY, ...(prefetch === 'auto' ? {} : { prefetch: Number(prefetch) }) })
    .start();
  send({ ready: true });
}

/**
 * Sums the compile times of V8's `--trace-opt` lines ("completed compiling … (target MAGLEV) - took
 * a, b, c ms") between each drain's marks in the child's output; `ofDrain(k)` resolves once the
 * k-th drain's last mark has been read.
 */
function compileTimesOf(stdout: NodeJS.ReadableStream): {
  ofDrain(drain: number): Promise<{ maglevMs: number; turbofanMs: number }>;
} {
  const done: { maglevMs: number; turbofanMs: number }[] = [];
  const waiting = new Map<number, (times: { maglevMs: number; turbofanMs: number }) => void>();
  let current: { maglevMs: number; turbofanMs: number } | undefined;
  createInterface({ input: stdout }).on('line', (line) => {
    if (line.includes(FIRST_START_MARK)) current = { maglevMs: 0, turbofanMs: 0 };
    else if (line.includes(LAST_START_MARK) && current) {
      done.push(current);
      waiting.get(done.length - 1)?.(current);
      current = undefined;
    } else if (current) {
      const match = /\(target (MAGLEV|TURBOFAN\w*)\) - took ([\d.]+), ([\d.]+), ([\d.]+) ms/.exec(line);
      if (!match) return;
      const ms = Number(match[2]) + Number(match[3]) + Number(match[4]);
      if (match[1] === 'MAGLEV') current.maglevMs += ms;
      else current.turbofanMs += ms;
    }
  });
  return {
    ofDrain(drain) {
      const times = done[drain];
      if (times) return Promise.resolve(times);
      return new Promise((resolve) => waiting.set(drain, resolve));
    },
  };
}

function compiledText(times: { maglevMs?: number | undefined; turbofanMs?: number | undefined }): string {
  return `Maglev ${(times.maglevMs ?? 0).toFixed(0)} ms, Turbofan ${(times.turbofanMs ?? 0).toFixed(0)} ms`;
}

/** The child's messages, one at a time, in order; a wait rejects once the child has exited. */
function messagesOf(child: ChildProcess): { next(): Promise<FromChild> } {
  const queue: FromChild[] = [];
  const waiting: { resolve(message: FromChild): void; reject(error: Error): void }[] = [];
  let exited: Error | undefined;
  child.on('message', (message: FromChild) => {
    const waiter = waiting.shift();
    if (waiter) waiter.resolve(message);
    else queue.push(message);
  });
  child.on('exit', (code, signal) => {
    exited = new Error(`the worker process exited (code ${code}, signal ${signal})`);
    for (const waiter of waiting.splice(0)) waiter.reject(exited);
  });
  return {
    next() {
      const message = queue.shift();
      if (message) return Promise.resolve(message);
      if (exited) return Promise.reject(exited);
      return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
    },
  };
}

function positiveInteger(name: string, text: string): number {
  if (!/^[1-9]\d*$/.test(text)) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(text)}`);
  return Number(text);
}

function nodeVersionOf(execPath: string): string {
  return execPath === process.execPath
    ? process.versions.node
    : execPath.replace(/^.*\/docket-node\/([^/]+)\/.*$/, '$1');
}
