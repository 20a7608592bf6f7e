import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../../src/http/server.js';
import { createServerLogger } from '../../src/http/server-logger.js';
import { countCalls } from '../support/store-calls.js';
import { runSqlScript, storeKinds, type TestDatabase } from '../support/stores.js';
import { startTestServer, type TestServer, TOKENS } from './http-support.js';

interface RemoteJob {
  id: string;
  token: number;
  receipt: string;
  kind: string;
  payload: unknown;
  attempt: number;
  leaseUntil: string;
}

/**
 * A long-poll re-check far beyond every bound below: a poll answered in time was answered by a
 * wake-up (or by close), never by the periodic re-check that hides a lost one.
 */
const RECHECK_NEVER_MS = 120_000;

/** Resolves once the server reports `count` remote claims waiting in a long poll. */
async function claimsWaiting(t: TestServer, count: number): Promise<void> {
  const gauge = new RegExp(`^docket_remote_claims_waiting ${count}$`, 'm');
  // Scrapes until the gauge shows it; the test's own timeout bounds the loop.
  while (!gauge.test((await t.call('GET', '/metrics')).body as string)) {
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * Puts a running job back to pending with the token it had before its last claim, as a promoted
 * standby that never received that claim (a lost WAL tail) holds it: the next claim then hands out
 * the same token number again.
 */
async function forgetLastClaim(db: TestDatabase, id: string): Promise<void> {
  const jobs = db.kind === 'sqlite' ? 'jobs' : `${db.schema}.jobs`;
  await runSqlScript(
    db,
    `UPDATE ${jobs} SET state = 'pending', token = token - 1, attempts = attempts - 1, lease_owner = NULL,
       lease_until = NULL WHERE id = ${Number(id)}`,
  );
}

/** A remote worker that speaks only HTTP, as a Python or Go worker would. */
function httpWorker(url: string, workerId: string) {
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS.worker.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  return {
    claim: async (options: { leaseMs?: number; waitMs?: number; queues?: string[] } = {}) => {
      const response = await post('/v1/worker/claim', { workerId, limit: 1, ...options });
      expect(response.status).toBe(200);
      return (response.body.jobs as RemoteJob[])[0];
    },
    heartbeat: (job: RemoteJob, leaseMs = 1000) =>
      post(`/v1/worker/jobs/${job.id}/heartbeat`, { token: job.token, receipt: job.receipt, leaseMs }),
    complete: (job: RemoteJob) =>
      post(`/v1/worker/jobs/${job.id}/complete`, { token: job.token, receipt: job.receipt }),
    fail: (job: RemoteJob, retryAfterMs?: number) =>
      post(`/v1/worker/jobs/${job.id}/fail`, {
        token: job.token,
        receipt: job.receipt,
        error: { message: 'remote failure' },
        retryAfterMs,
      }),
  };
}

for (const kind of storeKinds()) {
  describe(`remote workers over HTTP (${kind})`, () => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startTestServer({ kind });
    });
    afterAll(async () => {
      await t?.stop();
    });

    it('a worker that loses its lease is refused with 409 stale and keeps working', async () => {
      const a = httpWorker(t.url, 'worker-a');
      const b = httpWorker(t.url, 'worker-b');
      const submitted = await t.call('POST', '/v1/jobs', { body: { kind: 'remote.task', queue: `lease-${kind}` } });
      const id = (submitted.body as { id: string }).id;

      const first = await a.claim({ leaseMs: 300, queues: [`lease-${kind}`] });
      expect(first).toMatchObject({ id, token: expect.any(Number), attempt: 1, kind: 'remote.task' });
      // Worker A stalls past its lease (no heartbeat); B's long poll gets the job once it lapses.
      const second = await b.claim({ leaseMs: 30_000, waitMs: 5000, queues: [`lease-${kind}`] });
      expect(second?.id).toBe(id);
      expect(second?.token).toBeGreaterThan(first?.token as number);
      expect(second?.attempt).toBe(2);

      const beat = await a.heartbeat(first as RemoteJob);
      expect(beat.status).toBe(409);
      expect(beat.body).toMatchObject({ error: { code: 'stale' } });
      const late = await a.complete(first as RemoteJob);
      expect(late.status).toBe(409);
      const lateFail = await a.fail(first as RemoteJob);
      expect(lateFail.status).toBe(409);

      expect((await b.heartbeat(second as RemoteJob, 30_000)).status).toBe(200);
      expect((await b.complete(second as RemoteJob)).body).toEqual({ outcome: 'done' });
      expect((await t.call('GET', `/v1/jobs/${id}`)).body).toMatchObject({
        state: 'done',
        leaseOwner: expect.stringMatching(/^worker-b\/[0-9a-f]{16}$/),
      });

      // A survives: it claims and completes the next job normally.
      await t.call('POST', '/v1/jobs', { body: { kind: 'remote.task', queue: `lease-${kind}` } });
      const next = await a.claim({ waitMs: 2000, queues: [`lease-${kind}`] });
      expect(next).toBeDefined();
      expect((await a.complete(next as RemoteJob)).body).toEqual({ outcome: 'done' });

      const metrics = (await t.call('GET', '/metrics')).body as string;
      expect(metrics).toMatch(/docket_stale_results_total\{operation="heartbeat"\} 1/);
      expect(metrics).toMatch(/docket_stale_results_total\{operation="complete"\} 1/);
      expect(metrics).toMatch(new RegExp(`docket_leases_expired_total\\{queue="lease-${kind}"\\} 1`));
      expect(metrics).toMatch(new RegExp(`docket_jobs_completed_total\\{queue="lease-${kind}"\\} 2`));
    });

    it('concurrent completions share round trips, each answered, a repeat included, and counted once', async () => {
      const queue = `group-${kind}`;
      const submitted = await t.call('POST', '/v1/jobs/batch', {
        body: { jobs: Array.from({ length: 60 }, (_, i) => ({ kind: 'remote.task', queue, payload: { i } })) },
      });
      expect(submitted.status).toBe(201);
      const claim = await fetch(`${t.url}/v1/worker/claim`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKENS.worker.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ workerId: 'grouped', queues: [queue], limit: 60 }),
      });
      const jobs = ((await claim.json()) as { jobs: RemoteJob[] }).jobs;
      expect(jobs).toHaveLength(60);
      // Each round trip is held 100 ms, so requests arriving meanwhile gather into the next one.
      const store = t.server.docket.store;
      const original = store.jobCompleteMany.bind(store);
      const carried: number[] = [];
      store.jobCompleteMany = async (params) => {
        carried.push(params.leases.length);
        await new Promise((resolve) => setTimeout(resolve, 100));
        return original(params);
      };
      try {
        const worker = httpWorker(t.url, 'grouped');
        const answers = await Promise.all([...jobs, jobs[0]!].map((job) => worker.complete(job)));
        expect(answers.map((answer) => answer.body)).toEqual(answers.map(() => ({ outcome: 'done' })));
      } finally {
        store.jobCompleteMany = original;
      }
      expect(carried.reduce((sum, n) => sum + n, 0)).toBeGreaterThanOrEqual(60);
      expect(carried.length).toBeLessThan(20);
      const metrics = (await t.call('GET', '/metrics')).body as string;
      expect(metrics).toMatch(new RegExp(`docket_jobs_completed_total\\{queue="${queue}"\\} 60\n`));
    });

    it('a token handed out again to the same workerId (a lost WAL tail) cannot validate the first claim', async () => {
      const a = httpWorker(t.url, 'worker-a');
      const submitted = await t.call('POST', '/v1/jobs', { body: { kind: 'remote.task', queue: `wal-${kind}` } });
      const { id } = submitted.body as { id: string };
      const first = (await a.claim({ leaseMs: 30_000, queues: [`wal-${kind}`] })) as RemoteJob;
      expect(first.id).toBe(id);
      await forgetLastClaim(t.db, id);
      const second = (await a.claim({ leaseMs: 30_000, queues: [`wal-${kind}`] })) as RemoteJob;
      expect(second.id).toBe(id);
      // The same job, the same token number, the same workerId: only the claim's own owner differs.
      expect(second.token).toBe(first.token);
      expect(second.receipt).not.toBe(first.receipt);
      for (const late of [a.heartbeat(first, 30_000), a.fail(first), a.complete(first)]) {
        expect((await late).status).toBe(409);
      }
      expect((await t.call('GET', `/v1/jobs/${id}`)).body).toMatchObject({ state: 'running', attempts: 1 });
      expect((await a.complete(second)).body).toEqual({ outcome: 'done' });
    });

    it('a long-polling claim returns as soon as a job is submitted', async () => {
      // A server of its own whose re-check never fires in time: only the submit's wake-up can answer.
      const polled = await startTestServer({ kind, longPollRecheckMs: RECHECK_NEVER_MS });
      try {
        const w = httpWorker(polled.url, 'poller');
        const queue = `poll-${kind}`;
        const claiming = w.claim({ waitMs: 20_000, queues: [queue] });
        await claimsWaiting(polled, 1);
        const submittedAt = Date.now();
        await polled.call('POST', '/v1/jobs', { body: { kind: 'polled', queue } });
        const job = await claiming;
        expect(job?.kind).toBe('polled');
        // Well under the 20 s wait (a lost wake-up would return empty after it).
        expect(Date.now() - submittedAt).toBeLessThan(5000);
        await claimsWaiting(polled, 0);
        await w.complete(job as RemoteJob);
      } finally {
        await polled.stop();
      }
    });

    it('a long-polling claim sleeps through a job due later and returns it when it falls due', async () => {
      const polled = await startTestServer({ kind, longPollRecheckMs: RECHECK_NEVER_MS });
      const claims = countCalls(polled.server.docket.store, 'jobClaim');
      try {
        const w = httpWorker(polled.url, 'sleeper');
        const queue = `later-${kind}`;
        const claiming = w.claim({ waitMs: 20_000, queues: [queue] });
        await claimsWaiting(polled, 1);
        const submitted = await polled.call('POST', '/v1/jobs', { body: { kind: 'later', queue, delayMs: 400 } });
        const runAt = Date.parse((submitted.body as { runAt: string }).runAt);
        const job = await claiming;
        expect(job?.kind).toBe('later');
        expect(Date.now()).toBeGreaterThanOrEqual(runAt);
        // The claim before the wait and the one at the run time: the submit's hint woke nothing.
        expect(claims.count).toBe(2);
        await w.complete(job as RemoteJob);
      } finally {
        claims.restore();
        await polled.stop();
      }
    });

    it('an empty long poll returns no jobs after its wait', async () => {
      const w = httpWorker(t.url, 'idle');
      const startedAt = Date.now();
      expect(await w.claim({ waitMs: 300, queues: [`empty-${kind}`] })).toBeUndefined();
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(250);
    });

    it('fail backs off by the job policy and honours a longer retryAfterMs', async () => {
      const w = httpWorker(t.url, 'failer');
      const queue = `fail-${kind}`;
      await t.call('POST', '/v1/jobs', { body: { kind: 'flaky', queue, retry: { jitterRatio: 0 } } });
      const job = (await w.claim({ queues: [queue] })) as RemoteJob;
      const before = Date.now();
      const failed = await w.fail(job);
      expect(failed.body.outcome).toBe('retry');
      // Attempt 1 with the default policy: 1 s * 2^1 = 2 s, no jitter.
      const delay = Date.parse(failed.body.runAt as string) - before;
      expect(delay).toBeGreaterThan(1500);
      expect(delay).toBeLessThan(4000);

      await t.call('POST', '/v1/jobs', { body: { kind: 'throttled', queue: `${queue}-b` } });
      const throttled = (await w.claim({ queues: [`${queue}-b`] })) as RemoteJob;
      const retried = await w.fail(throttled, 60_000);
      expect(Date.parse(retried.body.runAt as string) - Date.now()).toBeGreaterThan(55_000);
    });

    it('a Python worker using only the standard library processes jobs over HTTP', async () => {
      const queue = `python-${kind}`;
      for (let i = 0; i < 3; i++) {
        await t.call('POST', '/v1/jobs', { body: { kind: 'py.square', queue, payload: { n: i + 2 } } });
      }
      const script = fileURLToPath(new URL('./fixtures/remote_worker.py', import.meta.url));
      const child = spawn('python3', [script, t.url, TOKENS.worker.token, queue, '3'], { stdio: 'pipe' });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
      child.stderr.on('data', (chunk: Buffer) => {
        output += chunk.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      expect(code, output).toBe(0);
      expect(output.trim().split('\n').sort()).toEqual(['done 4', 'done 9', 'done 16'].sort());
      const jobs = (await t.call('GET', `/v1/jobs?queue=${queue}`)).body as { jobs: { state: string }[] };
      expect(jobs.jobs.map((j) => j.state)).toEqual(['done', 'done', 'done']);
    });
  });
}

for (const kind of storeKinds()) {
  describe(`remote workers of two servers sharing a store and a receipt secret (${kind})`, () => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startTestServer({ kind, env: { DOCKET_RECEIPT_SECRET: 'shared-receipt-secret-0123' } });
    });
    afterAll(async () => {
      await t?.stop();
    });

    it('completes a lease the claiming server handed out without reading the job, and one claimed through the other by reading it', async () => {
      const other = await startServer({
        config: t.config,
        docket: t.server.docket,
        logger: createServerLogger('silent'),
      });
      try {
        const queue = `shared-${kind}`;
        for (let i = 0; i < 3; i++) await t.call('POST', '/v1/jobs', { body: { kind: 'remote.task', queue } });
        const claim = await fetch(`${t.url}/v1/worker/claim`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKENS.worker.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ workerId: 'roaming', queues: [queue], limit: 3 }),
        });
        const [first, second, third] = ((await claim.json()) as { jobs: RemoteJob[] }).jobs;
        const reads = countCalls(t.server.docket.store, 'jobGet');
        try {
          // Through the server that handed the lease out: checked against the owner it recorded.
          expect((await httpWorker(t.url, 'roaming').complete(first!)).body).toEqual({ outcome: 'done' });
          expect(reads.count).toBe(0);
          // Through the other server: checked by reading the job.
          expect((await httpWorker(other.url, 'roaming').complete(second!)).body).toEqual({ outcome: 'done' });
          expect(reads.count).toBeGreaterThan(0);
          // Another lease's receipt proves nothing, on either server.
          for (const url of [t.url, other.url]) {
            const forged = await httpWorker(url, 'roaming').complete({ ...third!, receipt: first!.receipt });
            expect(forged.status).toBe(409);
          }
          expect((await t.call('GET', `/v1/jobs/${third!.id}`)).body).toMatchObject({ state: 'running' });
          expect((await httpWorker(t.url, 'roaming').complete(third!)).body).toEqual({ outcome: 'done' });
          // A repeat after the first completion answers done again.
          expect((await httpWorker(t.url, 'roaming').complete(first!)).body).toEqual({ outcome: 'done' });
        } finally {
          reads.restore();
        }
        const counted = (url: string) =>
          fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKENS.all.token}` } }).then((r) => r.text());
        expect(await counted(t.url)).toMatch(new RegExp(`docket_jobs_completed_total\\{queue="${queue}"\\} 2\n`));
        expect(await counted(other.url)).toMatch(new RegExp(`docket_jobs_completed_total\\{queue="${queue}"\\} 1\n`));
      } finally {
        await other.close();
      }
    });
  });
}

describe('remote workers on a server keeping no done records (--retention-ms 0)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ flags: { retentionMs: '0' } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('a completion deletes the job, counts it once, and a repeat finds nothing (409)', async () => {
    const worker = httpWorker(t.url, 'lean-worker');
    const submitted = await t.call('POST', '/v1/jobs', { body: { kind: 'remote.task', queue: 'lean' } });
    const id = (submitted.body as { id: string }).id;
    const job = await worker.claim({ queues: ['lean'] });
    expect(job?.id).toBe(id);
    expect((await worker.complete(job as RemoteJob)).body).toEqual({ outcome: 'done' });
    expect((await t.call('GET', `/v1/jobs/${id}`)).status).toBe(404);
    const repeat = await worker.complete(job as RemoteJob);
    expect(repeat.status).toBe(409);
    expect(repeat.body).toMatchObject({ error: { code: 'stale' } });
    const metrics = (await t.call('GET', '/metrics')).body as string;
    expect(metrics).toMatch(/docket_jobs_completed_total\{queue="lean"\} 1/);
  });
});

describe('closing the server', () => {
  it('releases a pending long poll at once', async () => {
    const t = await startTestServer({ longPollRecheckMs: RECHECK_NEVER_MS });
    const w = httpWorker(t.url, 'closing');
    const claiming = w.claim({ waitMs: 25_000, queues: ['never'] });
    await claimsWaiting(t, 1);
    const closingAt = Date.now();
    await t.stop();
    expect(await claiming).toBeUndefined();
    // Well under the 25 s wait and the re-check: close itself released the waiting poll.
    expect(Date.now() - closingAt).toBeLessThan(5000);
  });
});
