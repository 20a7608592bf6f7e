import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './http-support.js';

type Json = Record<string, unknown>;

describe('HTTP API on a real server (SQLite)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('submits a job and returns it by id', async () => {
    const submit = await t.call('POST', '/v1/jobs', {
      body: { kind: 'email.send', payload: { to: 'a@example.com' }, runAt: '2030-01-01T00:00:00Z', queue: 'mail' },
    });
    expect(submit.status).toBe(201);
    const { id, created, runAt } = submit.body as Json;
    expect(created).toBe(true);
    expect(runAt).toBe('2030-01-01T00:00:00.000Z');
    expect(submit.headers.get('location')).toBe(`/v1/jobs/${id}`);

    const got = await t.call('GET', `/v1/jobs/${id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      id,
      kind: 'email.send',
      queue: 'mail',
      state: 'pending',
      payload: { to: 'a@example.com' },
      attempts: 0,
      maxAttempts: 5,
    });
  });

  it('returns the first job for a retried submit with the same Idempotency-Key', async () => {
    const body = { kind: 'charge', payload: { amount: 5 } };
    const headers = { 'idempotency-key': 'order-77' };
    const first = await t.call('POST', '/v1/jobs', { body, headers });
    const second = await t.call('POST', '/v1/jobs', { body, headers });
    expect(first.status).toBe(201);
    expect(second.status).toBe(200);
    expect((second.body as Json).id).toBe((first.body as Json).id);
    expect((second.body as Json).created).toBe(false);
    const list = await t.call('GET', '/v1/jobs?kind=charge');
    expect((list.body as { jobs: unknown[] }).jobs).toHaveLength(1);
  });

  it('submits a batch atomically and repeats it idempotently', async () => {
    const body = { jobs: [{ kind: 'batch.a' }, { kind: 'batch.b', priority: 3 }] };
    const headers = { 'idempotency-key': 'import-1' };
    const first = await t.call('POST', '/v1/jobs/batch', { body, headers });
    expect(first.status).toBe(201);
    const again = await t.call('POST', '/v1/jobs/batch', { body, headers });
    expect(again.status).toBe(200);
    expect((again.body as { jobs: Json[] }).jobs.map((j) => j.id)).toEqual(
      (first.body as { jobs: Json[] }).jobs.map((j) => j.id),
    );
  });

  it('lists with filters and keyset paging', async () => {
    for (let i = 0; i < 5; i++) {
      expect((await t.call('POST', '/v1/jobs', { body: { kind: 'page.me', queue: 'paging' } })).status).toBe(201);
    }
    const seen: string[] = [];
    let after: string | null = null;
    for (;;) {
      const page = await t.call(
        'GET',
        `/v1/jobs?queue=paging&state=pending,running&limit=2${after ? `&after=${after}` : ''}`,
      );
      expect(page.status).toBe(200);
      const { jobs, next } = page.body as { jobs: Json[]; next: string | null };
      seen.push(...jobs.map((j) => j.id as string));
      if (!next) break;
      after = next;
    }
    expect(seen).toHaveLength(5);
    expect(new Set(seen).size).toBe(5);
    expect([...seen].sort((a, b) => Number(a) - Number(b))).toEqual(seen);
  });

  it('cancels a live job, then answers 409 for a second cancel and 404 for an unknown id', async () => {
    const { id } = (await t.call('POST', '/v1/jobs', { body: { kind: 'to.cancel', delayMs: 60_000 } })).body as Json;
    expect((await t.call('POST', `/v1/jobs/${id}/cancel`)).status).toBe(200);
    expect((await t.call('GET', `/v1/jobs/${id}`)).body).toMatchObject({ state: 'cancelled' });
    const again = await t.call('POST', `/v1/jobs/${id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: { code: 'already_finished' } });
    const missing = await t.call('POST', '/v1/jobs/999999/cancel');
    expect(missing.status).toBe(404);
    expect((await t.call('GET', '/v1/jobs/999999')).status).toBe(404);
  });

  it('lists, retries and purges dead letters', async () => {
    const park = async (kind: string) => {
      const { id } = (await t.call('POST', '/v1/jobs', { body: { kind, queue: 'doomed', maxAttempts: 1 } }))
        .body as Json;
      const claim = await t.call('POST', '/v1/worker/claim', { body: { workerId: 'w', queues: ['doomed'] } });
      const [job] = (claim.body as { jobs: Json[] }).jobs;
      expect(job?.id).toBe(id);
      const fail = await t.call('POST', `/v1/worker/jobs/${id}/fail`, {
        body: { token: job?.token, receipt: job?.receipt, error: { message: 'boom' } },
      });
      expect(fail.body).toEqual({ outcome: 'parked' });
      return id as string;
    };
    const a = await park('dead.a');
    const b = await park('dead.b');
    const list = await t.call('GET', '/v1/dead-letters?queue=doomed');
    expect((list.body as { jobs: Json[] }).jobs.map((j) => j.id)).toEqual([a, b]);
    expect((list.body as { jobs: Json[] }).jobs[0]).toMatchObject({ state: 'dead', errors: [{ message: 'boom' }] });

    const retried = await t.call('POST', `/v1/dead-letters/${a}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ id: a, state: 'pending', attempts: 0 });
    expect((await t.call('POST', `/v1/dead-letters/${a}/retry`)).status).toBe(404);

    const purge = await t.call('POST', '/v1/dead-letters/purge', { body: { ids: [b] } });
    expect(purge.body).toEqual({ purged: 1 });
    expect((await t.call('GET', '/v1/dead-letters?queue=doomed')).body).toMatchObject({ jobs: [] });
  });

  it('reports queue statistics', async () => {
    const stats = await t.call('GET', '/v1/stats');
    expect(stats.status).toBe(200);
    const mail = (stats.body as { queues: Json[] }).queues.find((q) => q.queue === 'mail');
    expect(mail).toMatchObject({ scheduled: 1 });
  });

  it('serves health, readiness and an OpenAPI document naming every route', async () => {
    expect((await t.call('GET', '/health', { token: null })).body).toEqual({ status: 'ok' });
    expect((await t.call('GET', '/ready', { token: null })).body).toEqual({ status: 'ready' });
    const doc = (await t.call('GET', '/openapi.json', { token: null })).body as { openapi: string; paths: Json };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/v1/jobs',
        '/v1/jobs/batch',
        '/v1/jobs/{id}',
        '/v1/jobs/{id}/cancel',
        '/v1/dead-letters',
        '/v1/dead-letters/{id}/retry',
        '/v1/dead-letters/purge',
        '/v1/stats',
        '/v1/worker/claim',
        '/v1/worker/jobs/{id}/heartbeat',
        '/v1/worker/jobs/{id}/complete',
        '/v1/worker/jobs/{id}/fail',
        '/metrics',
      ]),
    );
  });

  it('exposes Prometheus metrics including queue depth and counters', async () => {
    const metrics = await t.call('GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toContain('text/plain');
    const text = metrics.body as string;
    for (const name of [
      'docket_jobs_submitted_total',
      'docket_jobs_claimed_total',
      'docket_jobs_completed_total',
      'docket_jobs_failed_total',
      'docket_jobs_parked_total',
      'docket_stale_results_total',
      'docket_leases_expired_total',
      'docket_job_lateness_seconds',
      'docket_job_duration_seconds',
      'docket_queue_depth',
    ]) {
      expect(text).toContain(`# TYPE ${name}`);
    }
    expect(text).toMatch(/docket_queue_depth\{queue="mail",state="scheduled"\} 1/);
    expect(text).toMatch(/docket_jobs_parked_total\{queue="doomed"\} 2/);
    expect(text).not.toContain('secret');
  });
});
