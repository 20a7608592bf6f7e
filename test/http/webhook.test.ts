import { createServer, type IncomingHttpHeaders, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DestinationGuard, DestinationRefusedError } from '../../src/http/ssrf-guard.js';
import { parseRetryAfterMs, validateWebhookPayload } from '../../src/http/webhook-handler.js';
import { computeSignature, signWebhook, verifyWebhookSignature } from '../../src/http/webhook-signature.js';
import { startTestServer, type TestServer } from './http-support.js';

const SECRET = 'whsec-test-0123456789abcdef';

interface Delivery {
  headers: IncomingHttpHeaders;
  body: string;
}
type Reply = { status: number; headers?: Record<string, string> } | 'hang';

/** A webhook receiver that verifies signatures, refuses replays, and answers from a script. */
async function startReceiver() {
  const seen = new Set<string>();
  const deliveries: Delivery[] = [];
  const refusals: string[] = [];
  const script: Reply[] = [];
  const hanging: ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const deliveryId = req.headers['docket-delivery-id'] as string | undefined;
      const verdict = verifyWebhookSignature({
        secret: SECRET,
        body,
        deliveryId,
        timestamp: req.headers['docket-timestamp'] as string | undefined,
        signature: req.headers['docket-signature'] as string | undefined,
      });
      if (!verdict.ok) {
        refusals.push(verdict.reason);
        res.writeHead(401).end();
        return;
      }
      // A delivery accepted once is refused again: a replay inside the window, or a redelivery.
      if (seen.has(deliveryId as string)) {
        refusals.push('replay');
        res.writeHead(409).end();
        return;
      }
      deliveries.push({ headers: req.headers, body });
      const reply = script.shift() ?? { status: 204 };
      if (reply === 'hang') {
        hanging.push(res);
        return;
      }
      if (reply.status >= 200 && reply.status < 300) seen.add(deliveryId as string);
      res.writeHead(reply.status, reply.headers).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    deliveries,
    refusals,
    script,
    /** Sends raw bytes with headers straight to the receiver, as an attacker replaying a capture would. */
    send(headers: Record<string, string>, body: string): Promise<number> {
      return new Promise((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: '/hook', method: 'POST', headers }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end(body);
      });
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

type Receiver = Awaited<ReturnType<typeof startReceiver>>;
type JobView = { state: string; attempts: number; errors: { message: string; at: string }[]; runAt: string };

const fast = { baseDelayMs: 50, factor: 2, jitterRatio: 0 };

describe('webhook jobs', () => {
  let t: TestServer;
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
    t = await startTestServer({
      flags: { concurrency: '4', webhookTimeoutMs: '300', webhookRetryAfterCapMs: '1500' },
      env: {
        DOCKET_WEBHOOK_SECRET: SECRET,
        DOCKET_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
        DOCKET_WEBHOOK_ALLOW_ADDRESSES: '127.0.0.1/32',
      },
    });
  });
  afterEach(() => {
    receiver.deliveries.length = 0;
    receiver.refusals.length = 0;
    receiver.script.length = 0;
  });
  afterAll(async () => {
    await t?.stop();
    await receiver?.close();
  });

  const submit = async (payload: unknown, extra: Record<string, unknown> = {}) => {
    const response = await t.call('POST', '/v1/jobs', { body: { kind: 'docket.webhook', payload, ...extra } });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    return (response.body as { id: string }).id;
  };
  const job = async (id: string) => (await t.call('GET', `/v1/jobs/${id}`)).body as JobView;
  const settle = (id: string, state: string) =>
    expect.poll(async () => (await job(id)).state, { timeout: 15_000, interval: 50 }).toBe(state);

  it('POSTs a signed body that the receiver verifies, and completes on 2xx', async () => {
    const id = await submit({
      url: receiver.url,
      body: { event: 'invoice.paid', amount: 42 },
      headers: { 'X-Tenant': 't1' },
    });
    await settle(id, 'done');
    expect(receiver.deliveries).toHaveLength(1);
    const [delivery] = receiver.deliveries;
    expect(JSON.parse(delivery?.body ?? '')).toEqual({ event: 'invoice.paid', amount: 42 });
    expect(delivery?.headers['docket-delivery-id']).toBe(id);
    expect(delivery?.headers['docket-attempt']).toBe('1');
    expect(delivery?.headers['x-tenant']).toBe('t1');
    expect(delivery?.headers['content-type']).toBe('application/json');
    expect(receiver.refusals).toEqual([]);
  });

  it('lets the receiver reject a replayed, a tampered and an expired request', async () => {
    const id = await submit({ url: receiver.url, body: { n: 1 } });
    await settle(id, 'done');
    const [delivery] = receiver.deliveries;
    const headers = {
      'content-type': 'application/json',
      'docket-delivery-id': delivery?.headers['docket-delivery-id'] as string,
      'docket-timestamp': delivery?.headers['docket-timestamp'] as string,
      'docket-signature': delivery?.headers['docket-signature'] as string,
    };
    expect(await receiver.send(headers, delivery?.body ?? '')).toBe(409);
    expect(await receiver.send(headers, '{"n":2}')).toBe(401);
    // Changing the delivery id to dodge the replay check breaks the signature.
    expect(await receiver.send({ ...headers, 'docket-delivery-id': '999999' }, delivery?.body ?? '')).toBe(401);
    expect(receiver.refusals).toEqual(['replay', 'bad_signature', 'bad_signature']);
    // The same capture presented after the 5-minute window has passed.
    const timestampS = Number(headers['docket-timestamp']);
    expect(
      verifyWebhookSignature({
        secret: SECRET,
        body: delivery?.body ?? '',
        deliveryId: headers['docket-delivery-id'],
        timestamp: headers['docket-timestamp'],
        signature: headers['docket-signature'],
        nowS: timestampS + 301,
      }),
    ).toEqual({ ok: false, reason: 'expired' });
  });

  it('retries non-2xx answers with backoff and completes when the receiver recovers', async () => {
    receiver.script.push({ status: 500 }, { status: 502 });
    const id = await submit({ url: receiver.url, body: {} }, { retry: fast });
    await settle(id, 'done');
    const view = await job(id);
    expect(view.attempts).toBe(3);
    expect(view.errors.map((e) => e.message)).toEqual([
      'POST to 127.0.0.1 answered 500',
      'POST to 127.0.0.1 answered 502',
    ]);
    expect(receiver.deliveries.map((d) => d.headers['docket-attempt'])).toEqual(['1', '2', '3']);
    expect(receiver.refusals).toEqual([]);
  });

  it('parks a webhook in the dead-letter table after its last attempt', async () => {
    receiver.script.push({ status: 500 }, { status: 404 });
    const id = await submit({ url: receiver.url }, { retry: fast, maxAttempts: 2 });
    await settle(id, 'dead');
    const dead = (await t.call('GET', '/v1/dead-letters')).body as { jobs: { id: string }[] };
    expect(dead.jobs.map((j) => j.id)).toContain(id);
  });

  it('treats a refused connection and a timeout as failures', async () => {
    const closed = await startReceiver();
    const deadUrl = closed.url;
    await closed.close();
    const refused = await submit({ url: deadUrl }, { maxAttempts: 1 });
    await settle(refused, 'dead');
    expect((await job(refused)).errors[0]?.message).toMatch(/POST to 127\.0\.0\.1 failed: ECONNREFUSED/);

    receiver.script.push('hang');
    const slow = await submit({ url: receiver.url }, { maxAttempts: 1 });
    await settle(slow, 'dead');
    expect((await job(slow)).errors[0]?.message).toMatch(/no response within 300 ms/);
  });

  it('honours Retry-After on 429 and 503, up to the configured cap', async () => {
    receiver.script.push({ status: 429, headers: { 'Retry-After': '1' } });
    const polite = await submit({ url: receiver.url }, { retry: fast });
    await expect.poll(async () => (await job(polite)).attempts, { timeout: 10_000, interval: 20 }).toBe(1);
    await expect.poll(async () => (await job(polite)).errors.length, { timeout: 10_000, interval: 20 }).toBe(1);
    const afterFirst = await job(polite);
    // Without Retry-After the retry would come 100 ms later (50 ms * 2^1).
    const waitMs = Date.parse(afterFirst.runAt) - Date.parse(afterFirst.errors[0]?.at ?? '');
    expect(waitMs).toBeGreaterThanOrEqual(1000);
    await settle(polite, 'done');

    receiver.script.push({ status: 503, headers: { 'Retry-After': '86400' } });
    const capped = await submit({ url: receiver.url }, { retry: fast });
    await expect.poll(async () => (await job(capped)).errors.length, { timeout: 10_000, interval: 20 }).toBe(1);
    const view = await job(capped);
    const cappedMs = Date.parse(view.runAt) - Date.parse(view.errors[0]?.at ?? '');
    expect(cappedMs).toBeGreaterThanOrEqual(1500);
    expect(cappedMs).toBeLessThan(2500);
    await settle(capped, 'done');
  });

  it('refuses a destination outside the allowlist or in a private range at submit', async () => {
    for (const url of ['http://example.com/', 'http://10.0.0.8/', 'http://[::1]/', 'http://0x0a000001/']) {
      const response = await t.call('POST', '/v1/jobs', { body: { kind: 'docket.webhook', payload: { url } } });
      expect(response.status, url).toBe(400);
      expect(response.body).toMatchObject({ error: { field: 'payload.url' } });
    }
  });
});

describe('SSRF guard', () => {
  const guard = new DestinationGuard({ allowHosts: ['*'] });

  it.each([
    'http://127.0.0.1/',
    'http://127.1.2.3:8080/',
    'http://10.1.2.3/',
    'http://172.16.0.1/',
    'http://192.168.1.1/',
    'http://169.254.169.254/latest/meta-data/',
    'http://100.64.0.1/',
    'http://0.0.0.0/',
    'http://[::1]/',
    'http://[::]/',
    'http://[fe80::1]/',
    'http://[fd00::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:10.0.0.1]/',
    'http://[64:ff9b::a9fe:a9fe]/',
    'http://2130706433/',
    'http://0x7f.1/',
    'http://017700000001/',
  ])('refuses %s', (url) => {
    expect(() => guard.checkUrl(url)).toThrow(DestinationRefusedError);
  });

  it('refuses other schemes, credentials in the URL and hosts outside the allowlist', () => {
    expect(() => guard.checkUrl('file:///etc/passwd')).toThrow(/scheme/);
    expect(() => guard.checkUrl('gopher://example.com/')).toThrow(/scheme/);
    expect(() => guard.checkUrl('https://user:pw@example.com/')).toThrow(/credentials/);
    const strict = new DestinationGuard({ allowHosts: ['*.example.com', 'hooks.partner.io'] });
    expect(() => strict.checkUrl('https://api.example.com/x')).not.toThrow();
    expect(() => strict.checkUrl('https://hooks.partner.io/x')).not.toThrow();
    expect(() => strict.checkUrl('https://example.com.evil.io/')).toThrow(/allowlist/);
    expect(() => strict.checkUrl('https://evilexample.com/')).toThrow(/allowlist/);
    expect(() => new DestinationGuard({ allowHosts: [] }).checkUrl('https://example.com/')).toThrow(
      /no webhook destinations/,
    );
  });

  it('admits public addresses, and private ranges only when explicitly allowed', () => {
    expect(() => guard.checkUrl('https://93.184.215.14/')).not.toThrow();
    expect(() => guard.checkUrl('https://[2606:4700::1111]/')).not.toThrow();
    const exempt = new DestinationGuard({ allowHosts: ['*'], allowAddresses: ['10.0.0.0/8'] });
    expect(() => exempt.checkUrl('http://10.9.9.9/')).not.toThrow();
    expect(() => exempt.checkUrl('http://192.168.0.1/')).toThrow(DestinationRefusedError);
  });

  it('checks the resolved address at connect time, so an allowed name that resolves to loopback is refused', async () => {
    const receiver = await startReceiver();
    try {
      const named = new DestinationGuard({ allowHosts: ['localhost'] });
      // checkUrl refuses "localhost" by name at submit; this exercises the connect-time check
      // alone, as for any allowed name whose DNS answer is a loopback address (127.0.0.1).
      const url = new URL(`http://localhost:${receiver.port}/hook`);
      const error = await new Promise<Error>((resolve) => {
        const req = request(url, { method: 'POST', lookup: named.lookup as never, agent: false }, () =>
          resolve(new Error('connected')),
        );
        req.on('error', resolve);
        req.end('{}');
      });
      expect(error).toBeInstanceOf(DestinationRefusedError);
      expect(error.message).toMatch(/127\.0\.0\.1 is private, loopback or reserved/);
      expect(receiver.deliveries).toHaveLength(0);
    } finally {
      await receiver.close();
    }
  });

  it('refuses at delivery a webhook job whose name resolves to a private address', async () => {
    const receiver = await startReceiver();
    const t = await startTestServer({
      flags: { concurrency: '1' },
      env: { DOCKET_WEBHOOK_SECRET: SECRET, DOCKET_WEBHOOK_ALLOW_HOSTS: 'localhost' },
    });
    try {
      // The HTTP face refuses "localhost" by name at submit; a job enqueued by the library (which
      // has no guard) is what the delivery-time check is for.
      const refused = await t.call('POST', '/v1/jobs', {
        body: { kind: 'docket.webhook', payload: { url: `http://localhost:${receiver.port}/hook` }, maxAttempts: 1 },
      });
      expect(refused.status).toBe(400);
      const { id } = await t.server.docket.submit({
        kind: 'docket.webhook',
        payload: { url: `http://localhost:${receiver.port}/hook` },
        maxAttempts: 1,
      });
      await expect
        .poll(async () => ((await t.call('GET', `/v1/jobs/${id}`)).body as JobView).state, { timeout: 10_000 })
        .toBe('dead');
      const view = (await t.call('GET', `/v1/jobs/${id}`)).body as JobView;
      expect(view.errors[0]?.message).toMatch(/refused.*localhost/);
      expect(receiver.deliveries).toHaveLength(0);
    } finally {
      await t.stop();
      await receiver.close();
    }
  });
});

describe('webhook helpers', () => {
  it('parses Retry-After as seconds or an HTTP date, capped', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfterMs('5', now, 60_000)).toBe(5000);
    expect(parseRetryAfterMs('999999', now, 60_000)).toBe(60_000);
    expect(parseRetryAfterMs('Thu, 01 Jan 2026 00:00:30 GMT', now, 60_000)).toBe(30_000);
    expect(parseRetryAfterMs('Wed, 31 Dec 2025 00:00:00 GMT', now, 60_000)).toBe(0);
    expect(parseRetryAfterMs('soon', now, 60_000)).toBeUndefined();
    expect(parseRetryAfterMs(undefined, now, 60_000)).toBeUndefined();
  });

  it('signs "<timestamp>.<body>" with HMAC-SHA256, verifiable with a rotated second signature', () => {
    const body = '{"a":1}';
    const headers = signWebhook({ secret: SECRET, deliveryId: '7', body, timestampS: 1_800_000_000 });
    expect(headers['docket-signature']).toBe(`v1=${computeSignature(SECRET, '7', 1_800_000_000, body)}`);
    const rotated = `v1=${'0'.repeat(64)}, ${headers['docket-signature']}`;
    const base = { body, deliveryId: '7', timestamp: '1800000000', signature: rotated };
    expect(verifyWebhookSignature({ ...base, secret: SECRET, nowS: 1_800_000_100 })).toEqual({ ok: true });
    expect(verifyWebhookSignature({ ...base, secret: 'other-secret-xxxxxxxx', nowS: 1_800_000_000 })).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
    expect(verifyWebhookSignature({ ...base, secret: SECRET, timestamp: null })).toEqual({
      ok: false,
      reason: 'missing',
    });
  });

  it('validates webhook payloads naming the field', () => {
    const guard = new DestinationGuard({ allowHosts: ['*'] });
    expect(() => validateWebhookPayload({ url: 'https://example.com', method: 'GET' }, guard)).toThrow(
      /payload\.method/,
    );
    expect(() => validateWebhookPayload({ url: 5 }, guard)).toThrow(/payload\.url/);
    expect(() => validateWebhookPayload({ url: 'https://example.com', headers: { Host: 'x' } }, guard)).toThrow(
      /payload\.headers\.Host/,
    );
  });
});
