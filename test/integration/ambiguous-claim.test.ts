/**
 * A claim that commits but whose answer is lost (the connection drops right after COMMIT): the
 * worker never learns the tokens, so it gives those leases back by the claim's owner. The job then
 * runs at once, not one lease later, and the lost claim costs no attempt (RELIABILITY.md fault
 * class 5: retrying gives the same final state, no double attempt).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { CommitCuttingProxy } from '../stress/commit-cutting-proxy.js';
import { createTestDatabase, POSTGRES_URL, type TestDatabase } from '../support/stores.js';

describe('a worker whose claim answer is lost (PostgreSQL)', () => {
  let db: TestDatabase;
  let proxy: CommitCuttingProxy;
  let viaProxy: Store;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    const target = new URL(POSTGRES_URL);
    proxy = new CommitCuttingProxy(target.hostname, Number(target.port || 5432));
    const port = await proxy.listen();
    target.host = `127.0.0.1:${port}`;
    viaProxy = await openStore(target.toString(), { schema: db.schema });
  });

  afterAll(async () => {
    await viaProxy?.close();
    await proxy?.close();
    await db?.drop();
  });

  it('releases the hidden claim by its owner, then runs the job at once with one attempt counted', async () => {
    const docket = await Docket.open({ store: viaProxy });
    const direct = await db.open();
    try {
      const started: { attempt: number; token: number }[] = [];
      docket.handle('hidden', (_payload, ctx) => {
        started.push({ attempt: ctx.attempt, token: ctx.token });
      });
      const { id } = await docket.submit({ kind: 'hidden' });
      // The first claim commits on the server, then its connection is cut before the answer. (A
      // worker's first claim also searches for lapsed leases: one autocommitted call of the stored
      // claim function, whose answer the proxy swallows.)
      const cut = proxy.arm((sql) => /\."claim_(pending|searching)_[0-9a-f]{12}"\(/.test(sql));
      // A 60 s lease: if the worker waited for it to lapse, the test would time out.
      const worker = docket.worker({ leaseMs: 60_000, pollIntervalMs: 200 });
      await worker.start();
      try {
        expect((await cut).failed).toBe(false);
        await expect.poll(async () => (await direct.jobGet({ id }))?.state, { timeout: 15_000 }).toBe('done');
      } finally {
        await worker.stop();
      }
      const job = await direct.jobGet({ id });
      // Token 1 went to the lost claim, token 2 to the claim that ran it; only one attempt counts.
      expect(job).toMatchObject({ state: 'done', token: 2, attempts: 1 });
      expect(started).toEqual([{ attempt: 1, token: 2 }]);
      expect(job?.errors).toEqual([]);
    } finally {
      await direct.close();
      await docket.close();
    }
  });
});
