/**
 * `docket serve` wires the CLI to the HTTP server: flags pass through to the server's own
 * validation (bad values exit 2 naming the setting), it serves until SIGTERM and then exits 0.
 * Each class of shared setting (store, Docket, worker) is observed in a running `serve` child:
 * the connect timeout against a closed port, the lease, id, concurrency and registry ttl of its
 * local workers through the API, unhandled parking and the shutdown grace; one config file that
 * also holds `work`-only keys configures it.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, POSTGRES_URL, storeKinds, type TestDatabase } from '../support/stores.js';
import { describeRun, runDocket, startDocket } from './run-docket.js';

describe('docket serve', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'docket-cli-serve-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the API on the store from DOCKET_DATABASE_URL until SIGTERM, then exits 0', async () => {
    const server = startDocket(['serve', '--port', '0', '--concurrency', '0', '--log-level', 'warn'], {
      env: { DOCKET_DATABASE_URL: `sqlite:${join(dir, 'serve.db')}` },
    });
    try {
      await expect
        .poll(() => /serving on (http:\/\/\S+)/.exec(server.output().stderr)?.[1], { timeout: 20_000 })
        .toBeTruthy();
      const url = /serving on (http:\/\/\S+)/.exec(server.output().stderr)?.[1];
      const health = await fetch(`${url}/health`);
      expect(health.status).toBe(200);
      expect(existsSync(join(dir, 'serve.db'))).toBe(true);
      server.child.kill('SIGTERM');
      const exit = await server.exited;
      expect(exit.code, describeRun(exit)).toBe(0);
    } finally {
      server.child.kill('SIGKILL');
    }
  });

  it('exits 2 naming the setting when a flag fails the server validation', async () => {
    const result = await runDocket(['serve', '--port', '80a']);
    expect(result.code, describeRun(result)).toBe(2);
    expect(result.stderr).toContain('port (from --port): must be an integer from 0 to 65535');
  });

  it("exits 2 naming the source when a worker option breaks the worker's rule", async () => {
    const result = await runDocket(['serve', '--db', 'sqlite::memory:', '--lease-ms', '10']);
    expect(result.code, describeRun(result)).toBe(2);
    expect(result.stderr).toContain('leaseMs (from --lease-ms): must be between 100 and 86400000, got 10');
    const env = await runDocket(['serve', '--db', 'sqlite::memory:'], { env: { DOCKET_PREFETCH: '-3' } });
    expect(env.code, describeRun(env)).toBe(2);
    expect(env.stderr).toContain('prefetch (from $DOCKET_PREFETCH): must be between 0 and 100000, got -3');
  });

  it('gives up on a PostgreSQL server that refuses connections after --connect-timeout-ms', async () => {
    // Port 1 on loopback refuses at once: how long serve keeps retrying is the setting alone.
    const closed = 'postgres://postgres@127.0.0.1:1/test';
    const timed = async (args: string[]) => {
      const startedAt = Date.now();
      const result = await runDocket(['serve', '--port', '0', '--db', closed, ...args]);
      return { result, elapsedMs: Date.now() - startedAt };
    };
    const fast = await timed(['--connect-timeout-ms', '0']);
    expect(fast.result.code, describeRun(fast.result)).toBe(1);
    expect(fast.result.stderr).not.toContain('serving on');
    expect(fast.result.stderr).toContain(
      `cannot open the store ${closed}: connect ECONNREFUSED 127.0.0.1:1 (connectTimeoutMs: 0, from --connect-timeout-ms)`,
    );
    // The store gives up once its next backoff (at most 2 s) would overshoot the timeout.
    const patient = await timed(['--connect-timeout-ms', '6000']);
    expect(patient.result.code, describeRun(patient.result)).toBe(1);
    expect(patient.elapsedMs - fast.elapsedMs).toBeGreaterThanOrEqual(3500);
    // The same setting from the environment, named in the error; the default (30 s) would retry far longer.
    const env = await runDocket(['serve', '--port', '0', '--db', closed], { env: { DOCKET_CONNECT_TIMEOUT_MS: '0' } });
    expect(env.code, describeRun(env)).toBe(1);
    expect(env.stderr).toContain('(connectTimeoutMs: 0, from $DOCKET_CONNECT_TIMEOUT_MS)');
  }, 60_000);
});

type StoreKind = TestDatabase['kind'];

for (const kind of storeKinds() as StoreKind[]) {
  describe(`docket serve honours the worker and Docket options of its local workers (${kind})`, () => {
    let db: TestDatabase;
    let dir: string;
    beforeAll(async () => {
      db = await createTestDatabase(kind);
      dir = mkdtempSync(join(tmpdir(), 'docket-serve-settings-'));
    });
    afterAll(async () => {
      await db?.drop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('leases for leaseMs, registers as id with its concurrency and ttl, parks unhandled jobs, stops within the grace', async () => {
      const handlers = join(dir, 'handlers.mjs');
      writeFileSync(
        handlers,
        `export default {
  'slow.job': (payload, ctx) => new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 60000);
    ctx.signal.addEventListener('abort', () => { clearTimeout(timer); reject(new Error('aborted')); });
  }),
};
`,
      );
      // One file shared with docket work: work's own metrics keys are accepted here and reported.
      const config = join(dir, 'docket.json');
      writeFileSync(
        config,
        JSON.stringify({ leaseMs: 120_000, registryTtlMs: 45_000, metricsPort: 9464, metricsHost: '127.0.0.1' }),
      );
      const workerId = `srv-${kind}`;
      const storeEnv =
        db.kind === 'postgres'
          ? { DOCKET_DATABASE_URL: POSTGRES_URL, DOCKET_SCHEMA: db.schema }
          : { DOCKET_DATABASE_URL: db.url };
      const serve = startDocket(
        [
          'serve',
          '--port',
          '0',
          '--log-level',
          'warn',
          '--config',
          config,
          '--handlers',
          handlers,
          '--concurrency',
          '3',
          '--unhandled-after-ms',
          '400',
          '--shutdown-grace-ms',
          '300',
        ],
        {
          env: { ...storeEnv, DOCKET_WORKER_ID: workerId, DOCKET_WEBHOOK_SECRET: 'serve-settings-secret-0123456789' },
        },
      );
      try {
        await expect
          .poll(() => /serving on (http:\/\/\S+)/.exec(serve.output().stderr)?.[1], { timeout: 20_000, interval: 50 })
          .toBeDefined();
        const url = /serving on (http:\/\/\S+)/.exec(serve.output().stderr)?.[1] as string;
        const post = async (body: unknown) => {
          const response = await fetch(`${url}/v1/jobs`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          expect(response.status).toBe(201);
          return ((await response.json()) as { id: string }).id;
        };
        const job = async (id: string) =>
          (await (await fetch(`${url}/v1/jobs/${id}`)).json()) as Record<string, unknown>;

        const slow = await post({ kind: 'slow.job' });
        await expect.poll(async () => (await job(slow)).state, { timeout: 15_000, interval: 50 }).toBe('running');
        const running = await job(slow);
        const leaseLeftMs = Date.parse(running.leaseUntil as string) - Date.now();
        // leaseMs from the file: the default lease (30 s) would have under 30 s left.
        expect(leaseLeftMs).toBeGreaterThan(90_000);
        expect(leaseLeftMs).toBeLessThanOrEqual(125_000);
        expect(String(running.leaseOwner)).toMatch(new RegExp(`^${workerId}/`));

        const { workers } = (await (await fetch(`${url}/v1/workers`)).json()) as {
          workers: { id: string; kinds: string[]; concurrency: number; lastSeenAt: string; expiresAt: string }[];
        };
        const byId = new Map(workers.map((w) => [w.id, w]));
        expect(byId.get(workerId)).toMatchObject({ kinds: ['slow.job'], concurrency: 3 });
        expect(byId.get(`${workerId}-builtin`)).toMatchObject({ kinds: ['docket.webhook'], concurrency: 3 });
        for (const worker of [byId.get(workerId), byId.get(`${workerId}-builtin`)]) {
          const ttl = Date.parse(worker?.expiresAt as string) - Date.parse(worker?.lastSeenAt as string);
          expect(Math.abs(ttl - 45_000)).toBeLessThan(1000);
        }

        // unhandledAfterMs (a Docket option): a kind no live worker serves is parked, saying why.
        const orphan = await post({ kind: 'nobody.handles', queue: 'misc' });
        await expect.poll(async () => (await job(orphan)).state, { timeout: 15_000, interval: 100 }).toBe('dead');
        expect(JSON.stringify(await job(orphan))).toContain('400 ms (unhandledAfterMs)');

        expect(serve.output().stdout).toContain('config file setting metricsPort applies to docket work only');
        // shutdownGraceMs 300: the handler, which runs until aborted, is cut off after 0.3 s, not the default 10 s.
        const stoppingAt = Date.now();
        serve.child.kill('SIGTERM');
        const exit = await serve.exited;
        expect(exit.code, describeRun(exit)).toBe(0);
        expect(Date.now() - stoppingAt).toBeLessThan(8000);
      } finally {
        serve.child.kill('SIGKILL');
      }
    }, 60_000);
  });
}
