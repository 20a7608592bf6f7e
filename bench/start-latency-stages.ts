/**
 * Where enqueue-to-start latency goes: single submits at a fixed rate (open loop, at most
 * `--in-flight` at once) into a default Docket worker in a child process, with a timestamp per
 * stage of each job: scheduled, submit call started, submit resolved (committed), the worker's
 * last wake-up before the claim that leased it, that claim sent and answered, handler started.
 * Prints each stage's median, p90, p99 and max.
 *
 *   npx tsx bench/start-latency-stages.ts [--rate 1000] [--seconds 10] [--in-flight 100] [--concurrency 24]
 *     [--idle-workers 0] [--idle-of kind|queue|replica]
 *
 * `--idle-workers K` starts K more default workers, each in a process of its own, that handle
 * another kind (`--idle-of kind`, default) or claim another queue (`--idle-of queue`): workers of
 * other services sharing the database, which the measured stream never feeds. `--idle-of replica`
 * makes them replicas of the measured worker instead (same kind and queue): they share the stream,
 * and the stages are of the measured worker's jobs only. Also printed: the
 * database's committed transactions per job over the stream (every process's, the submits' too), and each
 * idle worker's claims and wake-ups.
 *
 * Times are the bench's cross-process clock (hostNowMs: the host's monotonic clock, one anchor
 * shared with the child) at sub-millisecond resolution in both processes. Needs PostgreSQL at BENCH_DATABASE_URL's host.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Docket } from '../src/docket.js';
import type { ClaimedJob } from '../src/job/job.js';
import type { WorkerOptions } from '../src/worker/worker-options.js';
import { databaseUrl, dropDatabase, hostNowMs, recreateDatabase, scratchName, xactCommits } from './pg-admin.js';
import { distribution } from './stats.js';

const KIND = 'bench.noop';
// The parent's scratch name (its pid), passed to the child, so a concurrent bench run never drops it.
const DB = process.env.STAGES_DB ?? scratchName('stages');
const SCHEMA = 'docket';

interface ChildReport {
  /** [i, claimSentMs, claimAnsweredMs, lastWakeBeforeClaimMs, handlerStartMs] per job. */
  rows: number[];
}

/** A worker that the stream never feeds (another kind, or the same kind on another queue), or a replica. */
async function idleChild(): Promise<void> {
  const of = process.env.STAGES_IDLE_OF ?? 'kind';
  const docket = await Docket.open({ url: databaseUrl(DB), schema: SCHEMA });
  let claims = 0;
  let wakeUps = 0;
  const store = docket.store;
  const jobClaim = store.jobClaim.bind(store);
  store.jobClaim = (params) => {
    claims += 1;
    return jobClaim(params);
  };
  const subscribe = store.subscribe.bind(store);
  store.subscribe = (listener) =>
    subscribe((wakeUp) => {
      wakeUps += 1;
      listener(wakeUp);
    });
  let ran = 0;
  docket.handle(of === 'kind' ? 'bench.other' : KIND, async () => {
    ran += 1;
  });
  const worker = docket.worker(of === 'queue' ? { queues: ['other'] } : {});
  await worker.start();
  process.send?.({ type: 'ready' });
  process.on('message', async (message: { type: string }) => {
    if (message.type !== 'stop') return;
    await worker.stop();
    await docket.close();
    console.log(`${of} worker ${process.pid}: ${claims} claims, ${wakeUps} wake-ups, ${ran} jobs run`);
    process.exit(0);
  });
}

/** The database's committed transactions so far, read after `settleMs`. */
async function committedTransactions(settleMs: number): Promise<number> {
  await new Promise((r) => setTimeout(r, settleMs));
  return xactCommits(DB);
}

async function child(): Promise<void> {
  const options = JSON.parse(process.env.STAGES_WORKER ?? '{}') as WorkerOptions;
  const docket = await Docket.open({ url: databaseUrl(DB), schema: SCHEMA });
  const store = docket.store;
  let lastWakeMs = Number.NaN;
  const claimOf = new Map<number, [number, number, number]>();
  const rows: number[] = [];
  const subscribe = store.subscribe.bind(store);
  store.subscribe = (listener) =>
    subscribe((wakeUp) => {
      lastWakeMs = hostNowMs();
      listener(wakeUp);
    });
  const jobClaim = store.jobClaim.bind(store);
  store.jobClaim = async (params) => {
    const sent = hostNowMs();
    const wake = lastWakeMs;
    const jobs: ClaimedJob[] = await jobClaim(params);
    const answered = hostNowMs();
    for (const job of jobs) claimOf.set((job.payload as { i: number }).i, [sent, answered, wake]);
    return jobs;
  };
  docket.handle(KIND, async (payload: { i: number }) => {
    const started = hostNowMs();
    const claim = claimOf.get(payload.i) ?? [Number.NaN, Number.NaN, Number.NaN];
    rows.push(payload.i, claim[0], claim[1], claim[2], started);
  });
  const worker = docket.worker(options);
  await worker.start();
  process.send?.({ type: 'ready' });
  process.on('message', async (message: { type: string }) => {
    if (message.type !== 'stop') return;
    await worker.stop();
    await docket.close();
    process.send?.({ type: 'report', rows } satisfies ChildReport & { type: string }, () => process.exit(0));
  });
}

function summary(name: string, values: number[]): string {
  const d = distribution(values.filter((v) => Number.isFinite(v)));
  const f = (v: number) => v.toFixed(2).padStart(8);
  return `${name.padEnd(34)} p50 ${f(d.p50)}  p90 ${f(d.p90)}  p99 ${f(d.p99)}  max ${f(d.max)}  (n=${values.length})`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rate: { type: 'string', default: '1000' },
      seconds: { type: 'string', default: '10' },
      'in-flight': { type: 'string', default: '100' },
      concurrency: { type: 'string', default: '24' },
      worker: { type: 'string', default: '{}' },
      'idle-workers': { type: 'string', default: '0' },
      'idle-of': { type: 'string', default: 'kind' },
    },
  });
  const rate = Number(values.rate);
  const total = Math.round(rate * Number(values.seconds));
  const inFlight = Number(values['in-flight']);
  const workerOptions = { concurrency: Number(values.concurrency), ...JSON.parse(values.worker ?? '{}') };
  await recreateDatabase(DB);
  const docket = await Docket.open({ url: databaseUrl(DB), schema: SCHEMA });
  const worker = fork(fileURLToPath(import.meta.url), ['--child'], {
    env: { ...process.env, STAGES_WORKER: JSON.stringify(workerOptions), STAGES_DB: DB },
    execArgv: process.execArgv,
  });
  const report = new Promise<ChildReport>((resolve) =>
    worker.on('message', (m: { type: string } & ChildReport) => {
      if (m.type === 'report') resolve(m);
    }),
  );
  await new Promise<void>((resolve) => worker.on('message', (m: { type: string }) => m.type === 'ready' && resolve()));
  const idleOf = values['idle-of'] ?? 'kind';
  if (!['kind', 'queue', 'replica'].includes(idleOf))
    throw new Error(`--idle-of takes kind, queue or replica, not ${idleOf}`);
  const idle = Array.from({ length: Number(values['idle-workers']) }, () =>
    fork(fileURLToPath(import.meta.url), ['--idle'], {
      env: { ...process.env, STAGES_DB: DB, STAGES_IDLE_OF: idleOf },
      execArgv: process.execArgv,
    }),
  );
  await Promise.all(
    idle.map(
      (child) =>
        new Promise<void>((resolve) => child.on('message', (m: { type: string }) => m.type === 'ready' && resolve())),
    ),
  );
  // PostgreSQL 15 reports a busy backend's counters at most every 10 s: wait those of the start out.
  const transactionsBefore = await committedTransactions(11_000);
  const scheduled = new Float64Array(total);
  const callStart = new Float64Array(total);
  const callEnd = new Float64Array(total);
  const calls = new Set<Promise<void>>();
  const t0 = hostNowMs();
  for (let i = 0; i < total; ) {
    const due = Math.min(total, Math.floor(((hostNowMs() - t0) * rate) / 1000) + 1);
    if (i >= due) {
      await new Promise((r) => setTimeout(r, 1));
      continue;
    }
    if (calls.size >= inFlight) {
      await Promise.race(calls);
      continue;
    }
    const k = i;
    scheduled[k] = t0 + (k * 1000) / rate;
    callStart[k] = hostNowMs();
    const call = docket
      .submit({ kind: KIND, payload: { i: k } })
      .then(() => {
        callEnd[k] = hostNowMs();
      })
      .finally(() => calls.delete(call));
    calls.add(call);
    i += 1;
  }
  await Promise.all(calls);
  await new Promise((r) => setTimeout(r, 1_000));
  const exits = idle.map((child) => new Promise((resolve) => child.on('exit', resolve)));
  for (const child of idle) child.send({ type: 'stop' });
  worker.send({ type: 'stop' });
  const { rows } = await report;
  await Promise.all(exits);
  await docket.close();
  // Every connection is closed, so every backend has reported its counters.
  const transactions = (await committedTransactions(1_000)) - transactionsBefore;
  await dropDatabase(DB);
  const stage = {
    schedToCall: [] as number[],
    submitCall: [] as number[],
    commitToWake: [] as number[],
    wakeToClaimSent: [] as number[],
    commitToClaimSent: [] as number[],
    claimRoundTrip: [] as number[],
    claimAnsweredToStart: [] as number[],
    enqueueToStart: [] as number[],
  };
  for (let r = 0; r < rows.length; r += 5) {
    const [i, sent, answered, wake, start] = rows.slice(r, r + 5) as [number, number, number, number, number];
    stage.schedToCall.push(callStart[i]! - scheduled[i]!);
    stage.submitCall.push(callEnd[i]! - callStart[i]!);
    // The wake-up that led to this claim, when it came after this job's commit.
    if (wake >= callEnd[i]! - 0.5) stage.commitToWake.push(wake - callEnd[i]!);
    if (wake >= callEnd[i]! - 0.5) stage.wakeToClaimSent.push(sent - wake);
    stage.commitToClaimSent.push(sent - callEnd[i]!);
    stage.claimRoundTrip.push(answered - sent);
    stage.claimAnsweredToStart.push(start - answered);
    stage.enqueueToStart.push(start - scheduled[i]!);
  }
  console.log(
    `${rows.length / 5} of ${total} jobs started; worker ${JSON.stringify(workerOptions)}; rate ${rate}/s; ` +
      `${idle.length} ${idleOf === 'replica' ? 'replicas' : `idle workers of another ${idleOf}`}; ` +
      `${(transactions / total).toFixed(2)} transactions a job`,
  );
  for (const [name, values] of Object.entries(stage)) console.log(summary(name, values));
}

if (process.argv.includes('--idle'))
  idleChild().catch((error) => {
    console.error(error);
    process.exit(1);
  });
else if (process.argv.includes('--child'))
  child().catch((error) => {
    console.error(error);
    process.exit(1);
  });
else
  main().catch((error) => {
    console.error(error);
    process.exitCode = 1;
  });
