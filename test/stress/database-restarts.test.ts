/**
 * Losing the database is an event the fleet rides through (issue 13, bullet 1). Real `docket work`
 * processes run against this file's own PostgreSQL cluster (`15 restarts` on port 5434, created
 * like the chaos harness's: never the shared cluster on 5432) while a producer submits under load,
 * and a seeded nemesis kills and restarts the database 20 times (`pg_ctlcluster stop -m immediate`:
 * no checkpoint, crash recovery on start; then a start), in a seeded order with 4 rounds of
 * `pg_terminate_backend` of every Docket backend; a `docket serve` process runs on the same database. Asserted: no worker
 * (or server) process exits, every acknowledged job completes, each
 * worker logs the loss and the recovery once per outage at most, and each failing operation once per
 * outage (not once per retry), and recovery
 * is bounded: the first job claimed after the database accepts connections again is claimed
 * within 2 s, as the harness measures it.
 *
 * How recovery is measured (harness clock, monotonic): after a restart a prober connects every
 * 10 ms; the first connection that answers `SELECT` marks "ready". It records the lease owners of
 * the running rows at that instant; every claim writes a fresh owner (`<worker>/<instance>.<n>`,
 * see JobClaimer) that a heartbeat never changes, so the first running or newly finished row with
 * an owner outside that set is the first claim after ready. The prober polls for it every 10 ms.
 * For a terminate, "ready" is the moment the backends were terminated (the server never left).
 *
 * Three smaller cases on the same cluster: the LISTEN connection comes back after a restart and
 * reports its loss and recovery once each however many reconnects failed; a handler running
 * while the database is down for longer than its lease is aborted once the lease can no longer be
 * confirmed (a real outage, not paused heartbeats), and the job runs again afterwards; a call whose
 * backend stops answering (SIGSTOP: a half-open connection) fails at the read deadline instead of
 * hanging, and the next call gets a fresh connection.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import { seededRandom } from '../../src/retry/random.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { WakeUpListener } from '../../src/store/postgres/wake-up-listener.js';
import type { WakeUp } from '../../src/store/store.js';
import { type RunningCli, startDocket } from '../cli/run-docket.js';
import { deferred, within } from '../integration/support/deferred.js';
import {
  type ChaosCluster,
  chaosCluster,
  ensureChaosCluster,
  startChaosCluster,
  stopChaosClusterImmediately,
  waitForCluster,
} from './chaos-cluster.js';

const SEED = Number(process.env.DOCKET_RESTARTS_SEED ?? 13);
/** Kill-and-restarts of the database (the 20), and rounds of terminated backends beside them. */
const RESTARTS = 20;
const TERMINATIONS = 4;
const FAULTS = RESTARTS + TERMINATIONS;
/** The bound under test: the first claim after the database is back, ms. */
const RECOVERY_BOUND_MS = 2000;
const WORKERS = 3;
const LEASE_MS = 10_000;

/** A handler that takes a few ms, like a small real job; its result is the proof it ran. */
const HANDLERS = `
export default {
  'restart.work': async (payload) => {
    await new Promise((resolve) => setTimeout(resolve, 5 + (payload.n % 20)));
    return { n: payload.n };
  },
};
`;

let cluster: ChaosCluster;
let dir: string;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  // No skip: a machine that cannot create the cluster fails here (CI runs as root).
  cluster = await ensureChaosCluster(chaosCluster({ name: 'restarts', port: 5434 }));
  dir = mkdtempSync(join(tmpdir(), 'docket-restarts-'));
  writeFileSync(join(dir, 'handlers.mjs'), HANDLERS);
}, 60_000);

afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function schemaUrl(schema: string): string {
  return `${cluster.url}?schema=${schema}`;
}

async function admin(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: cluster.url, connectionTimeoutMillis: 2000 });
  client.on('error', () => {});
  await client.connect();
  return client;
}

async function dropSchema(schema: string): Promise<void> {
  const client = await admin();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Connects until a connection answers, polling every 10 ms; resolves with that client (caller ends it). */
async function firstAnsweringClient(timeoutMs: number): Promise<pg.Client> {
  const deadline = performance.now() + timeoutMs;
  let lastError: unknown;
  while (performance.now() < deadline) {
    const client = new pg.Client({ connectionString: cluster.url, connectionTimeoutMillis: 1000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('SELECT 1');
      return client;
    } catch (error) {
      lastError = error;
      await client.end().catch(() => {});
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  throw new Error(`the restarts cluster did not come back within ${timeoutMs} ms: ${String(lastError)}`);
}

/**
 * Waits for the first claim made after `readyAt` (see the file header), polling every 10 ms on
 * `client`; returns how long after `readyAt` it was seen, or Infinity after `timeoutMs`.
 */
async function firstClaimAfter(client: pg.Client, schema: string, readyAt: number, timeoutMs: number): Promise<number> {
  const jobs = `"${schema}".jobs`;
  const before = await client.query<{ owner: string; db_now: Date }>(
    `SELECT coalesce(array_agg(DISTINCT lease_owner) FILTER (WHERE state = 'running'), '{}') AS owner, now() AS db_now FROM ${jobs}`,
  );
  const known = (before.rows[0]?.owner ?? []) as unknown as string[];
  const dbReadyAt = before.rows[0]?.db_now;
  while (performance.now() - readyAt < timeoutMs) {
    const found = await client.query(
      `SELECT 1 FROM ${jobs}
        WHERE (state = 'running' OR (state = 'done' AND finished_at >= $2))
          AND lease_owner IS NOT NULL AND NOT (lease_owner = ANY($1::text[]))
        LIMIT 1`,
      [known, dbReadyAt],
    );
    if (found.rowCount) return performance.now() - readyAt;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return Number.POSITIVE_INFINITY;
}

interface LogCounts {
  lost: number;
  recovered: number;
  /** Operations logged as failed (warn) more than once within one outage: retries that were not quiet. */
  repeatedFailures: string[];
}

/** Reads a worker's log so far (pino JSON lines on stdout): outages, recoveries and noisy retries. */
function logCounts(worker: RunningCli): LogCounts {
  const counts: LogCounts = { lost: 0, recovered: 0, repeatedFailures: [] };
  let failedThisOutage = new Set<string>();
  for (const text of worker.output().stdout.split('\n')) {
    let line: { msg?: string; operation?: string };
    try {
      line = JSON.parse(text) as typeof line;
    } catch {
      continue;
    }
    if (line.msg?.startsWith('docket: store connection lost')) {
      counts.lost += 1;
      failedThisOutage = new Set();
    } else if (line.msg === 'docket: store connection recovered') {
      counts.recovered += 1;
      failedThisOutage = new Set();
    } else if (line.operation && line.msg === `docket: ${line.operation} failed`) {
      if (failedThisOutage.has(line.operation)) counts.repeatedFailures.push(line.operation);
      failedThisOutage.add(line.operation);
    }
  }
  return counts;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

describe('workers ride through a database that restarts under them', () => {
  it(`survives ${RESTARTS} immediate restarts and ${TERMINATIONS} rounds of terminated backends under load: 0 exits, 0 lost, first claim within ${RECOVERY_BOUND_MS} ms`, async () => {
    const random = seededRandom(SEED);
    const schema = `restarts_${SEED}`;
    await dropSchema(schema);
    const url = schemaUrl(schema);
    const producer = await Docket.open({ url, poolSize: 2 });
    cleanups.push(() => producer.close());

    const workers: RunningCli[] = [];
    const exits: string[] = [];
    for (let i = 0; i < WORKERS; i += 1) {
      const worker = startDocket([
        'work',
        '--db',
        url,
        '--handlers',
        join(dir, 'handlers.mjs'),
        '--concurrency',
        '8',
        '--lease-ms',
        String(LEASE_MS),
        '--id',
        `restart-w${i}`,
      ]);
      void worker.exited.then((result) => exits.push(`restart-w${i}: code ${result.code} signal ${result.signal}`));
      cleanups.push(async () => {
        worker.child.kill('SIGKILL');
        await worker.exited;
      });
      workers.push(worker);
    }
    // `docket serve` on the same database: its store and its built-in worker must ride through too.
    const server = startDocket(['serve', '--db', url, '--port', '0', '--log-level', 'warn']);
    void server.exited.then((result) => exits.push(`serve: code ${result.code} signal ${result.signal}`));
    cleanups.push(async () => {
      server.child.kill('SIGKILL');
      await server.exited;
    });
    await expect
      .poll(() => /serving on (http:\/\/\S+)/.exec(server.output().stderr)?.[1], { timeout: 30_000 })
      .toBeTruthy();
    const serveUrl = /serving on (http:\/\/\S+)/.exec(server.output().stderr)?.[1] as string;
    await expect
      .poll(async () => (await producer.listWorkers()).filter((w) => w.id.startsWith('restart-w')).length, {
        timeout: 30_000,
        interval: 100,
      })
      .toBe(WORKERS);

    // The producer: 5 jobs every 100 ms (50/s) for the whole run. A submit that fails during an
    // outage is not acknowledged (it may still have committed: such a job is an extra, not a loss).
    const acknowledged: string[] = [];
    let submitErrors = 0;
    let producing = true;
    let n = 0;
    const production = (async () => {
      while (producing) {
        const batch = Array.from({ length: 5 }, () => ({ kind: 'restart.work', payload: { n: n++ } }));
        try {
          for (const result of await producer.submitMany(batch)) acknowledged.push(result.id);
        } catch {
          submitErrors += 1;
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();

    const recoveries: { fault: string; ms: number }[] = [];
    let restarts = 0;
    let terminates = 0;
    const logBefore = workers.map(logCounts);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    // The faults in a seeded order; the first is always a restart.
    const plan = [
      ...Array.from({ length: RESTARTS - 1 }, () => true),
      ...Array.from({ length: TERMINATIONS }, () => false),
    ];
    for (let i = plan.length - 1; i > 0; i -= 1) {
      const j = Math.floor(random() * (i + 1));
      [plan[i], plan[j]] = [plan[j]!, plan[i]!];
    }
    plan.unshift(true);
    for (let fault = 0; fault < FAULTS; fault += 1) {
      const restart = plan[fault]!;
      // A backlog that falls due during the outage, so the first claim after it has jobs to
      // take and the measurement is the workers' reconnect, not the producer's next submit.
      try {
        for (const result of await producer.submitMany(
          Array.from({ length: 20 }, () => ({ kind: 'restart.work', payload: { n: n++ }, delayMs: 250 })),
        )) {
          acknowledged.push(result.id);
        }
      } catch {
        submitErrors += 1;
      }
      let readyAt: number;
      let prober: pg.Client;
      let starting: Promise<void> = Promise.resolve();
      if (restart) {
        await stopChaosClusterImmediately(cluster);
        // Down for 100-800 ms: long enough that every worker's calls fail, short like a real crash-restart.
        await new Promise((resolve) => setTimeout(resolve, 100 + Math.floor(random() * 700)));
        // pg_ctlcluster returns a second or two after the server accepts connections: measure from the latter.
        starting = startChaosCluster(cluster);
        prober = await firstAnsweringClient(30_000);
        readyAt = performance.now();
        restarts += 1;
      } else {
        const killer = await admin();
        try {
          // Every Docket backend: the pools of the workers and the producer, and every LISTEN connection.
          await killer.query(
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE application_name LIKE 'docket%' AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
          );
        } finally {
          await killer.end().catch(() => {});
        }
        readyAt = performance.now();
        prober = await admin();
        terminates += 1;
      }
      try {
        const ms = await firstClaimAfter(prober, schema, readyAt, 15_000);
        recoveries.push({ fault: restart ? 'restart' : 'terminate', ms: Math.round(ms) });
      } finally {
        await prober.end().catch(() => {});
        await starting;
      }
      // Let the fleet settle into steady work before the next fault.
      await new Promise((resolve) => setTimeout(resolve, 800 + Math.floor(random() * 700)));
    }

    producing = false;
    await production;
    // Every acknowledged job completes: drained within 30 s of the last fault.
    const check = await admin();
    cleanups.push(() => check.end());
    let notDone = Number.NaN;
    const drainDeadline = performance.now() + 30_000;
    while (performance.now() < drainDeadline) {
      const result = await check.query<{ n: string }>(
        `SELECT count(*) AS n FROM unnest($1::bigint[]) AS a(id)
          WHERE NOT EXISTS (SELECT 1 FROM "${schema}".jobs j WHERE j.id = a.id AND j.state = 'done')`,
        [acknowledged],
      );
      notDone = Number(result.rows[0]?.n);
      if (notDone === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const logAfter = workers.map(logCounts);
    const lostLines = logAfter.map((after, i) => after.lost - (logBefore[i]?.lost ?? 0));
    const recoveredLines = logAfter.map((after, i) => after.recovered - (logBefore[i]?.recovered ?? 0));
    const repeatedFailureLines = logAfter.map((after) => after.repeatedFailures.length);
    const recoveryMs = recoveries.map((r) => r.ms);
    const figures = {
      seed: SEED,
      restartsSurvived: restarts,
      backendsTerminatedRounds: terminates,
      processExits: exits.length,
      acknowledged: acknowledged.length,
      submitErrorsDuringOutages: submitErrors,
      lost: notDone,
      maxRecoveryMs: Math.max(...recoveryMs),
      medianRecoveryMs: median(recoveryMs),
      lostLogLines: lostLines,
      recoveredLogLines: recoveredLines,
      repeatedFailureLogLines: repeatedFailureLines,
      recoveries: recoveries.map((r) => `${r.fault[0]}${r.ms}`).join(' '),
    };
    console.log(`database restarts: ${JSON.stringify(figures)}`);
    const context = `${JSON.stringify(figures)}\n${exits.join('\n')}\n${workers
      .map((w) => w.output().stderr.slice(-2000))
      .join('\n---\n')}`;

    expect(exits, context).toEqual([]);
    expect(notDone, context).toBe(0);
    expect(acknowledged.length, context).toBeGreaterThan(1000);
    expect(restarts, context).toBe(RESTARTS);
    expect(terminates, context).toBe(TERMINATIONS);
    expect(Math.max(...recoveryMs), context).toBeLessThanOrEqual(RECOVERY_BOUND_MS);
    // Loss and recovery are logged once per outage a worker noticed, never once per retry: at
    // most one pair per fault, and every loss is followed by its recovery.
    for (let i = 0; i < WORKERS; i += 1) {
      expect(lostLines[i], context).toBeGreaterThan(0);
      expect(lostLines[i], context).toBeLessThanOrEqual(FAULTS);
      expect(recoveredLines[i], context).toBe(lostLines[i]);
      // Within an outage each failing operation is logged once at warn; its retries stay quiet.
      expect(repeatedFailureLines[i], context).toBe(0);
    }
    // The server's store answers again (GET /ready checks it) without a restart of the process.
    expect((await fetch(`${serveUrl}/ready`)).status, context).toBe(200);
    for (const child of [...workers, server]) child.child.kill('SIGTERM');
    const stopped = await Promise.all([...workers, server].map((w) => w.exited));
    expect(
      stopped.map((s) => s.code),
      context,
    ).toEqual([...workers, server].map(() => 0));
  }, 170_000);

  it('brings the LISTEN connection back after a restart, reporting loss and recovery once each', async () => {
    const changes: boolean[] = [];
    const wakeUps: WakeUp[] = [];
    const listener = new WakeUpListener({
      connection: { connectionString: cluster.url, connectionTimeoutMillis: 1000 },
      channel: 'restarts_listener',
      onWakeUp: (wakeUp) => wakeUps.push(wakeUp),
      minReconnectDelayMs: 20,
      maxReconnectDelayMs: 200,
      random: seededRandom(SEED),
      onListeningChange: (listening) => changes.push(listening),
    });
    cleanups.push(() => listener.close());
    await listener.start();
    expect(changes).toEqual([true]);
    await stopChaosClusterImmediately(cluster);
    // Down for 1.5 s: reconnects at 10-20, 20-40, … then every 100-200 ms all fail meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(changes).toEqual([true, false]);
    await startChaosCluster(cluster);
    await waitForCluster(cluster);
    await expect.poll(() => changes, { timeout: 5000, interval: 20 }).toEqual([true, false, true]);
    // The reconnect said "look again" (notifications sent while down are lost), and NOTIFY works again.
    expect(wakeUps).toContainEqual({ runAt: null });
    const notifier = await admin();
    try {
      await notifier.query(`NOTIFY restarts_listener, '12345'`);
    } finally {
      await notifier.end();
    }
    await expect
      .poll(() => wakeUps.some((wakeUp) => wakeUp.runAt?.getTime() === 12345), { timeout: 5000, interval: 20 })
      .toBe(true);
    await listener.close();
  }, 30_000);

  it('aborts a handler once its lease cannot be confirmed while the database is down, and runs the job again after', async () => {
    const schema = `restarts_lease_${SEED}`;
    await dropSchema(schema);
    const docket = await Docket.open({ url: schemaUrl(schema) });
    cleanups.push(() => docket.close());
    const started = deferred<void>();
    const aborted = deferred<{ at: number; reason: unknown }>();
    docket.handle('restart.long', async (_payload, ctx) => {
      if (ctx.attempt > 1) return 'second attempt';
      started.resolve();
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
      aborted.resolve({ at: performance.now(), reason: ctx.signal.reason });
      return 'never written';
    });
    const lost = deferred<string>();
    docket.events.on('leaseLost', (event) => lost.resolve(event.reason));
    const leaseMs = 2000;
    const worker = docket.worker({ leaseMs, heartbeatIntervalMs: 400, pollIntervalMs: 200 });
    await worker.start();
    const { id } = await docket.submit({ kind: 'restart.long' });
    await within(started.promise, 10_000, 'first attempt start');
    // One heartbeat confirms the lease, then the database goes away for longer than the lease.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await stopChaosClusterImmediately(cluster);
    const downAt = performance.now();
    const abort = await within(aborted.promise, leaseMs + 3000, 'abort while the database is down');
    expect(await lost.promise).toBe('lease_unconfirmed');
    expect((abort.reason as { reason?: string }).reason).toBe('lease_lost');
    // Aborted within the lease (no later than leaseMs after the last confirmation), while still down.
    expect(abort.at - downAt).toBeLessThanOrEqual(leaseMs + 500);
    await startChaosCluster(cluster);
    await waitForCluster(cluster);
    await expect
      .poll(async () => docket.getJob(id).catch(() => null), { timeout: 20_000, interval: 100 })
      .toMatchObject({ state: 'done', attempts: 2 });
    await worker.stop();
  }, 60_000);

  it('fails a call whose backend stops answering at the read deadline, then carries on with a fresh connection', async () => {
    const schema = `restarts_deadline_${SEED}`;
    await dropSchema(schema);
    const statementTimeoutMs = 500;
    const store = await PostgresStore.open(schemaUrl(schema), { poolSize: 1, statementTimeoutMs });
    cleanups.push(() => store.close());
    const pid = (await store.db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid as number;
    // A stopped backend answers nothing and its socket stays open: the half-open case no server-side timeout covers.
    process.kill(pid, 'SIGSTOP');
    let failedAfterMs: number;
    try {
      const startedAt = performance.now();
      await expect(store.jobGet({ id: '1' })).rejects.toThrow(/Query read timeout/);
      failedAfterMs = performance.now() - startedAt;
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(failedAfterMs).toBeGreaterThanOrEqual(statementTimeoutMs + 5000 - 50);
    expect(failedAfterMs).toBeLessThan(statementTimeoutMs + 5000 + 2000);
    // poolSize 1: this answers only because the stuck client was destroyed, not returned.
    expect(await store.jobGet({ id: '1' })).toBeNull();
  }, 30_000);
});
