import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './http-support.js';

interface Case {
  name: string;
  method?: string;
  path?: string;
  /** A string is sent as is (malformed JSON); anything else is JSON-encoded. */
  body?: unknown;
  headers?: Record<string, string>;
  status: number;
  /** The field the error must name (omitted when the error is about the whole body). */
  field?: string;
  /** A fragment the message must contain. */
  message?: RegExp;
}

const HUGE = 'x'.repeat(2 * 1024 * 1024);

const CASES: Case[] = [
  // Malformed JSON and media types.
  { name: 'malformed JSON', body: '{"kind": ', status: 400, field: 'body', message: /not valid JSON/ },
  { name: 'trailing garbage after JSON', body: '{"kind":"a"} x', status: 400, field: 'body' },
  { name: 'an empty body', body: '', status: 400, field: 'body', message: /empty body/ },
  { name: 'a JSON array instead of an object', body: [], status: 400, field: 'job', message: /must be an object/ },
  { name: 'a JSON string instead of an object', body: '"job"', status: 400, field: 'job' },
  { name: 'JSON null', body: 'null', status: 400, field: 'job' },
  { name: 'a text/plain body', body: '{"kind":"a"}', headers: { 'content-type': 'text/plain' }, status: 415 },
  // Wrong types.
  { name: 'a numeric kind', body: { kind: 5 }, status: 400, field: 'kind', message: /non-empty string/ },
  { name: 'a missing kind', body: { payload: {} }, status: 400, field: 'kind' },
  { name: 'a string priority', body: { kind: 'a', priority: 'high' }, status: 400, field: 'priority' },
  { name: 'a fractional maxAttempts', body: { kind: 'a', maxAttempts: 1.5 }, status: 400, field: 'maxAttempts' },
  { name: 'zero maxAttempts', body: { kind: 'a', maxAttempts: 0 }, status: 400, field: 'maxAttempts' },
  { name: 'a string retry policy', body: { kind: 'a', retry: 'fast' }, status: 400, field: 'retry' },
  { name: 'a shrinking backoff', body: { kind: 'a', retry: { factor: 0.5 } }, status: 400, field: 'retry.factor' },
  { name: 'a negative delay', body: { kind: 'a', delayMs: -1 }, status: 400, field: 'delayMs' },
  { name: 'a zero timeout', body: { kind: 'a', timeoutMs: 0 }, status: 400, field: 'timeoutMs' },
  { name: 'an object as queue', body: { kind: 'a', queue: { $ne: 1 } }, status: 400, field: 'queue' },
  // Impossible dates.
  { name: 'February 30th', body: { kind: 'a', runAt: '2026-02-30T00:00:00Z' }, status: 400, field: 'runAt' },
  { name: 'month 13', body: { kind: 'a', runAt: '2026-13-01T00:00:00Z' }, status: 400, field: 'runAt' },
  { name: 'hour 25', body: { kind: 'a', runAt: '2026-01-01T25:00:00Z' }, status: 400, field: 'runAt' },
  { name: 'words as a date', body: { kind: 'a', runAt: 'next tuesday' }, status: 400, field: 'runAt' },
  { name: 'a date past year 9999', body: { kind: 'a', runAt: 1e15 }, status: 400, field: 'runAt' },
  { name: 'a date before 1970', body: { kind: 'a', runAt: -5 }, status: 400, field: 'runAt' },
  { name: 'both runAt and delayMs', body: { kind: 'a', runAt: 0, delayMs: 5 }, status: 400, field: 'delayMs' },
  // SQL-looking strings where they are not allowed.
  {
    name: 'SQL in a queue name',
    body: { kind: 'a', queue: "default'; DROP TABLE jobs;--" },
    status: 400,
    field: 'queue',
  },
  { name: 'SQL in a path id', method: 'GET', path: '/v1/jobs/1%20OR%201=1', status: 400, field: 'id' },
  { name: 'SQL in a cancel id', path: "/v1/jobs/1';DELETE%20FROM%20jobs;--/cancel", status: 400, field: 'id' },
  {
    name: 'SQL in a state filter',
    method: 'GET',
    path: "/v1/jobs?state=pending'%20OR%20'1'='1",
    status: 400,
    field: 'state',
  },
  {
    name: 'SQL in a paging cursor',
    method: 'GET',
    path: '/v1/jobs?after=1;DROP%20TABLE%20jobs',
    status: 400,
    field: 'after',
  },
  {
    name: 'SQL in dead-letter ids',
    path: '/v1/dead-letters/purge',
    body: { ids: ['1 OR 1=1'] },
    status: 400,
    field: 'ids[0]',
  },
  // Unknown fields.
  {
    name: 'an unknown top-level field',
    body: { kind: 'a', sendAt: 5 },
    status: 400,
    field: 'sendAt',
    message: /unknown/,
  },
  { name: 'an unknown retry field', body: { kind: 'a', retry: { base: 1 } }, status: 400, field: 'retry.base' },
  { name: 'an unknown query parameter', method: 'GET', path: '/v1/jobs?sort=id', status: 400, field: 'sort' },
  {
    name: 'an unknown claim field',
    path: '/v1/worker/claim',
    body: { workerId: 'w', greedy: true },
    status: 400,
    field: 'greedy',
  },
  // Huge bodies.
  { name: 'a 2 MiB body', body: { kind: 'a', payload: HUGE }, status: 413, field: 'body', message: /limit/ },
  {
    name: 'a payload over 256 KiB',
    body: { kind: 'a', payload: 'y'.repeat(300 * 1024) },
    status: 400,
    field: 'payload',
  },
  {
    name: 'a batch of more than 1000 jobs',
    path: '/v1/jobs/batch',
    body: { jobs: Array.from({ length: 1001 }, () => ({ kind: 'a' })) },
    status: 400,
    field: 'jobs',
  },
  // Batches are all-or-nothing: the valid first job must not be written either.
  {
    name: 'a batch with one bad job',
    path: '/v1/jobs/batch',
    body: { jobs: [{ kind: 'fine' }, { kind: 'bad', runAt: 'soon' }] },
    status: 400,
    field: 'jobs[1].runAt',
  },
  { name: 'an empty batch', path: '/v1/jobs/batch', body: { jobs: [] }, status: 400, field: 'jobs' },
  // Headers and other endpoints.
  {
    name: 'an over-long Idempotency-Key',
    body: { kind: 'a' },
    headers: { 'idempotency-key': 'k'.repeat(500) },
    status: 400,
    field: 'Idempotency-Key',
  },
  {
    name: 'an idempotency key that differs from the header',
    body: { kind: 'a', idempotencyKey: 'one' },
    headers: { 'idempotency-key': 'two' },
    status: 400,
    field: 'idempotencyKey',
  },
  { name: 'a zero page size', method: 'GET', path: '/v1/jobs?limit=0', status: 400, field: 'limit' },
  { name: 'a word as page size', method: 'GET', path: '/v1/dead-letters?limit=ten', status: 400, field: 'limit' },
  { name: 'an empty purge', path: '/v1/dead-letters/purge', body: {}, status: 400, field: 'ids' },
  {
    name: 'an impossible purge date',
    path: '/v1/dead-letters/purge',
    body: { parkedBefore: '2026-02-31' },
    status: 400,
    field: 'parkedBefore',
  },
  {
    name: 'a zero claim limit',
    path: '/v1/worker/claim',
    body: { workerId: 'w', limit: 0 },
    status: 400,
    field: 'limit',
  },
  {
    name: 'a string fencing token',
    path: '/v1/worker/jobs/1/complete',
    body: { token: '1', receipt: 'r' },
    status: 400,
    field: 'token',
  },
  {
    name: 'a fail without an error',
    path: '/v1/worker/jobs/1/fail',
    body: { token: 1, receipt: 'r' },
    status: 400,
    field: 'error',
  },
  // Webhook destinations are checked at submit.
  {
    name: 'a webhook to cloud metadata',
    body: { kind: 'docket.webhook', payload: { url: 'http://169.254.169.254/latest/meta-data' } },
    status: 400,
    field: 'payload.url',
    message: /private|reserved/,
  },
  {
    name: 'a webhook to a file URL',
    body: { kind: 'docket.webhook', payload: { url: 'file:///etc/passwd' } },
    status: 400,
    field: 'payload.url',
  },
  {
    name: 'a webhook overriding the signature header',
    body: {
      kind: 'docket.webhook',
      payload: { url: 'https://example.com/h', headers: { 'Docket-Signature': 'v1=0' } },
    },
    status: 400,
    field: 'payload.headers.Docket-Signature',
  },
];

describe('bad-input matrix: every case gets a clear 4xx, nothing is stored, the server stays up', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      env: { DOCKET_WEBHOOK_SECRET: 'webhook-secret-0123456789', DOCKET_WEBHOOK_ALLOW_HOSTS: '*' },
    });
  });
  afterAll(async () => {
    await t?.stop();
  });

  for (const c of CASES) {
    it(`refuses ${c.name} with ${c.status}${c.field ? ` naming ${c.field}` : ''}`, async () => {
      const response = await t.call(c.method ?? 'POST', c.path ?? '/v1/jobs', {
        body: c.body,
        ...(c.headers ? { headers: c.headers } : {}),
      });
      expect(response.status).toBe(c.status);
      const error = (response.body as { error: { code: string; message: string; field?: string } }).error;
      expect(error.code).toEqual(expect.any(String));
      expect(error.message.length).toBeGreaterThan(5);
      if (c.field) {
        expect(error.field).toBe(c.field);
        expect(error.message).toContain(c.field);
      }
      if (c.message) expect(error.message).toMatch(c.message);
      expect((await t.call('GET', '/health', { token: null })).status).toBe(200);
    });
  }

  it('stored nothing for any of them', async () => {
    expect(await t.server.docket.listJobs({})).toEqual([]);
    expect(await t.server.docket.listDeadLetters({})).toEqual([]);
  });

  it('stores an SQL-looking kind verbatim, as data', async () => {
    const kind = "x'); DELETE FROM jobs; --";
    const submit = await t.call('POST', '/v1/jobs', { body: { kind, payload: "'; DROP TABLE jobs; --" } });
    expect(submit.status).toBe(201);
    const id = (submit.body as { id: string }).id;
    const got = await t.call('GET', `/v1/jobs/${id}`);
    expect(got.body).toMatchObject({ kind, payload: "'; DROP TABLE jobs; --" });
    const listed = await t.call('GET', `/v1/jobs?kind=${encodeURIComponent(kind)}`);
    expect((listed.body as { jobs: unknown[] }).jobs).toHaveLength(1);
  });
});
