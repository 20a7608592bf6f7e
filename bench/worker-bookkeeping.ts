/**
 * What a worker's own bookkeeping costs per job, with no database in the measurement: this tree
 * against another checkout, alternating child processes. Each child opens Docket on an in-memory
 * SQLite store and answers the three calls a drain repeats (claim, completion, heartbeat) from
 * memory, at once (one event-loop turn each), so the CPU it reports is the worker's: buffering,
 * leases, executions, handler invocation, completion batching and collections, not a driver's
 * parsing or a database's share of the cores.
 *
 *   npx tsx bench/worker-bookkeeping.ts --baseline /tmp/docket-main            200,000 jobs, 10 rounds
 *   npx tsx bench/worker-bookkeeping.ts --baseline DIR --jobs 100000 --rounds 6 --prefetch 0
 *
 * Why beside bench/worker-cpu.ts: on a shared two-core machine a real drain's worker CPU moves
 * with the database's (the same 100,000-job drain read 1,194-1,793 ms of worker CPU across rounds
 * of one run), which hides changes of a few percent. Here the process is alone with its work.
 * Printed: each round, the medians and the median of the per-round ratios this ÷ baseline (each
 * round runs both trees back to back, so a slow spell of the machine weighs on both).
 */
import { resolve } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { ClaimedJob } from '../src/job/job.js';
import { DEFAULT_RETRY_POLICY } from '../src/job/job-spec.js';
import type {
  CompleteOutcome,
  JobClaimParams,
  JobCompleteManyParams,
  JobHeartbeatManyParams,
} from '../src/store/store.js';
import { handledCountdown, importDocket, runCheckoutChild, THIS_CHECKOUT } from './checkouts.js';
import { median } from './stats.js';

const CHILD = 'child';
const KIND = 'bench.noop';
const LEASE_MS = 30_000;

interface ChildResult {
  cpuMs: number;
  gcMs: number;
  wallMs: number;
}

if (process.argv[2] === CHILD) {
  const [dir, jobs, concurrency, prefetch] = process.argv.slice(3);
  const result = await runChild(dir ?? '', Number(jobs), Number(concurrency), Number(prefetch));
  console.log(JSON.stringify(result));
  process.exit(0);
} else {
  runParent();
}

function runParent(): void {
  const { values } = parseArgs({
    options: {
      baseline: { type: 'string' },
      jobs: { type: 'string', default: '200000' },
      rounds: { type: 'string', default: '10' },
      concurrency: { type: 'string', default: '24' },
      prefetch: { type: 'string', default: '500' },
    },
  });
  if (!values.baseline) throw new Error('--baseline DIR (a checkout of Docket with node_modules) is required');
  for (const name of ['jobs', 'rounds', 'concurrency'] as const) {
    if (!/^[1-9]\d*$/.test(values[name])) {
      throw new Error(`--${name} must be a positive integer, got ${JSON.stringify(values[name])}`);
    }
  }
  if (!/^\d+$/.test(values.prefetch)) {
    throw new Error(`--prefetch must be a whole number, got ${JSON.stringify(values.prefetch)}`);
  }
  const trees = [
    { name: 'this', dir: THIS_CHECKOUT },
    { name: 'baseline', dir: resolve(values.baseline) },
  ];
  const cpu: Record<string, number[]> = { this: [], baseline: [] };
  const gc: Record<string, number[]> = { this: [], baseline: [] };
  const ratios: number[] = [];
  for (let round = 1; round <= Number(values.rounds); round += 1) {
    const got: Record<string, ChildResult> = {};
    for (const tree of round % 2 === 1 ? trees : [...trees].reverse()) {
      const result = runCheckoutChild<ChildResult>(
        fileURLToPath(import.meta.url),
        [CHILD, tree.dir, values.jobs, values.concurrency, values.prefetch],
        tree.dir,
        `${tree.name} round ${round}`,
      );
      got[tree.name] = result;
      cpu[tree.name]?.push(result.cpuMs);
      gc[tree.name]?.push(result.gcMs);
    }
    const mine = got.this!;
    const theirs = got.baseline!;
    ratios.push(mine.cpuMs / theirs.cpuMs);
    console.log(
      `round ${round}: this cpu ${mine.cpuMs.toFixed(0)} ms (gc ${mine.gcMs.toFixed(0)}), baseline cpu ${theirs.cpuMs.toFixed(0)} ms (gc ${theirs.gcMs.toFixed(0)}), ratio ${(mine.cpuMs / theirs.cpuMs).toFixed(3)}`,
    );
  }
  const perJob = (ms: number) => ((ms * 1000) / Number(values.jobs)).toFixed(2);
  const [mine, theirs] = [median(cpu.this ?? []), median(cpu.baseline ?? [])];
  console.log(
    `worker CPU median: this ${mine.toFixed(0)} ms (${perJob(mine)} us a job), baseline ${theirs.toFixed(0)} ms (${perJob(theirs)} us a job)`,
  );
  console.log(
    `GC median: this ${median(gc.this ?? []).toFixed(0)} ms, baseline ${median(gc.baseline ?? []).toFixed(0)} ms`,
  );
  const below = ratios.filter((ratio) => ratio < 1).length;
  console.log(
    `median per-round ratio this ÷ baseline: ${median(ratios).toFixed(3)} (this lower in ${below} of ${ratios.length} rounds)`,
  );
}

/** Drains `jobs` no-op jobs through one worker of the checkout at `dir`, the store's hot calls answered from memory. */
async function runChild(dir: string, jobs: number, concurrency: number, prefetch: number): Promise<ChildResult> {
  const Docket = await importDocket(dir);
  const docket = await Docket.open({ url: 'sqlite::memory:' });
  const store = docket.store;
  let nextId = 1;
  const runAt = new Date(0);
  // A turn of the event loop, as a round trip's answer arrives in one.
  const answerSoon = () => new Promise<void>((resolveSoon) => setImmediate(resolveSoon));
  store.jobClaim = async (params: JobClaimParams): Promise<ClaimedJob[]> => {
    await answerSoon();
    const claimed: ClaimedJob[] = [];
    const leaseUntil = new Date(Date.now() + params.leaseMs);
    const count = Math.min(params.limit, jobs + 1 - nextId);
    for (let i = 0; i < count; i += 1) {
      const id = nextId;
      nextId += 1;
      claimed.push({
        id: String(id),
        kind: KIND,
        queue: 'default',
        payload: { i: id },
        priority: 0,
        state: 'running',
        runAt,
        leaseUntil,
        leaseOwner: params.owner,
        token: 1,
        attempts: 1,
        maxAttempts: 25,
        retryPolicy: DEFAULT_RETRY_POLICY,
        errors: [],
        idempotencyKey: null,
        timeoutMs: null,
        scheduleId: null,
        scheduleSlot: null,
        createdAt: runAt,
        finishedAt: null,
        startedAt: runAt,
      });
    }
    return claimed;
  };
  store.jobCompleteMany = async (params: JobCompleteManyParams): Promise<CompleteOutcome[]> => {
    await answerSoon();
    return params.leases.map(() => 'done');
  };
  store.jobHeartbeatMany = async (params: JobHeartbeatManyParams): Promise<(Date | null)[]> => {
    await answerSoon();
    return params.leases.map(() => new Date(Date.now() + LEASE_MS));
  };
  const { handled, done } = handledCountdown(jobs);
  docket.handle(KIND, async () => handled());
  let gcMs = 0;
  const gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcMs += entry.duration;
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  const worker = docket.worker({ concurrency, prefetch, leaseMs: LEASE_MS });
  const cpuBefore = process.cpuUsage();
  const startedAt = performance.now();
  await worker.start();
  await done;
  const cpu = process.cpuUsage(cpuBefore);
  const wallMs = performance.now() - startedAt;
  gcObserver.disconnect();
  await worker.stop();
  await docket.close();
  return { cpuMs: (cpu.user + cpu.system) / 1000, gcMs, wallMs };
}
