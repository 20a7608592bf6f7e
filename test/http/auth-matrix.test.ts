import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Scope } from '../../src/http/auth.js';
import { TokenAuthenticator } from '../../src/http/auth.js';
import { loadServerConfig, startServer } from '../../src/http/server.js';
import { startTestServer, type TestServer, TOKENS } from './http-support.js';

/** Every protected endpoint, the scope it needs, and a request that is valid for it. */
const ENDPOINTS: { scope: Scope; method: string; path: string; body?: unknown }[] = [
  { scope: 'submit', method: 'POST', path: '/v1/jobs', body: { kind: 'auth.probe', delayMs: 3_600_000 } },
  {
    scope: 'submit',
    method: 'POST',
    path: '/v1/jobs/batch',
    body: { jobs: [{ kind: 'auth.probe', delayMs: 3_600_000 }] },
  },
  { scope: 'read', method: 'GET', path: '/v1/jobs' },
  { scope: 'read', method: 'GET', path: '/v1/jobs/1' },
  { scope: 'read', method: 'GET', path: '/v1/dead-letters' },
  { scope: 'read', method: 'GET', path: '/v1/stats' },
  { scope: 'read', method: 'GET', path: '/metrics' },
  { scope: 'read', method: 'GET', path: '/v1/overview' },
  { scope: 'read', method: 'GET', path: '/v1/activity' },
  { scope: 'read', method: 'GET', path: '/v1/jobs/1/detail' },
  { scope: 'read', method: 'GET', path: '/v1/bulk' },
  { scope: 'read', method: 'GET', path: '/v1/bulk/op-unknown' },
  // A preview changes nothing, so the read scope may ask it (the confirmation dialog states the count).
  {
    scope: 'read',
    method: 'POST',
    path: '/v1/bulk/preview',
    body: { action: 'retry', filter: { queue: 'nothing-here' } },
  },
  { scope: 'admin', method: 'POST', path: '/v1/bulk', body: { action: 'retry', filter: { queue: 'nothing-here' } } },
  { scope: 'admin', method: 'POST', path: '/v1/schedules/unknown-schedule/run-now' },
  { scope: 'admin', method: 'POST', path: '/v1/queues/nothing-here/pause' },
  { scope: 'admin', method: 'POST', path: '/v1/jobs/999999/cancel' },
  { scope: 'admin', method: 'POST', path: '/v1/dead-letters/999999/retry' },
  { scope: 'admin', method: 'POST', path: '/v1/dead-letters/purge', body: { ids: ['999999'] } },
  { scope: 'worker', method: 'POST', path: '/v1/worker/claim', body: { workerId: 'probe', queues: ['nothing-here'] } },
  { scope: 'worker', method: 'POST', path: '/v1/worker/jobs/999999/heartbeat', body: { token: 1 } },
  { scope: 'worker', method: 'POST', path: '/v1/worker/jobs/999999/complete', body: { token: 1 } },
  { scope: 'worker', method: 'POST', path: '/v1/worker/jobs/999999/fail', body: { token: 1, error: { message: 'x' } } },
];

describe('auth matrix: every endpoint by scope', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
    // The /v1/jobs/1 probe needs a job 1 to exist for a 200.
    await t.call('POST', '/v1/jobs', { body: { kind: 'auth.seed', delayMs: 3_600_000 } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  for (const endpoint of ENDPOINTS) {
    const label = `${endpoint.method} ${endpoint.path}`;
    it(`${label}: 401 without a token, 401 with an unknown one`, async () => {
      const none = await t.call(endpoint.method, endpoint.path, { token: null, body: endpoint.body });
      expect(none.status).toBe(401);
      expect(none.body).toMatchObject({ error: { code: 'unauthenticated' } });
      expect(none.headers.get('www-authenticate')).toContain('Bearer');
      const wrong = await t.call(endpoint.method, endpoint.path, {
        token: 'not-a-real-token-xxxxxx',
        body: endpoint.body,
      });
      expect(wrong.status).toBe(401);
    });

    for (const scope of ['submit', 'read', 'admin', 'worker'] as const) {
      const allowed = scope === endpoint.scope;
      it(`${label}: ${allowed ? 'admits' : 'refuses with 403'} a "${scope}" token`, async () => {
        const response = await t.call(endpoint.method, endpoint.path, {
          token: TOKENS[scope].token,
          body: endpoint.body,
        });
        if (allowed) {
          expect([401, 403]).not.toContain(response.status);
          expect(response.status).toBeLessThan(500);
        } else {
          expect(response.status).toBe(403);
          expect(response.body).toMatchObject({
            error: { code: 'forbidden', message: expect.stringContaining(endpoint.scope) },
          });
        }
      });
    }
  }

  it('leaves health, readiness and the OpenAPI document open', async () => {
    for (const path of ['/health', '/ready', '/openapi.json']) {
      expect((await t.call('GET', path, { token: null })).status).toBe(200);
    }
  });

  it('matches a token only by its exact secret', () => {
    const auth = new TokenAuthenticator([TOKENS.read, TOKENS.admin]);
    expect(auth.authenticate(TOKENS.admin.token)?.name).toBe('operator');
    expect(auth.authenticate(`${TOKENS.admin.token}x`)).toBeNull();
    expect(auth.authenticate(TOKENS.admin.token.slice(0, -1))).toBeNull();
    expect(auth.authenticate('')).toBeNull();
  });
});

describe('listening without authentication', () => {
  it('refuses a non-loopback address when no token is configured', async () => {
    expect(() => loadServerConfig({ flags: { host: '0.0.0.0' } })).toThrow(
      /host \(from --host\): refusing to listen on non-loopback address 0\.0\.0\.0 without authentication/,
    );
    const config = loadServerConfig({ flags: { db: 'sqlite::memory:', concurrency: '0' } });
    await expect(startServer({ config: { ...config, host: '0.0.0.0' } })).rejects.toThrow(/refusing to listen/);
  });

  it('serves every scope without a token on loopback when no token is configured', async () => {
    const t = await startTestServer({ tokens: [] });
    try {
      expect((await t.call('GET', '/v1/stats', { token: null })).status).toBe(200);
      expect((await t.call('POST', '/v1/jobs', { token: null, body: { kind: 'open' } })).status).toBe(201);
    } finally {
      await t.stop();
    }
  });
});
