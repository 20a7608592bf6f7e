/**
 * The soak's worker process: one Docket worker with default settings (the shared concurrency, every
 * other worker option default) whose Docket prunes finished rows with the soak's retention and
 * prune interval. Its store is opened here and two of its calls are timed in place (the claim and
 * the prune), so the claim time the soak reports is the worker's own, pool wait included.
 *
 * Messages in: `start` (what to open), `sample` (report and reset the window), `stop`.
 * Messages out: `ready`, `starts` ([i, hrWallMs, ...] pairs, every 20 ms), `sample`, `stopped`, `error`.
 */
import { Docket } from '../src/docket.js';
import { openStore } from '../src/store/open-store.js';
import { hostNowMs } from './pg-admin.js';
import { distribution } from './stats.js';
import { benchIndexOf } from './systems/system.js';

/** What the soak asks the worker to run. */
export interface SoakWorkerConfig {
  url: string;
  schema: string;
  kind: string;
  concurrency: number;
  retentionMs: number;
  pruneIntervalMs: number;
}

/** One window of the worker's own measurements. */
export interface SoakWorkerSample {
  claims: number;
  claimedRows: number;
  claimP50Ms: number;
  claimP99Ms: number;
  claimMaxMs: number;
  /** Every prune that finished in this window. */
  prunes: { atMs: number; deleted: number; ms: number }[];
  rssBytes: number;
  heapUsedBytes: number;
  /** This process's CPU time (user + system) in this window, ms: the worker's cost, apart from the machine's. */
  cpuMs: number;
}

/** Messages the soak sends. */
export type ToSoakWorker = { type: 'start'; config: SoakWorkerConfig } | { type: 'sample' } | { type: 'stop' };

/** Messages this process sends. */
export type FromSoakWorker =
  | { type: 'ready' }
  | { type: 'starts'; pairs: number[] }
  | { type: 'sample'; sample: SoakWorkerSample }
  | { type: 'stopped' }
  | { type: 'error'; message: string };

const FLUSH_INTERVAL_MS = 20;

let pending: number[] = [];
let claimMs: number[] = [];
let claimedRows = 0;
let prunes: SoakWorkerSample['prunes'] = [];
let cpuAtLastSample = process.cpuUsage();
let running: { stop(): Promise<void> } | null = null;

function send(message: FromSoakWorker): void {
  process.send?.(message);
}

function flush(): void {
  if (pending.length === 0) return;
  send({ type: 'starts', pairs: pending });
  pending = [];
}
const flushTimer = setInterval(flush, FLUSH_INTERVAL_MS);

async function start(config: SoakWorkerConfig): Promise<void> {
  const store = await openStore(config.url, { schema: config.schema });
  // Timed in place: the claim and the prune are the two calls whose cost grows with the table.
  const claim = store.jobClaim.bind(store);
  store.jobClaim = async (params) => {
    const at = performance.now();
    const jobs = await claim(params);
    claimMs.push(performance.now() - at);
    claimedRows += jobs.length;
    return jobs;
  };
  const prune = store.jobPruneFinished.bind(store);
  store.jobPruneFinished = async (params) => {
    const at = performance.now();
    const deleted = await prune(params);
    prunes.push({ atMs: hostNowMs(), deleted, ms: performance.now() - at });
    return deleted;
  };
  const docket = await Docket.open({
    store,
    retentionMs: config.retentionMs,
    pruneIntervalMs: config.pruneIntervalMs,
  });
  docket.handle(config.kind, async (payload) => {
    pending.push(benchIndexOf(payload), hostNowMs());
  });
  const worker = docket.worker({ concurrency: config.concurrency });
  await worker.start();
  running = {
    async stop() {
      await worker.stop();
      await docket.close();
      await store.close();
    },
  };
  cpuAtLastSample = process.cpuUsage(); // the first window counts the soak, not opening Docket
  send({ type: 'ready' });
}

function sample(): void {
  const claims = distribution(claimMs);
  const memory = process.memoryUsage();
  const cpu = process.cpuUsage(cpuAtLastSample);
  cpuAtLastSample = process.cpuUsage();
  send({
    type: 'sample',
    sample: {
      claims: claimMs.length,
      claimedRows,
      claimP50Ms: claims.p50,
      claimP99Ms: claims.p99,
      claimMaxMs: claims.max,
      prunes,
      rssBytes: memory.rss,
      heapUsedBytes: memory.heapUsed,
      cpuMs: (cpu.user + cpu.system) / 1000,
    },
  });
  claimMs = [];
  claimedRows = 0;
  prunes = [];
}

async function stop(): Promise<void> {
  await running?.stop();
  flush();
  clearInterval(flushTimer);
  send({ type: 'stopped' });
  process.disconnect?.();
  setTimeout(() => process.exit(0), 50).unref();
}

function fail(error: unknown): void {
  send({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exitCode = 1;
}

process.on('message', (message: ToSoakWorker) => {
  if (message.type === 'start') start(message.config).catch(fail);
  else if (message.type === 'sample') sample();
  else if (message.type === 'stop') stop().catch(fail);
});
// The soak died: do not linger holding database connections.
process.on('disconnect', () => {
  setTimeout(() => process.exit(0), 2_000).unref();
});
