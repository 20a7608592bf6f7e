/**
 * One chaos worker process. The harness (chaos.ts) starts several, kills them with SIGKILL, freezes
 * them with SIGSTOP and restarts their database underneath them. Configuration comes as one JSON
 * argument ({@link ChaosWorkerConfig}).
 *
 * Every side effect and every verdict the worker hears from the database is appended to this
 * process's own ledger file, one JSON line each ({@link LedgerEntry}). The append is a plain
 * `write(2)` with no fsync on purpose: a `kill -9` after the side effect but before `complete` is
 * exactly the case the checker must see, and the kernel keeps the line after the process dies.
 *
 * Kinds (see chaos-plan.ts for the mix):
 * - `chaos.ok`: sleeps `ms`, ignoring its signal as a careless handler would, then records its effect.
 * - `chaos.fail`: throws on attempts up to `failAttempts`, then behaves like `chaos.ok`.
 * - `chaos.long`: like `chaos.ok` but runs several leases long, surviving only by heartbeats.
 * - `chaos.poison.throw`: throws on every attempt (parked after maxAttempts).
 * - `chaos.poison.exit`: kills its own process on every attempt (parked after maxAttempts, I5).
 */
import { openSync, writeSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Docket } from '../../src/index.js';

/** What the harness passes to a chaos worker. */
export interface ChaosWorkerConfig {
  url: string;
  /** A sharded store's shard URLs instead of `url`. */
  shards?: string[] | undefined;
  id: string;
  ledger: string;
  leaseMs: number;
  heartbeatIntervalMs: number;
  pollIntervalMs: number;
  concurrency: number;
  shutdownGraceMs: number;
}

/**
 * One ledger line. `e` is the entry type: `start` (handler began), `effect` (the side effect ran),
 * `completed`/`stale`/`failed`/`parked`/`lost` (what the database answered), `ready`, `stopped`.
 * Times: `s` host epoch ms when the handler started; `c` the claim instant by the database clock
 * (the claim's lease_until minus leaseMs); `r` the job's run_at (database clock).
 */
export interface LedgerEntry {
  e: string;
  w: string;
  pid: number;
  j?: string;
  a?: number;
  t?: number;
  k?: string;
  s?: number;
  c?: number;
  r?: number;
  op?: string;
  stats?: unknown;
}

const config = JSON.parse(process.argv[2] ?? '{}') as ChaosWorkerConfig;
const ledgerFd = openSync(config.ledger, 'a');
const record = (entry: Omit<LedgerEntry, 'w' | 'pid'>): void => {
  writeSync(ledgerFd, `${JSON.stringify({ ...entry, w: config.id, pid: process.pid })}\n`);
};

const docket = await Docket.open(
  config.shards ? { shards: config.shards, poolSize: 4 } : { url: config.url, poolSize: 4 },
);
// The claim's lease end, by the database clock: lease_until - leaseMs is the claim instant (I4).
const claimedAt = new Map<string, number>();
docket.events.on('claimed', ({ job }) => {
  claimedAt.set(`${job.id}:${job.token}`, job.leaseUntil.getTime() - config.leaseMs);
});

interface Work {
  ms: number;
  failAttempts?: number;
}

type Ctx = Parameters<Parameters<Docket['handle']>[1]>[1];

function started(kind: string, ctx: Ctx): void {
  const key = `${ctx.jobId}:${ctx.token}`;
  const c = claimedAt.get(key);
  claimedAt.delete(key);
  record({ e: 'start', j: ctx.jobId, a: ctx.attempt, t: ctx.token, k: kind, s: Date.now(), c, r: ctx.runAt.getTime() });
}

async function work(kind: string, payload: Work, ctx: Ctx): Promise<void> {
  started(kind, ctx);
  // The signal is deliberately ignored: a frozen or careless handler finishing late is what makes
  // a side effect run twice, and the fencing token must still refuse its completion.
  await sleep(payload.ms);
  if (payload.failAttempts !== undefined && ctx.attempt <= payload.failAttempts) {
    throw new Error(`chaos: planned failure on attempt ${ctx.attempt}`);
  }
  record({ e: 'effect', j: ctx.jobId, a: ctx.attempt, t: ctx.token });
}

docket.handle<Work>('chaos.ok', (payload, ctx) => work('chaos.ok', payload, ctx));
docket.handle<Work>('chaos.fail', (payload, ctx) => work('chaos.fail', payload, ctx));
docket.handle<Work>('chaos.long', (payload, ctx) => work('chaos.long', payload, ctx));
// Recurring runs (the harness's schedules): the same handler, so they die and freeze with the rest.
docket.handle<Work>('chaos.sched', (payload, ctx) => work('chaos.sched', payload, ctx));
docket.handle<Work>('chaos.sched.fail', (payload, ctx) => work('chaos.sched.fail', payload, ctx));
docket.handle('chaos.poison.throw', (_payload, ctx) => {
  started('chaos.poison.throw', ctx);
  throw new Error('chaos: poison job throws every time');
});
docket.handle('chaos.poison.exit', (_payload, ctx) => {
  started('chaos.poison.exit', ctx);
  // Exits the whole process mid-handler, taking every other in-flight job's lease with it.
  process.exit(17);
});

docket.events.on('completed', ({ job }) => record({ e: 'completed', j: job.id, t: job.token }));
docket.events.on('stale', ({ job, operation }) => record({ e: 'stale', j: job.id, t: job.token, op: operation }));
docket.events.on('failed', ({ job }) => record({ e: 'failed', j: job.id, t: job.token }));
docket.events.on('parked', ({ job }) => record({ e: 'parked', j: job.id, t: job.token }));
docket.events.on('leaseLost', ({ job }) => record({ e: 'lost', j: job.id, t: job.token }));
let errors = 0;
docket.events.on('error', () => {
  errors += 1;
});

const worker = docket.worker({
  id: config.id,
  leaseMs: config.leaseMs,
  heartbeatIntervalMs: config.heartbeatIntervalMs,
  pollIntervalMs: config.pollIntervalMs,
  concurrency: config.concurrency,
  shutdownGraceMs: config.shutdownGraceMs,
});
process.on('SIGTERM', () => {
  void (async () => {
    await docket.close();
    record({ e: 'stopped', stats: { ...worker.stats, errorEvents: errors } });
    process.exit(0);
  })();
});
await worker.start();
record({ e: 'ready' });
process.stdout.write('ready\n');
