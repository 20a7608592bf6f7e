/**
 * Entry point of one benchmark worker process. The harness forks it and sends `load` with a
 * {@link SystemConfig} (modules imported, answered by `loaded`), then `start` to all its children at
 * once, so that module loading does not stagger a two-process drain. It receives: `ready` once the
 * worker runs, `starts` batches of
 * `[i, hrWallMs, dateNowMs, ...]` triples (one per handler start), `rss` samples, and `stopped`
 * after a graceful stop. Start times are taken here, in the handler, so the harness's own event
 * loop never inflates a latency.
 */
import { hostNowMs } from './pg-admin.js';
import { loadSystem, type RunningWorker, type SystemConfig, type SystemModule } from './systems/system.js';

/** Messages the harness sends. */
export type ToChild = { type: 'load'; config: SystemConfig } | { type: 'start' } | { type: 'stop' };

/** Messages this process sends. */
export type FromChild =
  | { type: 'loaded' }
  | { type: 'ready'; pid: number; node: string }
  | { type: 'starts'; triples: number[] }
  | { type: 'rss'; rssBytes: number; atMs: number }
  | { type: 'stopped'; peakRssBytes: number }
  | { type: 'error'; message: string };

// Flush every 20 ms: small enough that the harness sees the drain end promptly, large enough that
// 20,000 starts a second cost a few dozen messages, not 20,000.
const FLUSH_INTERVAL_MS = 20;
const RSS_INTERVAL_MS = 200;

let pending: number[] = [];
let peakRssBytes = 0;
let worker: RunningWorker | null = null;
let loaded: { config: SystemConfig; system: SystemModule } | null = null;

function send(message: FromChild): void {
  process.send?.(message);
}

function flush(): void {
  if (pending.length === 0) return;
  const triples = pending;
  pending = [];
  send({ type: 'starts', triples });
}

function sampleRss(): void {
  const rssBytes = process.memoryUsage.rss();
  peakRssBytes = Math.max(peakRssBytes, rssBytes);
  send({ type: 'rss', rssBytes, atMs: Date.now() });
}

const flushTimer = setInterval(flush, FLUSH_INTERVAL_MS);
const rssTimer = setInterval(sampleRss, RSS_INTERVAL_MS);

async function load(config: SystemConfig): Promise<void> {
  loaded = { config, system: await loadSystem(config.system) };
  send({ type: 'loaded' });
}

async function start(): Promise<void> {
  if (!loaded) throw new Error('start before load');
  worker = await loaded.system.startWorker(loaded.config, (i) => {
    pending.push(i, hostNowMs(), Date.now());
  });
  sampleRss();
  send({ type: 'ready', pid: process.pid, node: process.version });
}

async function stop(): Promise<void> {
  await worker?.stop();
  flush();
  sampleRss();
  clearInterval(flushTimer);
  clearInterval(rssTimer);
  send({ type: 'stopped', peakRssBytes });
  // Exit once the IPC channel has drained, so the `stopped` message is not lost.
  process.disconnect?.();
  setTimeout(() => process.exit(0), 50).unref();
}

function fail(error: unknown): void {
  send({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exitCode = 1;
}

process.on('message', (message: ToChild) => {
  if (message.type === 'load') load(message.config).catch(fail);
  else if (message.type === 'start') start().catch(fail);
  else if (message.type === 'stop') stop().catch(fail);
});
// The harness died: do not linger as an orphan holding database connections.
process.on('disconnect', () => {
  setTimeout(() => process.exit(0), 2_000).unref();
});
