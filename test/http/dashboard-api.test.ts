/**
 * The dashboard API over real HTTP on both stores (docs/dashboard-api.md): the job filter and its
 * refusals, a job's detail (attempts, lease, timeline), the overview and activity, bulk actions
 * (preview, start, join, progress, idempotent repeat, admin only), run-now, and the live stream
 * read with fetch and a bearer token, ending when the server stops.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeKinds } from '../support/stores.js';
import { rawRequest } from './hostile-support.js';
import { startTestServer, type TestServer, TOKENS } from './http-support.js';

/** Reads server-sent events from a fetch body until `until` says stop; resolves with them. */
async function readEvents(
  response: Response,
  until: (events: { event: string; data: unknown }[]) => boolean,
): Promise<{ events: { event: string; data: unknown }[]; comments: string[]; ended: boolean }> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const events: { event: string; data: unknown }[] = [];
  const comments: string[] = [];
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return { events, comments, ended: true };
    buffer += decoder.decode(value, { stream: true });
    let cut = buffer.indexOf('\n\n');
    while (cut >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const lines = block.split('\n');
      const event = lines
        .find((line) => line.startsWith('event:'))
        ?.slice(6)
        .trim();
      const data = lines
        .find((line) => line.startsWith('data:'))
        ?.slice(5)
        .trim();
      if (event && data) events.push({ event, data: JSON.parse(data) });
      for (const line of lines) if (line.startsWith(':')) comments.push(line);
      cut = buffer.indexOf('\n\n');
    }
    if (until(events)) {
      await reader.cancel();
      return { events, comments, ended: false };
    }
  }
}

for (const kind of storeKinds()) {
  describe(`dashboard API (${kind})`, () => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startTestServer({ kind });
    });
    afterAll(async () => {
      await t?.stop();
    });

    const submit = async (body: Record<string, unknown>) =>
      (await t.call('POST', '/v1/jobs', { body: { delayMs: 3_600_000, ...body } })).body as { id: string };

    /** Claims and parks every due job of `queue` through the store (as a worker that always fails). */
    async function parkAll(queue: string): Promise<void> {
      const store = t.server.docket.store;
      for (;;) {
        const [job] = await store.jobClaim({ owner: 'test-w', limit: 1, leaseMs: 30_000, queues: [queue] });
        if (!job) return;
        await store.jobFail({
          id: job.id,
          token: job.token,
          leaseOwner: job.leaseOwner,
          error: { message: 'boom', kind: 'thrown' },
          decision: { kind: 'park' },
        });
      }
    }

    /** Polls GET /v1/bulk/{id} until the operation ends. */
    async function settled(id: string): Promise<Record<string, unknown>> {
      for (let i = 0; i < 400; i++) {
        const { body } = await t.call('GET', `/v1/bulk/${id}`);
        if ((body as { state: string }).state !== 'running') return body as Record<string, unknown>;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      throw new Error(`bulk operation ${id} did not finish`);
    }

    it('filters jobs by payload, kind and id range, pages by keyset, and refuses a bad filter naming it', async () => {
      const a = await submit({ kind: 'f.a', queue: 'filters', payload: { customerId: 42 } });
      const b = await submit({ kind: 'f.b', queue: 'filters', payload: { customerId: 42 } });
      await submit({ kind: 'f.a', queue: 'filters', payload: { customerId: 7 } });
      const page = await t.call(
        'GET',
        `/v1/jobs?queue=filters&payload=${encodeURIComponent('payload.customerId = 42')}`,
      );
      expect((page.body as { jobs: { id: string }[] }).jobs.map((job) => job.id)).toEqual([a.id, b.id]);
      const newest = await t.call('GET', '/v1/jobs?queue=filters&order=desc&limit=2');
      const first = newest.body as { jobs: { id: string }[]; next: string };
      expect(first.jobs).toHaveLength(2);
      const rest = await t.call('GET', `/v1/jobs?queue=filters&order=desc&limit=2&after=${first.next}`);
      expect((rest.body as { jobs: { id: string }[] }).jobs.map((job) => job.id)).toEqual([a.id]);
      const ranged = await t.call('GET', `/v1/jobs?queue=filters&kind=f.a&idFrom=${a.id}&idTo=${b.id}`);
      expect((ranged.body as { jobs: { id: string }[] }).jobs.map((job) => job.id)).toEqual([a.id]);

      for (const [query, field] of [
        ['payload=payload.customerId%20%3E%2042', 'payload'],
        ['payload=customerId%20%3D%2042', 'payload'],
        ['payload=payload.a%20%3D%20%7B%7D', 'payload'],
        ['payload=payload.a%20%3D%201%3B%20DROP%20TABLE%20jobs', 'payload'],
        ['idFrom=9&idTo=3', 'idTo'],
        ['runAtFrom=yesterday', 'runAtFrom'],
        ['order=sideways', 'order'],
        ['state=pending,asleep', 'state'],
        ['sort=id', 'sort'],
      ] as const) {
        const refused = await t.call('GET', `/v1/jobs?${query}`);
        expect(refused.status, query).toBe(400);
        expect(refused.body, query).toMatchObject({ error: { field } });
      }
      expect((await t.call('GET', '/v1/dead-letters?state=dead')).status).toBe(400);
    });

    it("shows a job's attempts, lease and timeline", async () => {
      const job = await submit({ kind: 'detail.k', queue: 'detail', delayMs: 0, maxAttempts: 3 });
      const store = t.server.docket.store;
      const [first] = await store.jobClaim({ owner: 'w/1', limit: 1, leaseMs: 30_000, queues: ['detail'] });
      await store.jobFail({
        id: first!.id,
        token: first!.token,
        leaseOwner: first!.leaseOwner,
        error: { message: 'first try failed', kind: 'thrown' },
        decision: { kind: 'retry', delayMs: 0 },
      });
      const [second] = await store.jobClaim({ owner: 'w/2', limit: 1, leaseMs: 30_000, queues: ['detail'] });
      const { status, body } = await t.call('GET', `/v1/jobs/${job.id}/detail`);
      expect(status).toBe(200);
      const detail = body as Record<string, unknown> & {
        attempts: { attempt: number; outcome: string; owner: string; error: unknown }[];
        timeline: { event: string }[];
      };
      expect(detail.lease).toMatchObject({ owner: 'w/2', token: 2, live: true });
      expect(detail.attempts.map((a) => [a.attempt, a.outcome, a.owner])).toEqual([
        [1, 'failed', 'w/1'],
        [2, 'running', 'w/2'],
      ]);
      expect(detail.attempts[0]?.error).toMatchObject({ message: 'first try failed' });
      expect(detail.timeline.map((e) => e.event)).toEqual(['created', 'claimed', 'failed', 'claimed']);
      expect(second?.id).toBe(job.id);
      expect((await t.call('GET', '/v1/jobs/99999999/detail')).status).toBe(404);
    });

    it('answers the overview with per-queue counts and the activity with every minute', async () => {
      await submit({ kind: 'ov.k', queue: 'overview-q' });
      await t.call('POST', '/v1/queues/overview-paused/pause');
      const overview = (await t.call('GET', '/v1/overview')).body as {
        queues: { queue: string; scheduled: number; paused: boolean; estimated: string[] }[];
      };
      expect(overview.queues.find((q) => q.queue === 'overview-q')).toMatchObject({ scheduled: 1, estimated: [] });
      expect(overview.queues.find((q) => q.queue === 'overview-paused')).toMatchObject({ paused: true });
      // The server's retention, so the page can say when done jobs are not kept at all.
      expect((overview as unknown as { retentionMs: number }).retentionMs).toBe(7 * 24 * 3600_000);
      const activity = (await t.call('GET', '/v1/activity?minutes=10')).body as { buckets: unknown[] };
      expect(activity.buckets).toHaveLength(10);
      expect((await t.call('GET', '/v1/activity?minutes=0')).status).toBe(400);
    });

    it('bulk-retries by filter with progress, refuses a read token, and a repeat changes nothing', async () => {
      for (let i = 0; i < 5; i++) await submit({ kind: 'bulk.k', queue: 'bulk-q', delayMs: 0, payload: { i } });
      await parkAll('bulk-q');
      const filter = { queue: 'bulk-q' };
      const preview = await t.call('POST', '/v1/bulk/preview', {
        body: { action: 'retry', filter },
        token: TOKENS.read.token,
      });
      expect(preview.body).toEqual({ action: 'retry', matched: 5, estimated: false });
      const refused = await t.call('POST', '/v1/bulk', { body: { action: 'retry', filter }, token: TOKENS.read.token });
      expect(refused.status).toBe(403);
      const badState = await t.call('POST', '/v1/bulk', { body: { action: 'retry', filter: { state: 'pending' } } });
      expect(badState).toMatchObject({ status: 400, body: { error: { field: 'filter.state' } } });
      expect(
        (await t.call('POST', '/v1/bulk', { body: { action: 'retry', filter, runAt: '2030-01-01T00:00:00Z' } })).status,
      ).toBe(400);

      const started = await t.call('POST', '/v1/bulk', {
        body: { action: 'retry', filter },
        token: TOKENS.admin.token,
      });
      expect(started.status).toBe(202);
      const op = started.body as { id: string; total: number };
      expect(op.total).toBe(5);
      const finished = await settled(op.id);
      expect(finished).toMatchObject({ state: 'done', done: 5, affected: 5, error: null });
      expect(await t.server.docket.store.deadLetterList({ queue: 'bulk-q' })).toEqual([]);
      const again = await t.call('POST', '/v1/bulk', { body: { action: 'retry', filter } });
      expect(await settled((again.body as { id: string }).id)).toMatchObject({ state: 'done', affected: 0 });
      const listed = (await t.call('GET', '/v1/bulk')).body as { operations: { id: string }[] };
      expect(listed.operations.map((o) => o.id)).toEqual(expect.arrayContaining([op.id]));
    });

    it('runs a schedule now as a one-off job', async () => {
      await t.call('POST', '/v1/schedules', { body: { id: 'dash-s', cron: '0 3 * * *', job: { kind: 'sched.k' } } });
      const schedule = (await t.call('GET', '/v1/schedules/dash-s')).body as { upcoming: string[] };
      expect(schedule.upcoming).toHaveLength(5);
      expect(new Set(schedule.upcoming.map((at) => at.slice(11)))).toEqual(new Set(['03:00:00.000Z']));
      const ran = await t.call('POST', '/v1/schedules/dash-s/run-now');
      expect(ran.status).toBe(201);
      const job = (await t.call('GET', `/v1/jobs/${(ran.body as { id: string }).id}`)).body;
      expect(job).toMatchObject({ kind: 'sched.k', state: 'pending', scheduleId: null });
      expect((await t.call('POST', '/v1/schedules/no-such/run-now')).status).toBe(404);
    });

    it('streams overview and bulk events to a bearer token, and needs one', async () => {
      expect((await fetch(`${t.url}/v1/events`)).status).toBe(401);
      const response = await fetch(`${t.url}/v1/events?intervalMs=1000`, {
        headers: { authorization: `Bearer ${TOKENS.read.token}` },
      });
      expect(response.headers.get('content-type')).toContain('text/event-stream');
      for (let i = 0; i < 3; i++) await submit({ kind: 'sse.k', queue: 'sse-q', delayMs: 0 });
      await parkAll('sse-q');
      const reading = readEvents(response, (events) =>
        events.some((e) => e.event === 'bulk' && (e.data as { state: string }).state === 'done'),
      );
      await t.call('POST', '/v1/bulk', { body: { action: 'purge', filter: { queue: 'sse-q' } } });
      const { events } = await reading;
      expect(events[0]?.event).toBe('overview');
      const last = events.filter((e) => e.event === 'bulk').at(-1)?.data;
      expect(last).toMatchObject({ action: 'purge', state: 'done', total: 3, done: 3, affected: 3 });
    });
  });
}

describe('the event stream on server stop', () => {
  it('ends cleanly: the response completes', async () => {
    const t = await startTestServer({ kind: 'sqlite' });
    try {
      const response = await fetch(`${t.url}/v1/events?intervalMs=60000`, {
        headers: { authorization: `Bearer ${TOKENS.read.token}` },
      });
      const reading = readEvents(response, () => false);
      await new Promise((resolve) => setTimeout(resolve, 100));
      await t.server.close();
      const { events, ended } = await reading;
      expect(ended).toBe(true);
      expect(events.map((e) => e.event)).toEqual(['overview']);
    } finally {
      await t.stop();
    }
  });
});

describe('the event stream without tokens', () => {
  it('follows the tokenless loopback rules: streams to the listen address, 421 for another Host', async () => {
    const t = await startTestServer({ kind: 'sqlite', tokens: [] });
    try {
      const aborter = new AbortController();
      const response = await fetch(`${t.url}/v1/events`, { signal: aborter.signal });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toContain('text/event-stream');
      aborter.abort();
      // Raw requests: fetch would not send another Host, and both answers are refusals, never a stream.
      const rebound = await rawRequest(t.url, { path: '/v1/events', headers: { host: 'evil.example' } });
      expect(rebound.status).toBe(421);
      const crossSite = await rawRequest(t.url, {
        path: '/v1/events',
        headers: { host: new URL(t.url).host, origin: 'https://evil.example' },
      });
      expect(crossSite.status).toBe(403);
    } finally {
      await t.stop();
    }
  });
});
