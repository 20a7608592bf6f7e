import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import { createApp, type DocketApp } from '../../src/http/server.js';
import { createTestDatabase, type TestDatabase } from '../support/stores.js';
import { TOKENS } from './http-support.js';

describe('createApp mounted inside a user’s Hono app', () => {
  let db: TestDatabase;
  let docket: Docket;
  let api: DocketApp;
  let host: Hono;
  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    docket = await Docket.open({ url: db.url });
    api = createApp(docket, { tokens: [TOKENS.all] });
    host = new Hono();
    host.get('/', (c) => c.text('the user’s own route'));
    host.route('/docket', api);
  });
  afterAll(async () => {
    await api?.close();
    await docket?.close();
    await db?.drop();
  });

  const auth = { authorization: `Bearer ${TOKENS.all.token}`, 'content-type': 'application/json' };

  it('serves the API under the mount path, with its own auth and error shape', async () => {
    const created = await host.request('/docket/v1/jobs', {
      method: 'POST',
      headers: auth,
      body: '{"kind":"mounted"}',
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    expect((await host.request(`/docket/v1/jobs/${id}`, { headers: auth })).status).toBe(200);
    expect((await host.request('/docket/v1/stats')).status).toBe(401);
    const bad = await host.request('/docket/v1/jobs', { method: 'POST', headers: auth, body: '{"kind":1}' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { field: 'kind' } });
    expect(await (await host.request('/')).text()).toBe('the user’s own route');
  });
});
