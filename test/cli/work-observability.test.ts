/**
 * What `docket work` tells an operator, on both stores: JSON log lines on stdout for every failed
 * attempt and park, `/metrics` and `/health` with --metrics-port, its entry in `docket workers
 * list`, the jobs nobody can run counted as unhandled by `docket stats`, and a handlers module's
 * `onWorkerStart(worker, docket)` hook. Settings come from a config file, the environment and
 * flags at once, and the running worker shows each was honoured.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import type { WorkerRecord } from '../../src/store/store.js';
import { createTestDatabase, POSTGRES_URL, storeKinds, type TestDatabase } from '../support/stores.js';
import { describeRun, runDocketInProcess, startDocket } from './run-docket.js';

const HANDLERS = `
import { writeFileSync } from 'node:fs';
export default {
  'fails.always': async () => { throw new Error('upstream answered 503'); },
  'slow.wait': (_payload, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', resolve)),
};
export function onWorkerStart(worker, docket) {
  if (!process.env.DOCKET_TEST_HOOK_FILE) return;
  writeFileSync(process.env.DOCKET_TEST_HOOK_FILE, JSON.stringify({
    workerId: worker.id,
    stats: Object.keys(worker.stats).sort(),
    events: typeof docket.events.on,
  }));
}
`;

/** The JSON log lines a run printed on stdout; fails if any stdout line is not JSON. */
function logLines(stdout: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe.runIf(storeKinds().includes('postgres'))('docket work when PostgreSQL drops its connections', () => {
  let dir: string;
  let db: TestDatabase;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'docket-work-conn-'));
    writeFileSync(join(dir, 'handlers.mjs'), HANDLERS);
    db = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('logs the store connection lost, then recovered', async () => {
    // A unique application_name marks this worker's connections, so only they are terminated.
    const app = `docket_cli_conn_${process.pid}_${Date.now()}`;
    const url = `${db.url}&application_name=${app}`;
    const worker = startDocket([
      'work',
      '--handlers',
      join(dir, 'handlers.mjs'),
      '--db',
      url,
      '--poll-interval-ms',
      '100',
    ]);
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    try {
      await expect.poll(() => worker.output().stdout, { timeout: 15_000 }).toContain('"msg":"worker started"');
      // Terminating an idle pooled connection costs the worker nothing (the pool replaces it), so
      // the worker's claim is first made to wait on a table lock: terminating its backend then
      // fails a store call in flight, which is what a database restart does.
      await admin.query('BEGIN');
      await admin.query(`LOCK TABLE ${db.schema}.jobs IN ACCESS EXCLUSIVE MODE`);
      await expect
        .poll(
          async () =>
            (
              await admin.query<{ n: number }>(
                "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
                [app],
              )
            ).rows[0]?.n ?? 0,
          { timeout: 15_000 },
        )
        .toBeGreaterThan(0);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
      await expect.poll(() => worker.output().stdout, { timeout: 15_000 }).toContain('docket: store connection lost');
      await admin.query('ROLLBACK');
      await expect
        .poll(() => worker.output().stdout, { timeout: 20_000 })
        .toContain('docket: store connection recovered');
      const lines = logLines(worker.output().stdout);
      expect(lines.find((line) => String(line.msg).startsWith('docket: store connection lost'))).toMatchObject({
        level: 40,
      });
      expect(lines.find((line) => String(line.msg).startsWith('docket: store connection recovered'))).toMatchObject({
        level: 30,
        downMs: expect.any(Number),
      });
      worker.child.kill('SIGTERM');
      const exit = await worker.exited;
      expect(exit.code, describeRun(exit)).toBe(0);
    } finally {
      worker.child.kill('SIGKILL');
      await admin.end();
    }
  }, 60_000);
});

describe.each(storeKinds())('docket work on %s', (kind) => {
  let dir: string;
  let db: TestDatabase;
  let docket: Docket;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'docket-work-obs-'));
    writeFileSync(join(dir, 'handlers.mjs'), HANDLERS);
    db = await createTestDatabase(kind);
    docket = await Docket.open({ url: db.url });
  });
  afterAll(async () => {
    await docket?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('logs failures and parks, serves metrics and health, registers itself and honours every source of settings', async () => {
    const workerId = `obs-${kind}`;
    const hookFile = join(dir, 'hook.json');
    const config = join(dir, 'docket.json');
    writeFileSync(config, JSON.stringify({ concurrency: 3, leaseMs: 60_000, queues: ['obs'] }));
    const failing = await docket.submit({
      kind: 'fails.always',
      queue: 'obs',
      maxAttempts: 2,
      retry: { baseDelayMs: 20, jitterRatio: 0 },
    });
    const orphan = await docket.submit({ kind: 'nobody.handles', queue: 'obs' });
    const worker = startDocket(['work', '--handlers', join(dir, 'handlers.mjs'), '--config', config, '--db', db.url], {
      env: { DOCKET_WORKER_ID: workerId, DOCKET_METRICS_PORT: '0', DOCKET_TEST_HOOK_FILE: hookFile },
    });
    try {
      await expect.poll(async () => (await docket.getJob(failing.id))?.state, { timeout: 20_000 }).toBe('dead');
      await expect.poll(() => worker.output().stdout, { timeout: 10_000 }).toContain('docket: job parked');
      const lines = logLines(worker.output().stdout);
      const failed = lines.filter((line) => String(line.msg).startsWith('docket: attempt failed'));
      expect(failed.map((line) => [line.jobId, line.kind, line.attempt, line.error, line.level])).toEqual([
        [failing.id, 'fails.always', 1, 'upstream answered 503', 40],
        [failing.id, 'fails.always', 2, 'upstream answered 503', 40],
      ]);
      const parked = lines.find((line) => String(line.msg).startsWith('docket: job parked'));
      expect(parked).toMatchObject({ jobId: failing.id, kind: 'fails.always', queue: 'obs', service: 'docket' });
      expect(worker.output().stderr).toBe('');

      // The hook ran with the worker and the Docket.
      await expect.poll(() => existsSync(hookFile), { timeout: 10_000 }).toBe(true);
      expect(JSON.parse(readFileSync(hookFile, 'utf8'))).toMatchObject({
        workerId,
        events: 'function',
        stats: expect.arrayContaining(['claimed', 'failed', 'parked']),
      });

      // Metrics and health for a worker-only process.
      const listening = logLines(worker.output().stdout).find((line) => line.msg === 'metrics endpoint listening');
      const url = String(listening?.url);
      const metrics = await (await fetch(`${url}/metrics`)).text();
      expect(metrics).toMatch(/docket_jobs_failed_total\{queue="obs"\} 2/);
      expect(metrics).toMatch(/docket_jobs_parked_total\{queue="obs"\} 1/);
      const health = (await (await fetch(`${url}/health`)).json()) as { status: string; workerId: string };
      expect(health).toMatchObject({ status: 'ok', workerId });

      // The registry shows the settings from the file (concurrency, queues) and the environment (id).
      const listed = await runDocketInProcess(['workers', 'list', '--json', '--db', db.url]);
      expect(listed.code, describeRun(listed)).toBe(0);
      const record = (JSON.parse(listed.stdout) as WorkerRecord[]).find((w) => w.id === workerId);
      expect(record).toMatchObject({ concurrency: 3, queues: ['obs'], origin: 'local' });
      expect(record?.kinds).toEqual(['fails.always', 'slow.wait']);
      const table = await runDocketInProcess(['workers', 'list', '--db', db.url]);
      expect(table.stdout).toMatch(
        new RegExp(`^${workerId}\\s+local\\s+\\S+\\s+\\d+\\s+obs\\s+fails\\.always,slow\\.wait\\s+3`, 'm'),
      );

      // The lease length from the file: a running job's lease ends about 60 s out.
      const slow = await docket.submit({ kind: 'slow.wait', queue: 'obs' });
      await expect.poll(async () => (await docket.getJob(slow.id))?.state, { timeout: 10_000 }).toBe('running');
      const leaseLeftMs =
        ((await docket.getJob(slow.id))?.leaseUntil?.getTime() ?? 0) - (await docket.store.now()).getTime();
      expect(leaseLeftMs).toBeGreaterThan(50_000);

      // The job nobody handles waits, pending, counted as unhandled.
      expect((await docket.getJob(orphan.id))?.state).toBe('pending');
      const stats = await runDocketInProcess(['stats', '--json', '--db', db.url]);
      expect(
        (JSON.parse(stats.stdout) as { queue: string; unhandled: number }[]).find((r) => r.queue === 'obs'),
      ).toMatchObject({
        unhandled: 1,
      });
      const byKind = await runDocketInProcess(['stats', '--kinds', '--json', '--db', db.url]);
      expect((JSON.parse(byKind.stdout) as { unhandled: unknown[] }).unhandled).toEqual([
        { queue: 'obs', kind: 'nobody.handles', count: 1 },
      ]);
      const statsTable = await runDocketInProcess(['stats', '--kinds', '--db', db.url]);
      expect(statsTable.stdout).toMatch(/UNHANDLED/);
      expect(statsTable.stdout).toMatch(/^obs\s+nobody\.handles\s+1$/m);

      worker.child.kill('SIGTERM');
      const exit = await worker.exited;
      expect(exit.code, describeRun(exit)).toBe(0);
      expect(logLines(exit.stdout).some((line) => line.msg === 'worker stopped')).toBe(true);
    } finally {
      worker.child.kill('SIGKILL');
    }
    // Deregistered on the graceful stop.
    const after = await runDocketInProcess(['workers', 'list', '--json', '--db', db.url]);
    expect((JSON.parse(after.stdout) as WorkerRecord[]).map((w) => w.id)).not.toContain(workerId);
  }, 60_000);

  it('logs a lost lease and the stale heartbeat behind it when a running job is cancelled', async () => {
    // A lease no stall of a loaded CI machine (1-2 s) outlasts: the loss is the cancel's refused
    // heartbeat, and with 1 s one slow heartbeat round trip read as lease_unconfirmed instead.
    // Heartbeats stay frequent, so the refusal comes soon.
    const worker = startDocket([
      'work',
      '--handlers',
      join(dir, 'handlers.mjs'),
      '--db',
      db.url,
      '--queues',
      'lease',
      '--lease-ms',
      '10000',
      '--heartbeat-interval-ms',
      '200',
      '--id',
      `lease-${kind}`,
    ]);
    try {
      const slow = await docket.submit({ kind: 'slow.wait', queue: 'lease' });
      await expect
        .poll(async () => (await docket.getJob(slow.id))?.state, { timeout: 15_000 })
        .toBe('running')
        .catch((error: unknown) => {
          throw new Error(`${(error as Error).message}\n${JSON.stringify(worker.output())}`);
        });
      const cancelled = await runDocketInProcess(['jobs', 'cancel', slow.id, '--db', db.url]);
      expect(cancelled.code, describeRun(cancelled)).toBe(0);
      await expect.poll(() => worker.output().stdout, { timeout: 10_000 }).toContain('docket: lease lost');
      const lines = logLines(worker.output().stdout);
      expect(lines.find((line) => String(line.msg).startsWith('docket: lease lost'))).toMatchObject({
        jobId: slow.id,
        kind: 'slow.wait',
        reason: 'heartbeat_refused',
        level: 40,
      });
      expect(lines.find((line) => String(line.msg).startsWith('docket: stale heartbeat'))).toMatchObject({
        jobId: slow.id,
        operation: 'heartbeat',
      });
      worker.child.kill('SIGTERM');
      const exit = await worker.exited;
      expect(exit.code, describeRun(exit)).toBe(0);
    } finally {
      worker.child.kill('SIGKILL');
    }
  }, 40_000);

  it('names the flag, variable or file key behind a refused worker setting', async () => {
    const config = join(dir, 'bad.json');
    writeFileSync(config, JSON.stringify({ prefetch: -1 }));
    const [fromFile, fromEnv, fromFlag] = await Promise.all([
      runDocketInProcess(['work', '--handlers', join(dir, 'handlers.mjs'), '--config', config, '--db', db.url]),
      (async () => {
        const run = startDocket(['work', '--handlers', join(dir, 'handlers.mjs'), '--db', db.url], {
          env: { DOCKET_MAX_CONCURRENT_CLAIMS: '99' },
        });
        return run.exited;
      })(),
      runDocketInProcess([
        'work',
        '--handlers',
        join(dir, 'handlers.mjs'),
        '--claim-batch-size',
        'lots',
        '--db',
        db.url,
      ]),
    ]);
    expect(fromFile.code, describeRun(fromFile)).toBe(2);
    expect(fromFile.stderr).toMatch(
      /worker option prefetch must be between 0 and \d+, got -1 \(from "prefetch" in .*bad\.json\)/,
    );
    expect(fromEnv.code, describeRun(fromEnv)).toBe(2);
    expect(fromEnv.stderr).toContain(
      'maxConcurrentClaims must be between 1 and 16, got 99 (from $DOCKET_MAX_CONCURRENT_CLAIMS)',
    );
    expect(fromFlag.code, describeRun(fromFlag)).toBe(2);
    expect(fromFlag.stderr).toContain('claimBatchSize must be an integer, got "lots" (from --claim-batch-size)');
  }, 30_000);
});
