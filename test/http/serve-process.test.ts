/**
 * `docket serve` as a real child process: its default workers claim only built-in kinds (issue 10
 * item 4: a user kind stays pending, visibly unhandled, until a remote worker takes it),
 * `--handlers FILE` adds a local worker for the file's kinds, and under 2,000 concurrent submits a
 * SIGTERM drains cleanly (every acknowledged job exists, and every written job was acknowledged:
 * no accepted request was answered with a reset) while a SIGKILL loses no acknowledged job.
 */

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/open-store.js';
import { type RunningCli, startDocket } from '../cli/run-docket.js';
import { createTestDatabase, POSTGRES_URL, storeKinds, type TestDatabase } from '../support/stores.js';

type StoreKind = TestDatabase['kind'];

function storeEnv(db: TestDatabase): NodeJS.ProcessEnv {
  return db.kind === 'postgres'
    ? { DOCKET_DATABASE_URL: POSTGRES_URL, DOCKET_SCHEMA: db.schema }
    : { DOCKET_DATABASE_URL: db.url };
}

async function startServe(db: TestDatabase, args: string[] = [], env: NodeJS.ProcessEnv = {}) {
  const serve = startDocket(['serve', '--port', '0', '--log-level', 'warn', ...args], {
    env: { ...storeEnv(db), ...env },
  });
  await expect
    .poll(() => /serving on (http:\/\/\S+)/.exec(serve.output().stderr)?.[1], { timeout: 20_000, interval: 50 })
    .toBeDefined();
  const url = /serving on (http:\/\/\S+)/.exec(serve.output().stderr)?.[1] as string;
  return { serve, url };
}

const post = async (url: string, body: unknown) => {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};
const get = async (url: string) => (await (await fetch(url)).json()) as Record<string, unknown>;

async function stop(serve: RunningCli) {
  if (serve.child.exitCode === null && serve.child.signalCode === null) serve.child.kill('SIGTERM');
  return serve.exited;
}

for (const kind of storeKinds() as StoreKind[]) {
  describe(`docket serve defaults (${kind})`, () => {
    let db: TestDatabase;
    let dir: string;
    beforeAll(async () => {
      db = await createTestDatabase(kind);
      dir = mkdtempSync(join(tmpdir(), 'docket-serve-defaults-'));
    });
    afterAll(async () => {
      await db?.drop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('runs only built-in kinds locally: a user kind waits, unhandled, and a remote worker gets it', async () => {
      const deliveries: string[] = [];
      const receiver = createServer((req, res) => {
        deliveries.push(req.url ?? '');
        res.writeHead(204).end();
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
      const port = (receiver.address() as { port: number }).port;
      const { serve, url } = await startServe(db, [], {
        DOCKET_WEBHOOK_SECRET: 'serve-defaults-secret-0123456789',
        DOCKET_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
        DOCKET_WEBHOOK_ALLOW_ADDRESSES: '127.0.0.1/32',
      });
      try {
        const report = await post(`${url}/v1/jobs`, { kind: 'report.build', queue: 'reports' });
        expect(report.status).toBe(201);
        // A webhook submitted after it is claimed and delivered by the local built-in worker: the
        // local workers were claiming all along, and still left report.build alone.
        const hook = await post(`${url}/v1/jobs`, {
          kind: 'docket.webhook',
          payload: { url: `http://127.0.0.1:${port}/d` },
        });
        await expect
          .poll(async () => (await get(`${url}/v1/jobs/${hook.body.id}`)).state, { timeout: 15_000, interval: 50 })
          .toBe('done');
        expect(deliveries).toEqual(['/d']);
        expect(await get(`${url}/v1/jobs/${report.body.id}`)).toMatchObject({ state: 'pending', attempts: 0 });
        const workers = (await get(`${url}/v1/workers`)).workers as Record<string, unknown>[];
        expect(workers).toEqual([
          expect.objectContaining({ origin: 'local', kinds: ['docket.webhook'], queues: ['docket.builtin'] }),
        ]);
        const stats = await get(`${url}/v1/stats`);
        expect(stats.unhandled).toBe(1);
        expect(stats.queues).toEqual(
          expect.arrayContaining([expect.objectContaining({ queue: 'reports', available: 1, unhandled: 1 })]),
        );
        const metrics = await (await fetch(`${url}/metrics`)).text();
        expect(metrics).toMatch(/docket_jobs_unhandled\{queue="reports",kind="report.build"\} 1/);
        expect(metrics).toMatch(/docket_workers\{origin="local"\} 1/);

        const claim = await post(`${url}/v1/worker/claim`, { workerId: 'reporter', kinds: ['report.build'] });
        const [job] = claim.body.jobs as { id: string; token: number; receipt: string }[];
        expect(job?.id).toBe(report.body.id);
        const done = await post(`${url}/v1/worker/jobs/${job?.id}/complete`, {
          token: job?.token,
          receipt: job?.receipt,
        });
        expect(done.body).toEqual({ outcome: 'done' });
        const registry = (await get(`${url}/v1/workers`)).workers as Record<string, unknown>[];
        expect(registry).toEqual(
          expect.arrayContaining([
            expect.objectContaining({
              id: 'reporter',
              origin: 'remote',
              kinds: ['report.build'],
              excludeKinds: ['docket.webhook'],
            }),
          ]),
        );
      } finally {
        await stop(serve);
        receiver.closeAllConnections();
        await new Promise<void>((resolve) => receiver.close(() => resolve()));
      }
    }, 40_000);

    it("--handlers FILE runs that file's kinds locally and nothing else", async () => {
      const handlers = join(dir, 'handlers.mjs');
      writeFileSync(handlers, "export default { 'report.build': async (payload) => ({ built: payload }) };\n");
      const { serve, url } = await startServe(db, ['--handlers', handlers, '--queues', 'reports2']);
      try {
        const report = await post(`${url}/v1/jobs`, { kind: 'report.build', queue: 'reports2' });
        const other = await post(`${url}/v1/jobs`, { kind: 'invoice.build', queue: 'reports2' });
        await expect
          .poll(async () => (await get(`${url}/v1/jobs/${report.body.id}`)).state, { timeout: 15_000, interval: 50 })
          .toBe('done');
        expect(await get(`${url}/v1/jobs/${other.body.id}`)).toMatchObject({ state: 'pending', attempts: 0 });
      } finally {
        expect((await stop(serve)).code).toBe(0);
      }
    }, 40_000);
  });
}

/** Fires `count` concurrent submits; calls `onAck` after each acknowledged one. */
function submitStorm(url: string, count: number, onAck: (acked: number) => void) {
  const target = new URL(url);
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const acked = new Map<number, string>();
  const failures = new Map<number, string>();
  const one = (n: number) =>
    new Promise<void>((resolve) => {
      const body = JSON.stringify({ kind: 'storm', queue: 'storm', payload: { n } });
      const req = request(
        {
          host: target.hostname,
          port: target.port,
          method: 'POST',
          path: '/v1/jobs',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            text += chunk;
          });
          res.on('end', () => {
            if (res.statusCode === 201) {
              acked.set(n, (JSON.parse(text) as { id: string }).id);
              onAck(acked.size);
            } else failures.set(n, `HTTP ${res.statusCode}`);
            resolve();
          });
          res.on('error', (error: NodeJS.ErrnoException) => {
            failures.set(n, error.code ?? error.message);
            resolve();
          });
        },
      );
      req.on('error', (error: NodeJS.ErrnoException) => {
        failures.set(n, error.code ?? error.message);
        resolve();
      });
      req.end(body);
    });
  const done = Promise.all(Array.from({ length: count }, (_, n) => one(n))).then(() => agent.destroy());
  return { acked, failures, done };
}

/** Every job of the storm in the store, by its payload number. */
async function stormJobs(db: TestDatabase): Promise<Map<number, string>> {
  const store = await (db.kind === 'postgres' ? openStore(POSTGRES_URL, { schema: db.schema }) : db.open());
  try {
    const found = new Map<number, string>();
    let afterId: string | undefined;
    for (;;) {
      const page = await store.jobList({ queue: 'storm', limit: 1000, afterId });
      for (const job of page) found.set((job.payload as { n: number }).n, job.id);
      if (page.length < 1000) return found;
      afterId = page.at(-1)?.id;
    }
  } finally {
    await store.close();
  }
}

for (const kind of storeKinds() as StoreKind[]) {
  describe(`2,000 concurrent submits to a real docket serve (${kind})`, () => {
    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      it(`${signal} part-way: every acknowledged job exists${signal === 'SIGTERM' ? ', and every written job was acknowledged' : ''}`, async () => {
        const db = await createTestDatabase(kind);
        try {
          const { serve, url } = await startServe(db, ['--concurrency', '0']);
          let signalled = false;
          const storm = submitStorm(url, 2000, (acked) => {
            if (!signalled && acked >= 300) {
              signalled = true;
              serve.child.kill(signal);
            }
          });
          await storm.done;
          const exit = await serve.exited;
          expect(signalled).toBe(true);
          const written = await stormJobs(db);
          const reasons: Record<string, number> = {};
          for (const reason of storm.failures.values()) reasons[reason] = (reasons[reason] ?? 0) + 1;
          // Printed with any failed assertion below, so a failure on a loaded machine explains itself.
          const summary = JSON.stringify({
            acked: storm.acked.size,
            written: written.size,
            reasons,
            exit: { code: exit.code, signal: exit.signal },
            stderr: exit.stderr.slice(-2000),
          });
          // Every acknowledged id is durable, under the number it was acknowledged for.
          for (const [n, id] of storm.acked) expect(written.get(n), `job ${n}: ${summary}`).toBe(id);
          expect(storm.acked.size + storm.failures.size, summary).toBe(2000);
          if (signal === 'SIGTERM') {
            expect(exit.code, summary).toBe(0);
            // Nothing accepted went unanswered: a job in the store was always acknowledged.
            const unacknowledged = [...written.keys()].filter((n) => !storm.acked.has(n));
            expect(unacknowledged, summary).toEqual([]);
            // The rest were refused cleanly: a refused (or unread) connection, never an HTTP error.
            for (const reason of Object.keys(reasons)) {
              expect(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'socket hang up'], summary).toContain(reason);
            }
          } else {
            expect(exit.signal, summary).toBe('SIGKILL');
          }
        } finally {
          await db.drop();
        }
      }, 60_000);
    }
  });
}
