/**
 * A bulk retry of 100,000 dead letters over the API on each store: the preview states the count,
 * the operation walks them in batches of 1,000 (never one long transaction), the stream's
 * progress reaches done = total, the store agrees afterwards (all pending, none dead), and the
 * API keeps answering while the walk runs. The dead letters are seeded in one SQL statement
 * (generate_series / a recursive CTE): parking 100,000 jobs through claims would take minutes.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POSTGRES_URL, storeKinds } from '../support/stores.js';
import { startTestServer, type TestServer, TOKENS } from './http-support.js';

const DEAD = 100_000;
const RETRY_POLICY = JSON.stringify({ baseDelayMs: 1000, factor: 2, maxDelayMs: 3_600_000, jitterRatio: 0 });

/** Inserts DEAD dead letters of queue `bulk` (ids 1..DEAD) straight into the server's store. */
async function seedDeadLetters(t: TestServer): Promise<void> {
  if (t.db.kind === 'sqlite') {
    const db = new Database(t.db.url.slice('sqlite:'.length));
    try {
      db.prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
         INSERT INTO dead_jobs (id, kind, queue, payload, priority, state, run_at, token, attempts, max_attempts,
                                retry_policy, errors, created_at, finished_at, parked_at)
         SELECT i, 'bulk.k', 'bulk', json_object('n', i), 0, 'dead', 0, 1, 1, 1, ?, '[]', 0, 1000, 1000 FROM n`,
      ).run(DEAD, RETRY_POLICY);
    } finally {
      db.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    const s = `"${t.db.schema}"`;
    await client.query(
      `INSERT INTO ${s}.dead_jobs (id, kind, queue, payload, priority, state, run_at, token, attempts, max_attempts,
                                   retry_policy, errors, created_at, finished_at, parked_at)
       SELECT i, 'bulk.k', 'bulk', jsonb_build_object('n', i), 0, 'dead', to_timestamp(0), 1, 1, 1, $2::jsonb, '[]',
              to_timestamp(0), to_timestamp(1), to_timestamp(1)
       FROM generate_series(1, $1::int) i`,
      [DEAD, RETRY_POLICY],
    );
    // Submits after the seed must not draw an id the seed took.
    await client.query(`SELECT setval('${s}.jobs_id_seq', $1::bigint)`, [DEAD]);
  } finally {
    await client.end();
  }
}

for (const kind of storeKinds()) {
  describe(`bulk retry of ${DEAD.toLocaleString('en')} dead letters (${kind})`, () => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startTestServer({ kind });
      await seedDeadLetters(t);
    }, 60_000);
    afterAll(async () => {
      await t?.stop();
    });

    it('retries every one in bounded batches, with progress to 100 %, and the store agrees', async () => {
      const filter = { queue: 'bulk', kind: 'bulk.k' };
      const preview = await t.call('POST', '/v1/bulk/preview', { body: { action: 'retry', filter } });
      expect(preview.body).toEqual({ action: 'retry', matched: DEAD, estimated: false });

      const stream = await fetch(`${t.url}/v1/events?intervalMs=60000`, {
        headers: { authorization: `Bearer ${TOKENS.read.token}` },
      });
      const progress: { done: number; total: number; state: string }[] = [];
      const reading = (async () => {
        const reader = stream.body!.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          buffer += decoder.decode(value, { stream: true });
          for (let cut = buffer.indexOf('\n\n'); cut >= 0; cut = buffer.indexOf('\n\n')) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            if (!block.includes('event: bulk')) continue;
            const data = block.split('\n').find((line) => line.startsWith('data:'))!;
            const event = JSON.parse(data.slice(5)) as { done: number; total: number; state: string };
            progress.push(event);
            if (event.state !== 'running') {
              await reader.cancel();
              return;
            }
          }
        }
      })();

      const started = await t.call('POST', '/v1/bulk', { body: { action: 'retry', filter } });
      expect(started.status).toBe(202);
      const id = (started.body as { id: string }).id;
      // While it walks, a second start of the same operation joins it, and reads still answer.
      const joined = await t.call('POST', '/v1/bulk', { body: { action: 'retry', filter } });
      if ((joined.body as { state: string }).state === 'running') {
        expect(joined).toMatchObject({ status: 200, body: { id, joined: true } });
      }
      expect((await t.call('GET', '/v1/overview')).status).toBe(200);
      await reading;

      const last = progress.at(-1);
      expect(last).toMatchObject({ state: 'done', done: DEAD, total: DEAD });
      // Progress came batch by batch (one event per batch of 1,000), never as one jump.
      expect(progress.length).toBeGreaterThanOrEqual(DEAD / 1000);
      const store = t.server.docket.store;
      expect(await store.jobCountMatching({ action: 'retry', filter })).toEqual({ count: 0, estimated: false });
      expect(await store.jobCountMatching({ action: 'reschedule', filter })).toEqual({ count: DEAD, estimated: false });
      const [firstPending] = await store.jobList({ queue: 'bulk', states: ['pending'], limit: 1 });
      expect(firstPending).toMatchObject({ id: '1', attempts: 0, state: 'pending' });
    }, 120_000);
  });
}
