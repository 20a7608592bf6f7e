/**
 * /v1/schedules and /v1/queues on a real server over each store: create, replace, list, pause,
 * resume, delete, bad input naming the field with nothing stored, scopes, and the OpenAPI entries.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeKinds } from '../support/stores.js';
import { startTestServer, type TestServer, TOKENS } from './http-support.js';

type Json = Record<string, unknown>;

describe.each(storeKinds())('HTTP schedules and queues (%s)', (kind) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ kind });
  });
  afterAll(async () => {
    await t?.stop();
  });

  const nightly = {
    id: 'nightly',
    cron: '30 2 * * *',
    timeZone: 'Europe/London',
    job: { kind: 'report.build', queue: 'reports', payload: { format: 'pdf' } },
    jitterMs: 30_000,
  };

  it('creates a schedule, refuses a second create, replaces it with PUT, and lists it with its next run', async () => {
    const created = await t.call('POST', '/v1/schedules', { body: nightly, token: TOKENS.admin.token });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.headers.get('location')).toBe('/v1/schedules/nightly');
    const body = created.body as Json;
    expect(body).toMatchObject({
      id: 'nightly',
      paused: false,
      job: { kind: 'report.build', queue: 'reports', payload: { format: 'pdf' } },
      misfire: { policy: 'skip' },
    });
    expect(Date.parse(String(body.nextRunAt))).toBeGreaterThan(Date.now());

    const again = await t.call('POST', '/v1/schedules', { body: nightly });
    expect(again.status).toBe(409);

    const replaced = await t.call('PUT', '/v1/schedules/nightly', {
      body: { ...nightly, id: undefined, cron: '0 3 * * *', misfire: { policy: 'run_once' } },
      token: TOKENS.admin.token,
    });
    expect(replaced.status, JSON.stringify(replaced.body)).toBe(200);
    expect(replaced.body).toMatchObject({ cron: '0 3 * * *', misfire: { policy: 'run_once' } });

    const listed = await t.call('GET', '/v1/schedules', { token: TOKENS.read.token });
    expect(listed.status).toBe(200);
    const { schedules } = listed.body as { schedules: Json[] };
    expect(schedules.map((s) => [s.id, s.cron])).toEqual([['nightly', '0 3 * * *']]);
    expect(schedules[0]!.nextRunAt).toBe((replaced.body as Json).nextRunAt);

    const jobs = await t.call('GET', '/v1/jobs?queue=reports');
    const pending = (jobs.body as { jobs: Json[] }).jobs;
    expect(pending.map((job) => [job.state, job.scheduleId])).toEqual([['pending', 'nightly']]);
  });

  it('pauses, resumes and deletes a schedule; unknown ids answer 404', async () => {
    await t.call('PUT', '/v1/schedules/hourly', { body: { cron: '0 * * * *', job: { kind: 'tick', queue: 'ticks' } } });
    const paused = await t.call('POST', '/v1/schedules/hourly/pause', { token: TOKENS.admin.token });
    expect(paused.body).toMatchObject({ paused: true, nextRunAt: null });
    expect((await t.call('GET', '/v1/schedules?paused=true')).body).toMatchObject({ schedules: [{ id: 'hourly' }] });
    const resumed = await t.call('POST', '/v1/schedules/hourly/resume');
    expect(resumed.body).toMatchObject({ paused: false });
    expect((resumed.body as Json).nextRunAt).not.toBeNull();
    expect((await t.call('DELETE', '/v1/schedules/hourly', { token: TOKENS.admin.token })).status).toBe(200);
    expect((await t.call('GET', '/v1/schedules/hourly')).status).toBe(404);
    expect((await t.call('DELETE', '/v1/schedules/hourly')).status).toBe(404);
    expect((await t.call('POST', '/v1/schedules/hourly/pause')).status).toBe(404);
  });

  it('refuses bad input with a 400 naming the field, and stores nothing', async () => {
    const cases: [Json, string][] = [
      [{ id: 'b1', cron: '61 * * * *', job: { kind: 'k' } }, 'cron'],
      [{ id: 'b2', cron: '* * * * *', timeZone: 'Mars/Olympus', job: { kind: 'k' } }, 'timeZone'],
      [{ id: 'b3', cron: '* * * * *', jitterMs: -1, job: { kind: 'k' } }, 'jitterMs'],
      [{ id: 'x'.repeat(201), cron: '* * * * *', job: { kind: 'k' } }, 'id'],
      [{ id: 'b5', cron: '* * * * *', job: { kind: 'k' }, colour: 'red' }, 'colour'],
    ];
    for (const [body, field] of cases) {
      const response = await t.call('POST', '/v1/schedules', { body });
      expect(response.status, JSON.stringify(response.body)).toBe(400);
      expect(response.body).toMatchObject({ error: { code: 'invalid_input', field } });
    }
    // NaN cannot travel in JSON; null is the closest a client can send.
    const nan = await t.call('PUT', '/v1/schedules/b6', {
      body: { cron: '* * * * *', jitterMs: null, job: { kind: 'k' } },
    });
    expect(nan.body).toMatchObject({ error: { field: 'jitterMs' } });
    const names = ((await t.call('GET', '/v1/schedules')).body as { schedules: Json[] }).schedules.map((s) => s.id);
    expect(names.filter((id) => String(id).startsWith('b'))).toEqual([]);
  });

  it('pauses and resumes a queue, and lists it', async () => {
    const paused = await t.call('POST', '/v1/queues/mail/pause', { token: TOKENS.admin.token });
    expect(paused.body).toMatchObject({ name: 'mail', paused: true });
    expect(Date.parse(String((paused.body as Json).pausedAt))).toBeGreaterThan(0);
    expect((await t.call('GET', '/v1/queues', { token: TOKENS.read.token })).body).toMatchObject({
      queues: [{ name: 'mail', paused: true }],
    });
    expect((await t.call('POST', '/v1/queues/mail/resume')).body).toEqual({
      name: 'mail',
      paused: false,
      pausedAt: null,
    });
    expect((await t.call('POST', '/v1/queues/bad%20name/pause')).status).toBe(400);
  });

  it('needs admin to change and read to list', async () => {
    for (const [method, path, body] of [
      ['POST', '/v1/schedules', nightly],
      ['PUT', '/v1/schedules/x', { cron: '* * * * *', job: { kind: 'k' } }],
      ['POST', '/v1/schedules/x/pause', undefined],
      ['DELETE', '/v1/schedules/x', undefined],
      ['POST', '/v1/queues/q/pause', undefined],
    ] as const) {
      expect((await t.call(method, path, { body, token: TOKENS.read.token })).status).toBe(403);
      expect((await t.call(method, path, { body, token: TOKENS.submit.token })).status).toBe(403);
    }
    expect((await t.call('GET', '/v1/schedules', { token: TOKENS.admin.token })).status).toBe(403);
    expect((await t.call('GET', '/v1/queues', { token: TOKENS.worker.token })).status).toBe(403);
    expect((await t.call('GET', '/v1/schedules', { token: null })).status).toBe(401);
  });

  it('describes the routes in the OpenAPI document', async () => {
    const doc = (await t.call('GET', '/openapi.json', { token: null })).body as {
      paths: Record<string, Record<string, { security: { bearer: string[] }[] }>>;
      components: { schemas: Record<string, unknown> };
    };
    expect(doc.paths['/v1/schedules']?.post?.security).toEqual([{ bearer: ['admin'] }]);
    expect(doc.paths['/v1/schedules']?.get?.security).toEqual([{ bearer: ['read'] }]);
    expect(Object.keys(doc.paths['/v1/schedules/{id}'] ?? {}).sort()).toEqual(['delete', 'get', 'put']);
    expect(doc.paths['/v1/queues/{name}/pause']?.post?.security).toEqual([{ bearer: ['admin'] }]);
    expect(doc.components.schemas.Schedule).toMatchObject({ type: 'object', required: ['id', 'cron', 'job'] });
  });
});
