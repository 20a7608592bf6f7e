/**
 * The HTTP API, unchanged, on a sharded store of three PostgreSQL clusters: submits spread over
 * the shards, reads by id reach the right shard, list pages merge with no duplicates or gaps,
 * stats and the dashboard overview sum over shards, and a remote worker claims and completes
 * jobs of every shard over the same routes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardNumberOfId } from '../../src/store/sharded/shard-ids.js';
import { startTestServer, type TestServer } from '../http/http-support.js';

type Json = Record<string, unknown>;

describe('HTTP API on a sharded store', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({ kind: 'postgres-sharded' });
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
  });

  it('submits, reads, pages, counts and runs jobs of every shard through the same routes', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 12; i += 1) {
      const response = await t.call('POST', '/v1/jobs', {
        body: { kind: 'http.sharded', queue: 'web', payload: { i } },
      });
      expect(response.status).toBe(201);
      ids.push((response.body as Json).id as string);
    }
    expect(new Set(ids.map((id) => shardNumberOfId(id))).size).toBe(3);
    for (const id of ids) {
      const response = await t.call('GET', `/v1/jobs/${id}`);
      expect(response.status).toBe(200);
      expect((response.body as Json).id).toBe(id);
    }
    const paged: string[] = [];
    let after = '';
    for (;;) {
      const page = (await t.call('GET', `/v1/jobs?queue=web&limit=5${after ? `&after=${after}` : ''}`)).body as Json;
      paged.push(...(page.jobs as Json[]).map((job) => job.id as string));
      if (typeof page.next !== 'string') break;
      after = page.next;
    }
    expect(paged).toEqual([...ids].sort((a, b) => Number(a) - Number(b)));
    const stats = (await t.call('GET', '/v1/stats')).body as Json;
    expect(JSON.stringify(stats)).toContain('"web"');
    const overview = await t.call('GET', '/v1/overview');
    expect(overview.status).toBe(200);
    expect(JSON.stringify(overview.body)).toMatch(/"available":12/);
    // A remote worker drains every shard.
    const done = new Set<string>();
    while (done.size < ids.length) {
      const claim = await t.call('POST', '/v1/worker/claim', {
        body: { workerId: 'remote-sharded', queues: ['web'], limit: 5, leaseMs: 30_000, waitMs: 2000 },
      });
      expect(claim.status).toBe(200);
      const jobs = (claim.body as Json).jobs as Json[];
      expect(jobs.length).toBeGreaterThan(0);
      for (const job of jobs) {
        const complete = await t.call('POST', `/v1/worker/jobs/${job.id as string}/complete`, {
          body: { token: job.token, receipt: job.receipt },
        });
        expect(complete.status).toBe(200);
        done.add(job.id as string);
      }
    }
    expect([...done].sort()).toEqual([...ids].sort());
    for (const id of ids) expect(((await t.call('GET', `/v1/jobs/${id}`)).body as Json).state).toBe('done');
  }, 60_000);
});
