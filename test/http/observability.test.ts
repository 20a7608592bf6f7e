import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Span, type TracerProvider, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServerLogger } from '../../src/http/server-logger.js';
import { startTestServer, type TestServer, TOKENS } from './http-support.js';

/** Spans recorded by the provider a user would register (a minimal one: no SDK is a dependency). */
const spans: { name: string; attributes: Record<string, unknown>; ended: boolean }[] = [];

const recordingProvider: TracerProvider = {
  getTracer: () => ({
    startSpan: (name: string, options?: { attributes?: Record<string, unknown> }) => recordingSpan(name, options),
    startActiveSpan: (name: string, ...rest: unknown[]) => {
      const fn = rest.at(-1) as (span: Span) => unknown;
      const options = (rest.length > 1 ? rest[0] : undefined) as { attributes?: Record<string, unknown> } | undefined;
      return fn(recordingSpan(name, options));
    },
  }),
};

function recordingSpan(name: string, options?: { attributes?: Record<string, unknown> }): Span {
  const record = { name, attributes: { ...options?.attributes }, ended: false };
  spans.push(record);
  const span = {
    setAttribute: (key: string, value: unknown) => {
      record.attributes[key] = value;
      return span;
    },
    setAttributes: (attributes: Record<string, unknown>) => {
      Object.assign(record.attributes, attributes);
      return span;
    },
    updateName: (next: string) => {
      record.name = next;
      return span;
    },
    end: () => {
      record.ended = true;
    },
    setStatus: () => span,
    recordException: () => {},
    addEvent: () => span,
    addLink: () => span,
    addLinks: () => span,
    isRecording: () => true,
    spanContext: () => ({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 1 }),
  };
  return span as unknown as Span;
}

const PAYLOAD_SECRET = 'payload-secret-4f9a1c';
const RECEIVER_CREDENTIAL = 'receiver-credential-77b2';
const URL_SECRET = 'url-secret-c0ffee';
const WEBHOOK_SECRET = 'webhook-signing-secret-9d8e7f';

describe('logs, metrics and traces', () => {
  const lines: string[] = [];
  let t: TestServer;
  let receiverUrl: string;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(500).end());
  });

  beforeAll(async () => {
    trace.setGlobalTracerProvider(recordingProvider);
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook?key=${URL_SECRET}`;
    const logger = createServerLogger('debug', { write: (line: string) => void lines.push(line) });
    t = await startTestServer({
      logger,
      flags: { concurrency: '2' },
      env: {
        DOCKET_WEBHOOK_SECRET: WEBHOOK_SECRET,
        DOCKET_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
        DOCKET_WEBHOOK_ALLOW_ADDRESSES: '127.0.0.1/32',
      },
    });
  });
  afterAll(async () => {
    await t?.stop();
    receiver.closeAllConnections();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
    trace.disable();
  });

  it('writes structured JSON request logs that name the route and the token, never secrets', async () => {
    await t.call('POST', '/v1/jobs', { body: { kind: 'secretive', payload: { apiKey: PAYLOAD_SECRET } } });
    const hook = await t.call('POST', '/v1/jobs', {
      body: {
        kind: 'docket.webhook',
        maxAttempts: 2,
        retry: { baseDelayMs: 10, jitterRatio: 0 },
        payload: {
          url: receiverUrl,
          body: { apiKey: PAYLOAD_SECRET },
          headers: { Authorization: RECEIVER_CREDENTIAL },
        },
      },
    });
    const id = (hook.body as { id: string }).id;
    await expect
      .poll(async () => ((await t.call('GET', `/v1/jobs/${id}`)).body as { state: string }).state, { timeout: 10_000 })
      .toBe('dead');
    await t.call('GET', '/v1/stats', { token: 'wrong-token-wrong-token' });

    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(parsed.find((l) => l.msg === 'request' && l.route === '/v1/jobs' && l.status === 201)).toMatchObject({
      method: 'POST',
      principal: TOKENS.all.name,
      durationMs: expect.any(Number),
      requestId: expect.any(String),
    });
    expect(parsed.some((l) => l.msg === 'request' && l.status === 401)).toBe(true);
    const text = lines.join('');
    for (const secret of [
      PAYLOAD_SECRET,
      RECEIVER_CREDENTIAL,
      URL_SECRET,
      WEBHOOK_SECRET,
      'wrong-token-wrong-token',
      ...Object.values(TOKENS).map((token) => token.token),
    ]) {
      expect(text).not.toContain(secret);
    }
    // The failed deliveries are on record without the URL's query string.
    const job = (await t.call('GET', `/v1/jobs/${id}`)).body as { errors: { message: string }[] };
    expect(job.errors.map((e) => e.message)).toEqual([
      'POST to 127.0.0.1 answered 500',
      'POST to 127.0.0.1 answered 500',
    ]);
  });

  it('emits server spans named by route and client spans for webhook deliveries', async () => {
    await t.call('GET', '/v1/stats');
    const server = spans.find((s) => s.name === 'GET /v1/stats');
    expect(server).toMatchObject({
      ended: true,
      attributes: { 'http.route': '/v1/stats', 'http.response.status_code': 200 },
    });
    const client = spans.find((s) => s.name === 'docket.webhook POST');
    expect(client).toMatchObject({
      ended: true,
      attributes: { 'server.address': '127.0.0.1', 'http.response.status_code': 500 },
    });
  });

  it('counts failures and parks in the metrics', async () => {
    const text = (await t.call('GET', '/metrics')).body as string;
    expect(text).toMatch(/docket_jobs_failed_total\{queue="docket.builtin"\} 2/);
    expect(text).toMatch(/docket_jobs_parked_total\{queue="docket.builtin"\} 1/);
    expect(text).toMatch(/docket_job_lateness_seconds_count\{queue="docket.builtin"\} 2/);
    expect(text).toMatch(/docket_jobs_submitted_total\{queue="docket.builtin"\} 1/);
    expect(text).toMatch(/docket_queue_depth\{queue="docket.builtin",state="dead"\} 1/);
    expect(text).toMatch(/docket_http_requests_total\{method="GET",route="\/v1\/stats",status="200"\} \d+/);
  });
});
