/**
 * A child worker process for the demo: opens the demo's store, runs one worker on one queue and
 * reports every lifecycle event as a JSON line on stdout, so the demo can kill -9 or SIGSTOP a
 * real process and show what it did. SIGTERM stops it gracefully.
 *
 * Usage (spawned by run-demo.ts): demo-worker <json {url, name, queue, settings}>
 */
import { Docket } from '../../docket.js';
import { registerDemoHandlers } from './demo-handlers.js';
import type { DemoSettings } from './demo-settings.js';

/** What the demo passes to a child worker. */
export interface DemoWorkerConfig {
  url: string;
  schema?: string | undefined;
  name: string;
  queue: string;
  settings: DemoSettings;
}

/** One line a child worker writes on stdout. */
export interface DemoWorkerMessage {
  event: 'ready' | 'claimed' | 'started' | 'completed' | 'failed' | 'stale' | 'leaseLost' | 'error' | 'stopped';
  workerId?: string;
  jobId?: string;
  token?: number;
  attempt?: number;
  leaseUntil?: string;
  durationMs?: number;
  detail?: string;
}

function send(message: DemoWorkerMessage): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

const config = JSON.parse(process.argv[2] ?? '{}') as DemoWorkerConfig;
const docket = await Docket.open({ url: config.url, ...(config.schema ? { schema: config.schema } : {}) });
registerDemoHandlers(docket, config.settings);
const workerId = `${config.name}-pid${process.pid}`;

docket.events.on('claimed', ({ job }) =>
  send({
    event: 'claimed',
    workerId,
    jobId: job.id,
    token: job.token,
    attempt: job.attempts,
    leaseUntil: job.leaseUntil.toISOString(),
  }),
);
docket.events.on('started', ({ job }) => send({ event: 'started', workerId, jobId: job.id, token: job.token }));
docket.events.on('completed', ({ job, durationMs }) =>
  send({ event: 'completed', workerId, jobId: job.id, token: job.token, durationMs }),
);
docket.events.on('failed', ({ job, error }) =>
  send({ event: 'failed', workerId, jobId: job.id, token: job.token, detail: error.message }),
);
docket.events.on('stale', ({ job, operation }) =>
  send({ event: 'stale', workerId, jobId: job.id, token: job.token, detail: operation }),
);
docket.events.on('leaseLost', ({ job, reason }) =>
  send({ event: 'leaseLost', workerId, jobId: job.id, token: job.token, detail: reason }),
);
docket.events.on('error', ({ error, operation }) =>
  send({ event: 'error', workerId, detail: `${operation}: ${error instanceof Error ? error.message : String(error)}` }),
);

const worker = docket.worker({
  id: workerId,
  concurrency: 2,
  queues: [config.queue],
  leaseMs: config.settings.leaseMs,
  heartbeatIntervalMs: config.settings.heartbeatIntervalMs,
  pollIntervalMs: config.settings.pollIntervalMs,
  shutdownGraceMs: 0,
});

process.once('SIGTERM', () => {
  void (async () => {
    await worker.stop();
    await docket.close();
    send({ event: 'stopped', workerId });
    process.exitCode = 0;
  })();
});

await worker.start();
send({ event: 'ready', workerId });
