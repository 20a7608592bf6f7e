/**
 * Issue 12's numbered reproductions, one test each (both stores where a store is involved):
 * what a hostile client on loopback got through before, and is refused now with a 400 (or
 * 409/415/421/403) naming the field, writing nothing.
 */
import { createServer } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeKinds } from '../support/stores.js';
import { nested, nestedJsonText, rawRequest, startHostileServer, storeFingerprint } from './hostile-support.js';
import { startTestServer, type TestServer, TOKENS } from './http-support.js';

type Json = Record<string, unknown>;
const errorOf = (body: unknown) => (body as { error: { code: string; field?: string; message: string } }).error;

for (const kind of storeKinds()) {
  describe(`issue 12 reproductions (${kind})`, () => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startHostileServer(kind);
    });
    afterAll(async () => {
      await t?.stop();
    });

    /** Sends the request and asserts a refusal naming `field` that wrote nothing. */
    const refused = async (
      method: string,
      path: string,
      body: unknown,
      status: number,
      field: string | undefined,
      options: { token?: string; headers?: Record<string, string> } = {},
    ) => {
      const before = await storeFingerprint(t);
      const response = await t.call(method, path, { body, ...options });
      expect(response.status, JSON.stringify(response.body)).toBe(status);
      expect(errorOf(response.body).field).toBe(field);
      expect(await storeFingerprint(t)).toBe(before);
      return errorOf(response.body);
    };

    it('1: a webhook body nested 2,000 deep, and one 100,000 deep, get the same clean 400', async () => {
      const webhook = (body: unknown) => ({ kind: 'docket.webhook', payload: { url: 'https://example.com/', body } });
      const deep = await refused('POST', '/v1/jobs', webhook(nested(2000)), 400, 'payload');
      expect(deep.message).toMatch(/more than 64 levels deep/);
      const deeper = `{"kind":"docket.webhook","payload":{"url":"https://example.com/","body":${nestedJsonText(100_000)}}}`;
      const deepest = await refused('POST', '/v1/jobs', deeper, 400, 'payload');
      expect(deepest.message).toBe(deep.message);
      // The same limit for any kind and in batches: 64 levels pass, 65 do not.
      expect((await t.call('POST', '/v1/jobs', { body: { kind: 'deep.ok', payload: nested(63) } })).status).toBe(201);
      await refused(
        'POST',
        '/v1/jobs/batch',
        { jobs: [{ kind: 'deep', payload: nested(65) }] },
        400,
        'jobs[0].payload',
      );
    });

    it('2: runAt "1", "Dec 25" and an instant without an offset are refused', async () => {
      for (const runAt of ['1', 'Dec 25', '2030-06-01T09:00:00', '2030-06-01']) {
        const error = await refused('POST', '/v1/jobs', { kind: 'a', runAt }, 400, 'runAt');
        expect(error.message).toMatch(/RFC 3339 instant with an offset/);
      }
      const ok = await t.call('POST', '/v1/jobs', { body: { kind: 'a', runAt: '2030-06-01T09:00:00+02:00' } });
      expect((ok.body as Json).runAt).toBe('2030-06-01T07:00:00.000Z');
    });

    it('3: a delay or a run time past 9999-12-31T23:59:59.999Z is refused', async () => {
      await refused('POST', '/v1/jobs', { kind: 'a', delayMs: 253402214400000 }, 400, 'delayMs');
      await refused('POST', '/v1/jobs', { kind: 'a', runAt: 253402300800000 }, 400, 'runAt');
      await refused('POST', '/v1/jobs', { kind: 'a', runAt: '10000-01-01T00:00:00Z' }, 400, 'runAt');
      const last = await t.call('POST', '/v1/jobs', { body: { kind: 'a', runAt: '9999-12-31T23:59:59.999Z' } });
      expect((last.body as Json).runAt).toBe('9999-12-31T23:59:59.999Z');
    });

    it('4: ?after= past the largest id is a 400 naming after', async () => {
      for (const path of ['/v1/jobs?after=99999999999999999999', '/v1/dead-letters?after=9007199254740992']) {
        await refused('GET', path, undefined, 400, 'after');
      }
      expect((await t.call('GET', '/v1/jobs?after=9007199254740991')).body).toEqual({ jobs: [], next: null });
    });

    it('5: reserved IPv6 forms of loopback are refused as webhook destinations', async () => {
      for (const url of ['http://[::127.0.0.1]/', 'http://[::ffff:0:7f00:1]/', 'http://[::ffff:127.0.0.1]/']) {
        await refused('POST', '/v1/jobs', { kind: 'docket.webhook', payload: { url } }, 400, 'payload.url');
      }
    });

    it('6: webhook header values that can never be sent are refused', async () => {
      for (const value of ['snow ☃', 'nul\u0000', 'line\r\nbreak']) {
        const body = { kind: 'docket.webhook', payload: { url: 'https://example.com/', headers: { 'X-Key': value } } };
        const error = await refused('POST', '/v1/jobs', body, 400, 'payload.headers.X-Key');
        expect(error.message).toMatch(/valid header value|cannot be stored/);
      }
    });

    it('7: schedules check webhook destinations when stored, as submits do', async () => {
      const schedule = (id: string) => ({
        id,
        cron: '0 * * * *',
        job: { kind: 'docket.webhook', payload: { url: 'http://127.0.0.1:9/' } },
      });
      await refused('POST', '/v1/schedules', schedule('hook-post'), 400, 'job.payload.url');
      await refused('PUT', '/v1/schedules/hook-put', schedule('hook-put'), 400, 'job.payload.url');
      const fine = schedule('hook-fine');
      fine.job.payload.url = 'https://example.com/hook';
      expect((await t.call('POST', '/v1/schedules', { body: fine })).status).toBe(201);
    });

    it('8: a repeated complete is not counted twice, and is counted under its queue', async () => {
      const queue = `once-${kind}`;
      await t.call('POST', '/v1/jobs', { body: { kind: 'once', queue } });
      const claim = await t.call('POST', '/v1/worker/claim', { body: { workerId: 'w8', queues: [queue] } });
      const [job] = (claim.body as { jobs: Json[] }).jobs;
      const lease = { token: job?.token, receipt: job?.receipt };
      for (let i = 0; i < 3; i++) {
        const done = await t.call('POST', `/v1/worker/jobs/${job?.id}/complete`, { body: lease });
        expect(done.body).toEqual({ outcome: 'done' });
      }
      const metrics = (await t.call('GET', '/metrics')).body as string;
      expect(metrics).toMatch(new RegExp(`docket_jobs_completed_total\\{queue="${queue}"\\} 1\\n`));
      expect(metrics).not.toContain('queue="unknown"');
    });

    it('9: NUL and lone surrogates are refused on every store, naming the field', async () => {
      const nul = '\u0000';
      await refused('POST', '/v1/jobs', { kind: `a${nul}` }, 400, 'kind');
      await refused('POST', '/v1/jobs', { kind: 'a', payload: { note: `x${nul}` } }, 400, 'payload.note');
      await refused('POST', '/v1/jobs', { kind: 'a', payload: { [`k${nul}`]: 1 } }, 400, 'payload');
      await refused('POST', '/v1/jobs', { kind: 'a', idempotencyKey: `k${nul}` }, 400, 'idempotencyKey');
      await refused('POST', '/v1/jobs', '{"kind":"a","payload":["\\ud800"]}', 400, 'payload.0');
      await refused('POST', '/v1/jobs', '{"kind":"a","payload":{"s":"\\udc00x"}}', 400, 'payload.s');
      await refused('POST', '/v1/worker/claim', { workerId: `w${nul}` }, 400, 'workerId');
      await refused('GET', '/v1/jobs?kind=a%00', undefined, 400, 'kind');
      await refused('GET', '/v1/dead-letters?kind=%00', undefined, 400, 'kind');
      await refused(
        'POST',
        '/v1/schedules',
        { id: 's9', cron: '0 * * * *', job: { kind: `k${nul}` } },
        400,
        'job.kind',
      );
      // A paired surrogate (an emoji) is fine.
      expect((await t.call('POST', '/v1/jobs', { body: { kind: 'a', payload: '\ud83d\ude00' } })).status).toBe(201);
    });

    it('12: receipts make fencing tokens unguessable, and remote workers never see built-in jobs', async () => {
      const queue = `fence-${kind}`;
      const { id } = (await t.call('POST', '/v1/jobs', { body: { kind: 'fenced', queue } })).body as { id: string };
      const claim = await t.call('POST', '/v1/worker/claim', { body: { workerId: 'owner', queues: [queue] } });
      const [job] = (claim.body as { jobs: Json[] }).jobs;
      expect(job?.receipt).toMatch(/^[A-Za-z0-9_-]{43}$/);
      // Another worker guesses token = attempt, with no, a made-up, or another job's receipt.
      for (const receipt of ['', 'x'.repeat(43)]) {
        const body = receipt === '' ? { token: 1 } : { token: 1, receipt };
        const guess = await t.call('POST', `/v1/worker/jobs/${id}/complete`, { body });
        expect(guess.status).toBe(receipt === '' ? 400 : 409);
      }
      const foreign = await t.call('POST', `/v1/worker/jobs/${id}/fail`, {
        body: { token: 1, receipt: 'A'.repeat(43), error: { message: 'hijack' } },
      });
      const unknown = await t.call('POST', '/v1/worker/jobs/987654321/fail', {
        body: { token: 1, receipt: 'A'.repeat(43), error: { message: 'hijack' } },
      });
      // Same answer whether the job exists or not.
      expect(foreign.status).toBe(409);
      expect(unknown.status).toBe(409);
      expect(foreign.body).toEqual(unknown.body);
      expect(((await t.call('GET', `/v1/jobs/${id}`)).body as Json).state).toBe('running');
      expect(
        (await t.call('POST', `/v1/worker/jobs/${id}/complete`, { body: { token: job?.token, receipt: job?.receipt } }))
          .body,
      ).toEqual({ outcome: 'done' });

      // Built-in jobs: never claimed remotely, the reserved queue refused, headers redacted in reads.
      const hook = await t.call('POST', '/v1/jobs', {
        body: {
          kind: 'docket.webhook',
          payload: { url: 'https://example.com/', headers: { Authorization: 'Bearer s3cr3t' } },
        },
      });
      const hookId = (hook.body as { id: string }).id;
      const remote = await t.call('POST', '/v1/worker/claim', { body: { workerId: 'greedy', limit: 100 } });
      expect((remote.body as { jobs: Json[] }).jobs.map((j) => j.kind)).not.toContain('docket.webhook');
      await refused('POST', '/v1/worker/claim', { workerId: 'greedy', queues: ['docket.builtin'] }, 400, 'queues.0');
      await refused('POST', '/v1/worker/claim', { workerId: 'greedy', kinds: ['docket.webhook'] }, 400, 'kinds.0');
      const view = (await t.call('GET', `/v1/jobs/${hookId}`, { token: TOKENS.read.token })).body as Json;
      expect(view.payload).toEqual({ url: 'https://example.com/', headers: { Authorization: '[redacted]' } });
      expect(view).not.toHaveProperty('token');
      const list = JSON.stringify((await t.call('GET', '/v1/jobs?limit=1000')).body);
      expect(list).not.toContain('s3cr3t');
      expect(JSON.stringify((await t.call('GET', '/metrics')).body)).not.toContain('s3cr3t');
    });
  });
}

for (const kind of storeKinds()) {
  describe(`SSRF at delivery (${kind})`, () => {
    it('never follows a redirect, even to an address the guard would admit', async () => {
      const target = createServer((_req, res) => res.writeHead(200).end());
      const hits: string[] = [];
      target.on('request', (req) => hits.push(req.url ?? ''));
      await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', () => resolve()));
      const targetPort = (target.address() as { port: number }).port;
      const redirector = createServer((_req, res) =>
        res.writeHead(302, { location: `http://127.0.0.1:${targetPort}/internal` }).end(),
      );
      await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.1', () => resolve()));
      const port = (redirector.address() as { port: number }).port;
      const t = await startHostileServer(kind, {
        flags: { concurrency: '1' },
        env: { DOCKET_WEBHOOK_ALLOW_HOSTS: '127.0.0.1', DOCKET_WEBHOOK_ALLOW_ADDRESSES: '127.0.0.1/32' },
      });
      try {
        const submitted = await t.call('POST', '/v1/jobs', {
          body: { kind: 'docket.webhook', payload: { url: `http://127.0.0.1:${port}/hook` }, maxAttempts: 1 },
        });
        expect(submitted.status).toBe(201);
        const id = (submitted.body as { id: string }).id;
        await expect
          .poll(async () => ((await t.call('GET', `/v1/jobs/${id}`)).body as Json).state, {
            timeout: 10_000,
            interval: 25,
          })
          .toBe('dead');
        const view = (await t.call('GET', `/v1/jobs/${id}`)).body as { errors: { message: string }[] };
        expect(view.errors[0]?.message).toBe('POST to 127.0.0.1 answered 302');
        expect(hits).toEqual([]);
      } finally {
        await t.stop();
        for (const server of [target, redirector]) {
          server.closeAllConnections();
          await new Promise<void>((resolve) => server.close(() => resolve()));
        }
      }
    });
  });
}

describe('issue 12 reproduction 10: browser safety without tokens', () => {
  let t: TestServer;
  let host: string;
  beforeAll(async () => {
    t = await startTestServer({ tokens: [] });
    host = new URL(t.url).host;
  });
  afterAll(async () => {
    await t?.stop();
  });

  const submit = (headers: Record<string, string>, path = '/v1/jobs') =>
    rawRequest(t.url, { method: 'POST', path, headers: { host, ...headers }, body: '{"kind":"csrf"}' });

  it('refuses a write without Content-Type: application/json with 415, writing nothing', async () => {
    const before = await storeFingerprint(t);
    for (const type of [undefined, 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data']) {
      const response = await submit(type === undefined ? {} : { 'content-type': type });
      expect(response.status, type).toBe(415);
      expect(JSON.parse(response.body).error.field).toBe('Content-Type');
    }
    // Cancel and purge carry no body, and need the JSON type too.
    expect((await submit({}, '/v1/jobs/1/cancel')).status).toBe(415);
    expect((await submit({ 'content-type': 'text/plain' }, '/v1/dead-letters/purge')).status).toBe(415);
    expect(await storeFingerprint(t)).toBe(before);
    expect((await submit({ 'content-type': 'application/json' })).status).toBe(201);
  });

  it('answers 421 for a Host that is not the listen address (DNS rebinding), reads included', async () => {
    for (const badHost of ['evil.example', `evil.example:${new URL(t.url).port}`, '127.0.0.1:1', '']) {
      const read = await rawRequest(t.url, { path: '/v1/jobs', headers: { host: badHost } });
      expect(read.status, badHost).toBe(421);
      expect(read.body).not.toContain('csrf');
    }
    for (const goodHost of [host, `localhost:${new URL(t.url).port}`]) {
      expect((await rawRequest(t.url, { path: '/v1/stats', headers: { host: goodHost } })).status).toBe(200);
    }
  });

  it('refuses a cross-origin Origin with 403 and admits the same origin', async () => {
    const before = await storeFingerprint(t);
    for (const origin of ['http://evil.example', 'null', `https://${host}`]) {
      const response = await submit({ 'content-type': 'application/json', origin });
      expect(response.status, origin).toBe(403);
      expect(JSON.parse(response.body).error.field).toBe('Origin');
    }
    expect(await storeFingerprint(t)).toBe(before);
    expect((await submit({ 'content-type': 'application/json', origin: `http://${host}` })).status).toBe(201);
  });

  it('keeps bearer auth with tokens: no Host or Origin rule, and no cookie is ever set', async () => {
    const withTokens = await startTestServer();
    try {
      const response = await rawRequest(withTokens.url, {
        method: 'POST',
        path: '/v1/jobs',
        headers: {
          host: 'api.example',
          authorization: `Bearer ${TOKENS.submit.token}`,
          'content-type': 'application/json',
        },
        body: '{"kind":"tokened"}',
      });
      expect(response.status).toBe(201);
      expect(response.headers['set-cookie']).toBeUndefined();
    } finally {
      await withTokens.stop();
    }
  });
});

describe('issue 12 reproduction 13: graceful close answers requests in flight', () => {
  it('answers a request whose body is still arriving when close starts, then refuses new connections', async () => {
    const t = await startTestServer();
    const { hostname, port } = new URL(t.url);
    const body = JSON.stringify({ kind: 'in.flight', payload: { pad: 'x'.repeat(2000) } });
    const socket = connect(Number(port), hostname);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let answer = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      answer += chunk;
    });
    const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(
      `POST /v1/jobs HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${TOKENS.all.token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 100)}`,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    const closing = t.server.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The listener is closed: a new connection is refused cleanly.
    const refusedError = await new Promise<NodeJS.ErrnoException>((resolve) => {
      const probe = connect(Number(port), hostname);
      probe.once('error', resolve);
      probe.once('connect', () => resolve(Object.assign(new Error('connected'), { code: 'CONNECTED' })));
    });
    expect(refusedError.code).toBe('ECONNREFUSED');
    socket.write(body.slice(100));
    await ended;
    await closing;
    expect(answer).toMatch(/^HTTP\/1\.1 201 /);
    expect(answer.toLowerCase()).toContain('connection: close');
    await t.db.drop();
  });
});
